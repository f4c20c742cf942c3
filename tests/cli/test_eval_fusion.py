"""``longembed eval --fuse bm25`` (issue 26): the flags, their errors, and a fused run's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.results import RunResults


def test_eval_help_lists_the_fusion_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    printed = " ".join(capsys.readouterr().out.split())
    assert "hybrid retrieval (the dense ranking fused with BM25's)" in printed
    for flag in ("--fuse {bm25}", "--fuse-method {rrf,linear}", "--fuse-weight W", "--fuse-k K"):
        assert flag in printed


def test_eval_fusion_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--model", "bm25", "--tasks", "passkey", "--lengths", "256", "--output", str(tmp_path / "r")]
    assert main([*base, "--fuse", "bm25"]) == 2
    assert "the model is BM25 already" in capsys.readouterr().err
    assert main([*base, "--fuse-weight", "0.3"]) == 2
    assert "fuse_weight given without fuse" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_eval_fused_run_goes_to_its_own_default_folder(
    tiny_models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGEMBED_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["eval", "--model", str(tiny_models["bert"]), "--tasks", "passkey", "--lengths", "256",
            "--queries-per-length", "5", "--no-estimate"]
    assert main(argv) == 0
    assert main([*argv, "--fuse", "bm25", "--fuse-method", "linear", "--fuse-weight", "0.7"]) == 0
    name = tiny_models["bert"].name
    dense = RunResults.load(tmp_path / "runs" / f"{name}-truncate-native")
    fused = RunResults.load(tmp_path / "runs" / f"{name}-truncate-native-bm25-linear")
    assert dense.config.retrieval().fusion is None
    assert fused.config.retrieval().fusion.to_dict() == {"source": "bm25", "method": "linear", "weight": 0.7}
    assert fused.tasks["passkey"].cache.documents_encoded == 0  # the dense run's vectors, from the cache
