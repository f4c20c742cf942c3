"""The one Strategy: its names, its dict (advice.json's config, an index's metadata, results.json), its
flags (eval's and index's, generated from its fields), and the readers of older files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from longembed.advice.strategies import ModelFacts, plan_candidates
from longembed.cli.main import build_parser, main
from longembed.errors import UserError
from longembed.extension.methods import APE
from longembed.results.advice import strategy_from_advice
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.strategy import Strategy

BASE = Strategy("m", "pi", 4096)


def test_every_name_advise_plans_round_trips_through_from_name() -> None:
    candidates, _ = plan_candidates(ModelFacts(APE, "mean", 512), 4096)
    for candidate in candidates:
        if candidate.tuned_from is not None:  # its rule is advice.json's, not the name's: said, not guessed
            with pytest.raises(UserError, match="--from-advice ADVICE.json --strategy"):
                Strategy.from_name(candidate.name, "m", BASE)
            continue
        strategy = Strategy.from_name(candidate.name, "m", BASE)
        assert strategy.name == candidate.name
        planned = dataclasses.replace(candidate.strategy, model="bm25" if strategy.lexical_only else "m")
        assert strategy == planned, candidate.name


@pytest.mark.parametrize("strategy", [
    Strategy("bm25"),
    Strategy("m", "pi", 4096, {"temperature": 0.9, "prompts": {"query": "q: "}}),
    Strategy("m", "truncate", 512, granularity="chunks", chunking="tokens:128", late=False),
    Strategy("m", "ntk", 8192, granularity="chunks", fuse="bm25", fuse_method="linear", fuse_weight=0.3,
             query_prompt="", document_prompt="passage: "),
    Strategy("m", fuse="bm25", fuse_k=10),
])
def test_to_dict_round_trips_through_json(strategy: Strategy) -> None:
    data = json.loads(json.dumps(strategy.to_dict()))
    assert Strategy.from_dict(data) == strategy
    assert Strategy.from_dict(data).to_dict() == data


def test_a_chunking_has_one_spelling_through_advice_json_and_an_index() -> None:
    overlap = Strategy("m", granularity="chunks", chunking=" tokens:256:32", late=False)
    assert overlap.chunking == "tokens:256:32" and overlap.name == "naive-chunks-overlap"
    data = json.loads(json.dumps(overlap.to_dict()))
    assert data["chunking"] == "tokens:256:32" and Strategy.from_dict(data) == overlap
    assert Strategy("m", granularity="chunks", chunking="tokens:256:0") == Strategy("m", granularity="chunks")


def test_overlapping_naive_chunks_have_their_own_name() -> None:
    base = Strategy("m", granularity="chunks", chunking="tokens:128")
    made = Strategy.from_name("naive-chunks-overlap+bm25", "m", base)
    assert (made.chunking, made.late, made.fuse, made.name) == ("tokens:128:16", False, "bm25",
                                                                "naive-chunks-overlap+bm25")
    assert Strategy.from_name("naive-chunks-overlap", "m", Strategy(chunking="tokens:128:40")).chunking == "tokens:128:40"
    with pytest.raises(UserError, match="names chunks without overlap.*naive-chunks-overlap"):
        Strategy.from_name("naive-chunks", "m", Strategy(chunking="tokens:128:40"))
    with pytest.raises(UserError, match="cannot overlap"):
        Strategy.from_name("naive-chunks-overlap", "m", Strategy(chunking="sentences:3"))
    late = Strategy("m", granularity="chunks", chunking="tokens:128:16")
    assert late.name == "late-chunks"  # late chunks see their context: no name of their own for overlap


def test_fusion_has_one_spelling() -> None:
    rrf = Strategy("m", fuse="bm25")
    assert (rrf.fuse_method, rrf.fuse_k, rrf.fuse_weight) == ("rrf", 60, None)
    assert rrf.fusion == Fusion("bm25", "rrf", 60)
    linear = Strategy("m", fuse="bm25", fuse_method="linear")
    assert (linear.fuse_k, linear.fuse_weight) == (None, 0.5)
    assert rrf.name == "truncate+bm25" and linear.name == "truncate+bm25-linear"
    with pytest.raises(UserError, match="fuse_weight is the linear mix's weight"):
        Strategy("m", fuse="bm25", fuse_weight=0.3)
    with pytest.raises(UserError, match="need an embedding model"):
        Strategy("bm25", fuse="bm25")
    with pytest.raises(UserError, match="granularity must be one of"):
        Strategy("m", granularity="pages")


def test_an_unknown_name_or_a_missing_model_is_refused() -> None:
    with pytest.raises(UserError, match="not a strategy name advise prints"):
        Strategy.from_name("colbert", "m", BASE)
    with pytest.raises(UserError, match="needs --model"):
        Strategy.from_name("truncate", None, BASE)


def test_a_dense_config_without_a_model_is_refused_not_bm25(tmp_path: Path) -> None:
    """The old reader's test ``model != BM25 and model is None`` could never be true: a dense config without
    a model (and an advice file without one) built a BM25-only index named after the dense strategy."""
    path = tmp_path / "advice.json"
    path.write_text(json.dumps({"recommended": "pi-4096", "strategies": [
        {"name": "pi-4096", "config": {"method": "pi", "max_length": 4096, "granularity": "document"}}]}))
    with pytest.raises(UserError, match="names no model"):
        strategy_from_advice(path)
    # with the advice's own model it is that model's strategy, never BM25
    path.write_text(json.dumps({"model": "m", "recommended": "pi-4096", "strategies": [
        {"name": "pi-4096", "config": {"method": "pi", "max_length": 4096}}]}))
    assert strategy_from_advice(path) == ("pi-4096", Strategy("m", "pi", 4096))


@pytest.mark.parametrize(("config", "message"), [
    ({"model": "m", "granularity": ["chunks"]}, "granularity must be a string"),
    ({"model": "m", "fusion": {"source": "bm25"}}, "must be an object with 'method'"),
    ({"model": "m", "chunking": "tokens:0"}, "chunk"),
    ({"model": "m", "max_length": "4096"}, "max_length must be an integer"),
    ({"model": "m", "late": "yes"}, "late must be true or false"),
])
def test_a_malformed_config_fails_in_one_line(tmp_path: Path, config: dict, message: str) -> None:
    path = tmp_path / "advice.json"
    path.write_text(json.dumps({"recommended": "x", "strategies": [{"name": "x", "config": config}]}))
    with pytest.raises(UserError, match=message):
        strategy_from_advice(path)


def test_from_advice_reads_the_config_object_or_a_format_1_record(tmp_path: Path) -> None:
    path = tmp_path / "advice.json"
    path.write_text(json.dumps({"model": "m", "recommended": "late-chunks+bm25", "strategies": [
        {"name": "bm25", "kind": "bm25"},
        {"name": "late-chunks+bm25", "config": {"model": "m", "method": "pi", "max_length": 4096, "granularity": "chunks",
                                                "chunking": "tokens:128", "late": True, "fuse": "bm25",
                                                "fuse_method": "linear", "fuse_weight": 0.7, "temperature": 0.9,
                                                "batch_size": 8}}]}))
    assert strategy_from_advice(path, "bm25") == ("bm25", Strategy("bm25"))
    assert strategy_from_advice(path) == ("late-chunks+bm25", Strategy(
        "m", "pi", 4096, {"temperature": 0.9}, "chunks", "tokens:128", True, "bm25", "linear", 0.7))
    path.write_text(json.dumps({"model": "m", "recommendation": {"best": "x", "choice": "naive-chunks"}, "strategies": [
        {"name": "naive-chunks", "kind": "dense", "method": "truncate", "max_length": None,
         "granularity": {"level": "chunks", "chunking": "tokens:256", "late": False}, "fusion": None}]}))
    assert strategy_from_advice(path) == ("naive-chunks", Strategy("m", "truncate", None, granularity="chunks",
                                                                   late=False))
    path.write_text("{}")
    with pytest.raises(UserError, match="not an advice.json"):
        strategy_from_advice(path)


def test_every_committed_advice_file_gives_its_strategies() -> None:
    files = sorted((Path(__file__).resolve().parents[2] / "results").rglob("advice.json"))
    assert files
    for path in files:
        advice = json.loads(path.read_text())
        for record in advice["strategies"]:
            name, strategy = strategy_from_advice(path, record["name"])
            assert name == record["name"]
            assert strategy.lexical_only == (record["kind"] == "bm25")
            assert strategy.chunked == ((record.get("granularity") or {}).get("level") == "chunks")


def _parser(command: str):
    return build_parser([command])._subparsers._group_actions[0].choices[command]  # noqa: SLF001


def test_eval_and_index_take_the_strategys_flags_with_the_same_help() -> None:
    flags = [f for f in dataclasses.fields(Strategy) if f.metadata.get("flag", True)]
    by_dest = {}
    for command in ("eval", "index"):
        actions = {a.dest: a for a in _parser(command)._actions}  # noqa: SLF001
        by_dest[command] = actions
        for field in flags:
            assert field.name in actions, (command, field.name)
    for field in flags:
        ev, ix = by_dest["eval"][field.name], by_dest["index"][field.name]
        if field.name == "granularity":  # index's default reads every token (naive chunks): its help says so
            assert (ev.option_strings, ev.choices) == (ix.option_strings, ix.choices) and "Default: chunks" in ix.help
            continue
        assert (ev.option_strings, ev.help, ev.choices) == (ix.option_strings, ix.help, ix.choices)


def test_the_flags_build_the_strategy() -> None:
    from longembed.cli.options import strategy_from_args

    args = build_parser(["eval"]).parse_args(
        ["eval", "--model", "m", "--method", "pi", "--max-length", "4096", "--temperature", "0.9",
         "--granularity", "chunks", "--naive", "--fuse", "bm25", "--fuse-k", "10", "--query-prompt", ""])
    assert strategy_from_args(args) == Strategy("m", "pi", 4096, {"temperature": 0.9}, "chunks", late=False,
                                                fuse="bm25", fuse_k=10, query_prompt="")


def test_bm25_with_dense_flags_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.txt").write_text("some text")
    assert main(["index", str(tmp_path), "--index", str(tmp_path / "i"), "--model", "bm25", "--fuse", "bm25"]) == 2
    assert "--fuse need an embedding model" in capsys.readouterr().err


def test_from_advice_refuses_flags_it_would_ignore(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.txt").write_text("some text")
    advice = tmp_path / "advice.json"
    advice.write_text(json.dumps({"model": "m", "recommended": "bm25", "strategies": [{"name": "bm25", "kind": "bm25"}]}))
    for extra in (["--model", "e5"], ["--fuse", "bm25"], ["--method", "pi"]):
        code = main(["index", str(tmp_path), "--index", str(tmp_path / "i"), "--from-advice", str(advice), *extra])
        assert code == 2
        assert "--from-advice gives the whole strategy" in capsys.readouterr().err
    assert not (tmp_path / "i").exists()
