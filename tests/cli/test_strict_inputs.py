"""Inputs that were silently ignored or failed with a traceback (issue 51, part 6): symbolic links that
lead nowhere, ``search -k 0``, ``train contextual`` without data, ``--sample-seed`` alone, and an
``advise --contextual`` folder trained from another model.  Each is now a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.advice.advisor import check_trained_from
from longembed.cli.main import main
from longembed.errors import UserError
from longembed.evaluation.spec import EvalSpec
from longembed.retrieval.model_files import hash_file
from longembed.search.sources import SourceOptions, read_sources

TINY = Path(__file__).resolve().parents[1] / "search" / "data" / "tiny_beir"


@pytest.mark.parametrize("target", ["nowhere.txt", "loop.txt"])
def test_a_symbolic_link_that_leads_nowhere_is_named_not_skipped(tmp_path: Path, target: str) -> None:
    (tmp_path / "a.txt").write_text("the tides of the sea")
    (tmp_path / "loop.txt").symlink_to(target)  # broken, or a link to itself
    for glob in (None, "**/*"):
        with pytest.raises(UserError, match=f"loop.txt: cannot be read .*a symbolic link to {target}"):
            read_sources([tmp_path], SourceOptions(glob=glob))


def test_a_link_to_a_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "a.txt").write_text("the tides of the sea")
    (tmp_path / "docs" / "b.txt").symlink_to(tmp_path / "a.txt")
    assert [d.id for d in read_sources([tmp_path / "docs"])] == ["b.txt"]


def test_search_k_0_is_refused_not_read_as_the_default(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.txt").write_text("the tides of the sea")
    (tmp_path / "b.txt").write_text("the moons of the planets")
    assert main(["index", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--index", str(tmp_path / "i"),
                 "--model", "bm25"]) == 0
    capsys.readouterr()
    assert main(["search", "--index", str(tmp_path / "i"), "tides", "-k", "0"]) == 2
    assert "-k must be at least 1, got 0" in capsys.readouterr().err
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "tides"}\n')
    assert main(["search", "--index", str(tmp_path / "i"), "--queries", str(queries), "--run", str(tmp_path / "r"),
                 "-k", "0"]) == 2
    assert not (tmp_path / "r").exists()
    assert main(["search", "--index", str(tmp_path / "i"), "tides", "-k", "1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["results"]) == 1


def test_train_contextual_without_data_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    """Was a TypeError from contextual/data.py (after loading the model)."""
    monkeypatch.delenv("LONGEMBED_DATA_DIR", raising=False)
    code = main(["train", "contextual", "--model", str(tmp_path / "no-model"), "--output", str(tmp_path / "out")])
    assert code == 2 and "give --data-dir (or set $LONGEMBED_DATA_DIR)" in capsys.readouterr().err


@pytest.mark.parametrize("seed", ["3", "0"])
def test_sample_seed_without_max_queries_is_refused(tmp_path: Path, capsys, seed: str) -> None:
    code = main(["eval", "--model", "bm25", "--task-dir", str(TINY), "--sample-seed", seed,
                 "--output", str(tmp_path / "run")])
    assert code == 2 and "--sample-seed seeds --max-queries' sample" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    with pytest.raises(UserError, match="give --max-queries N too"):
        EvalSpec(sample_seed=3)
    assert EvalSpec(sample_seed=3, max_queries=5).sample_seed == 3


def _model_folder(root: Path, weights: bytes) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "bert"}')
    (root / "model.safetensors").write_bytes(weights)
    return root


def test_a_contextual_folder_trained_from_another_model_is_refused(tmp_path: Path) -> None:
    minilm = _model_folder(tmp_path / "minilm", b"minilm weights")
    e5 = _model_folder(tmp_path / "e5", b"e5 weights")
    trained = tmp_path / "trained"
    trained.mkdir()
    files = {name: {k: hash_file(minilm / name)[k] for k in ("size", "sha256")}
             for name in ("config.json", "model.safetensors")}
    (trained / "longembed_contextual.json").write_text(json.dumps(
        {"model": {"name": str(minilm), "files": files}, "encoder": {"method": "pi", "max_length": 1024}}))
    check_trained_from(trained, minilm, "minilm")  # its own base model: accepted
    with pytest.raises(UserError, match=r"fine-tuned from '.*minilm', not from the advised model 'e5' \(its "
                                        r"model.safetensors differ\)"):
        check_trained_from(trained, e5, "e5")
    (trained / "longembed_contextual.json").write_text(json.dumps({"encoder": {"method": "pi"}}))
    with pytest.raises(UserError, match="not a valid contextual-training record"):
        check_trained_from(trained, minilm, "minilm")
