"""``longembed index --from-advice`` reads advice.json strictly (issue 51, part 2): every field typed, unknown
fields named, a config that is not the strategy its name says refused, flags beside it refused, and a
refused build leaves no folder or build.lock behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.errors import UserError
from longembed.results.advice import strategy_from_advice
from longembed.retrieval.strategy import Strategy
from longembed.search.build import build_index
from longembed.search.sources import read_sources

PI = {"model": "m", "method": "pi", "max_length": 4096, "encoder_options": {}, "granularity": "document",
      "chunking": None, "late": None, "fuse": None, "fuse_method": None, "fuse_weight": None, "fuse_k": None,
      "query_prompt": None, "document_prompt": None}


def write_advice(tmp_path: Path, config: dict | None = None, name: str = "pi-4096", **record: object) -> Path:
    path = tmp_path / "advice.json"
    strategy = {"name": name, "kind": "dense", **record}
    if config is not None:
        strategy["config"] = config
    others = [] if name == "bm25" else [{"name": "bm25", "kind": "bm25", "config": {"model": "bm25"}}]
    path.write_text(json.dumps({"model": "m", "recommended": name, "strategies": [*others, strategy]}))
    return path


@pytest.mark.parametrize(("config", "message"), [
    ({**PI, "modle": "e5"}, "unknown field 'modle'"),
    ({**PI, "encoder_options": {"temprature": 0.5}}, r"encoder_options: unknown option\(s\) \['temprature'\]"),
    ({**PI, "encoder_options": [1]}, "encoder_options must be an object"),
    ({**PI, "query_prompt": 3}, "query_prompt must be a string or null, got an integer 3"),
    ({**PI, "fuse_k": "60", "fuse": "bm25"}, "fuse_k must be an integer"),
    ({**PI, "fuse_weight": True, "fuse": "bm25"}, "fuse_weight must be a number"),
    ({**PI, "late": "no"}, "late must be true or false"),
    ({**PI, "fusion": {"method": "rrf", "sorce": "bm25"}}, "fusion: unknown field 'sorce'"),
    ({**PI, "encoder_options": {"temperature": 7}}, "temperature"),  # checked as load_encoder will
    ({**PI, "method": "pii"}, "unknown method 'pii'"),
])
def test_a_config_off_the_schema_is_named_in_one_line(tmp_path: Path, config: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        strategy_from_advice(write_advice(tmp_path, config))


@pytest.mark.parametrize(("config", "said"), [
    ({**PI, "model": "bm25"}, "describes the strategy 'bm25', not 'pi-4096'"),  # BM25 under a dense name
    ({**PI, "fusion": {"method": "rrf"}}, "describes the strategy 'pi-4096\\+bm25'"),  # a fusion without +bm25
    ({**PI, "granularity": "chunks", "chunking": "tokens:128", "late": True}, "'late-chunks', not 'pi-4096'"),
])
def test_a_config_that_is_not_the_strategy_its_name_says_is_refused(tmp_path: Path, config: dict, said: str) -> None:
    with pytest.raises(UserError, match=said):
        strategy_from_advice(write_advice(tmp_path, config))


def test_the_fusion_method_may_be_tuned_under_the_same_name(tmp_path: Path) -> None:
    config = {**PI, "fuse": "bm25", "fuse_method": "linear", "fuse_weight": 0.3}
    assert strategy_from_advice(write_advice(tmp_path, config, name="pi-4096+bm25"))[1].fuse_weight == 0.3


@pytest.mark.parametrize(("record", "message"), [
    ({"granularity": "chunks"}, "granularity must be an object or null, got a string 'chunks'"),
    ({"fusion": {"method": "rrf"}}, "fusion must name its 'source'"),
    ({"method": "pi", "max_length": "4096"}, "max_length must be an integer"),
])
def test_a_format_1_record_is_typed(tmp_path: Path, record: dict, message: str) -> None:
    """A record without config (format 1): a string granularity was an AttributeError, a fusion without its
    source a KeyError, both tracebacks."""
    with pytest.raises(UserError, match=message):
        strategy_from_advice(write_advice(tmp_path, None, **record))


def test_the_top_level_fields_are_typed(tmp_path: Path) -> None:
    path = tmp_path / "advice.json"
    for advice, message in (
        ({"model": 3, "recommended": "bm25", "strategies": [{"name": "bm25"}]}, "model must be a string"),
        ({"recommended": ["bm25"], "strategies": [{"name": "bm25"}]}, "recommended must be a string"),
        ({"recommended": "bm25", "strategies": [{"name": 1}]}, r"strategies\[1\] must be an object with a 'name'"),
        ({"recommended": "bm25", "strategies": [{"name": "bm25"}, {"name": "bm25"}]}, "two strategies are called"),
    ):
        path.write_text(json.dumps(advice))
        with pytest.raises(UserError, match=message):
            strategy_from_advice(path)
    with pytest.raises(UserError, match="a folder; give its advice.json"):
        strategy_from_advice(tmp_path)


def test_from_advice_alone_builds_its_strategy(tmp_path: Path, capsys) -> None:
    """The index parser's defaults (--model default, --method None) read as flags given beside --from-advice
    refused every --from-advice build."""
    (tmp_path / "a.txt").write_text("the tides of the sea")
    advice = write_advice(tmp_path, {"model": "bm25"}, name="bm25")
    assert main(["index", str(tmp_path / "a.txt"), "--index", str(tmp_path / "i"), "--from-advice", str(advice)]) == 0
    assert "strategy bm25" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [["--model", "default"], ["--method", "truncate"], ["--granularity", "document"],
                                   ["--late"], ["--mod", "e5"]])
def test_a_flag_beside_from_advice_is_refused_even_at_its_default(tmp_path: Path, capsys, extra: list[str]) -> None:
    (tmp_path / "a.txt").write_text("the tides of the sea")
    advice = write_advice(tmp_path, {"model": "bm25"}, name="bm25")
    code = main(["index", str(tmp_path / "a.txt"), "--index", str(tmp_path / "i"), "--from-advice", str(advice), *extra])
    flag = {"--mod": "--model"}.get(extra[0], extra[0])
    assert code == 2 and f"drop {flag} " in capsys.readouterr().err
    assert not (tmp_path / "i").exists()


def test_a_refused_build_leaves_no_folder_and_no_lock(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.txt").write_text("the tides of the sea")
    index = tmp_path / "new" / "i"
    for config in ({**PI, "modle": "e5"}, {**PI, "model": str(tmp_path / "no-such-model")}):
        advice = write_advice(tmp_path, config)
        assert main(["index", str(tmp_path / "a.txt"), "--index", str(index), "--from-advice", str(advice)]) == 2
        assert not index.parent.exists(), capsys.readouterr().err
    # an existing folder keeps what it held, and gets no lock
    index.mkdir(parents=True)
    (index / "notes.txt").write_text("mine")
    assert main(["index", str(tmp_path / "a.txt"), "--index", str(index), "--model", str(tmp_path / "none")]) == 2
    assert sorted(p.name for p in index.iterdir()) == ["notes.txt"]


def test_a_build_that_fails_before_its_table_removes_its_folder_and_lock(tmp_path: Path) -> None:
    """The model is loaded inside the build's lock: a missing one left the index folder (and its missing
    parents, which lancedb.connect makes) holding build.lock."""
    (tmp_path / "a.txt").write_text("the tides of the sea")
    documents = read_sources([tmp_path / "a.txt"])
    index = tmp_path / "new" / "i"
    with pytest.raises(UserError, match="no model folder"):
        build_index(index, documents, Strategy(str(tmp_path / "no-such-model"), "pi", 4096), log=None)
    assert not (tmp_path / "new").exists()
    index.mkdir(parents=True)  # a folder the user made stays, without a lock
    with pytest.raises(UserError, match="no model folder"):
        build_index(index, documents, Strategy(str(tmp_path / "no-such-model"), "pi", 4096), log=None)
    assert index.is_dir() and not any(index.iterdir())


def test_a_built_index_keeps_its_lock_file_and_table(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("the tides of the sea")
    assert main(["index", str(tmp_path / "a.txt"), "--index", str(tmp_path / "i"), "--model", "bm25"]) == 0
    assert {"build.lock", "chunks.lance"} <= {p.name for p in (tmp_path / "i").iterdir()}


def test_every_advise_strategy_name_matches_its_config() -> None:
    for name in ("truncate", "pi-4096", "naive-chunks", "late-chunks", "pi-4096+bm25"):
        strategy = Strategy.from_name(name, "m")
        assert strategy.name == name
