"""``longembed advise`` on the command line: end to end on a tiny model with --haystack (advice.md,
advice.png, advice.json and a run per strategy), and the errors a user meets first."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import words

from longembed.cli.main import main
from longembed.results import Advice, RunResults


@pytest.mark.slow
def test_advise_with_a_haystack_writes_the_advice(
    tiny_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    haystack = tmp_path / "docs"
    haystack.mkdir()
    (haystack / "notes.jsonl").write_text("\n".join(f'{{"text": "{words(60, seed=i)}."}}' for i in range(8)) + "\n")
    out = tmp_path / "advice"
    argv = ["advise", "--model", str(tiny_models["nomic"]), "--max-length", "64", "--haystack", str(haystack),
            "--tasks", "passkey", "--lengths", "256", "--queries-per-length", "10", "--chunking", "tokens:8",
            "--output", str(out), "--cache-dir", str(tmp_path / "cache"), "--sample-documents", "3",
            "--latency-queries", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.index("estimate (before any encoding)") < re.search(r"\[1/\d+\] bm25", printed).start()
    advice = Advice.load(out)
    assert advice.position_scheme == "rope" and "ntk-64" in [s.name for s in advice.strategies]
    assert advice.tasks == ["passkey"] and advice.sampling is None
    markdown = (out / "advice.md").read_text()
    assert markdown.startswith(f"# Which strategy for {tiny_models['nomic'].name} on passkey")
    assert f"**Use {advice.recommendation.choice}.**" in markdown
    assert "| strategy | method | score [95% interval] | vs best [95% interval] | lower bound | verdict |" in markdown
    assert "timings on this machine" in markdown and "![score against cost](advice.png)" in markdown
    assert (out / "advice.png").read_bytes()[:4] == b"\x89PNG"
    run = RunResults.load(out / "runs" / "ntk-64")
    assert run.config.task_options["queries_per_length"] == 10 and run.config.task_options["haystack"]["documents"] == 8
    assert f"use {advice.recommendation.choice}:" in printed and "advice.json" in printed
    # the printed eval commands reproduce the scores (the recommendation, a fused late-chunks run, bm25)
    for name in dict.fromkeys([advice.recommendation.choice, "late-chunks+bm25", "bm25"]):
        strategy = advice.strategy(name)
        assert main(shlex.split(strategy.commands["eval"])[1:]) == 0
        again = RunResults.load(out / "rerun" / name)
        assert again.average == strategy.score and again.config.strategy == run_of(out, name).config.strategy
        assert again.config.encoder.get("method") == run_of(out, name).config.encoder.get("method")


def run_of(out: Path, name: str) -> RunResults:
    return RunResults.load(out / "runs" / name)


def test_advise_dry_run_prints_the_estimate_and_runs_nothing(
    tiny_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["advise", "--model", str(tiny_models["bert"]), "--max-length", "64", "--tasks", "passkey", "--lengths",
            "256", "--queries-per-length", "10", "--chunking", "tokens:8", "--output", str(tmp_path / "out"), "--cache-dir",
            str(tmp_path / "cache"), "--dry-run"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "estimate (before any encoding)" in printed and "pi-64" in printed and "dry run:" in printed
    assert "[1/" not in printed and "use " not in printed  # no strategy ran, nothing recommended
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "bm25", "--tasks", "passkey"], "BM25 is always one of the strategies"),
    (["--model", "default"], "advise needs your data"),
    (["--model", "default", "--task-name", "x", "--tasks", "passkey"], "no --task-dir is given"),
])
def test_advise_errors_name_what_to_change(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["advise", *argv, "--output", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_advise_needs_an_output_folder(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["advise", "--model", "default", "--tasks", "passkey"])
    assert "--output" in capsys.readouterr().err
