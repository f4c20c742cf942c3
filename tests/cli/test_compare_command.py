"""``longembed compare``: tables printed, the three files written, refusals as one-line errors."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from longembed.cli.main import BROKEN_PIPE_STATUS, main
from longembed.evaluation.runner import evaluate_model
from longembed.results import Comparison, RunResults
from longembed.retrieval.bm25 import BM25Model

OLD = Path(__file__).parents[1] / "results" / "fixtures" / "results_9ebbcc4" / "bm25"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A BM25 passkey run at 256 (every passkey found), a copy with every fourth query lost (13 of 50),
    and a copy with every second lost (25)."""
    root = tmp_path_factory.mktemp("compare")
    good = evaluate_model(BM25Model(), ["passkey"], lengths=[256], output_dir=root / "good",
                          show_progress=False, log=None, estimate=False)
    folders = {"good": root / "good"}
    for name, step in (("worse", 4), ("worst", 2)):
        copied = copy.deepcopy(good)
        unit = copied.tasks["passkey"].lengths[256]
        for q in list(unit.per_query)[::step]:
            unit.per_query[q] = 0.0
        copied.save(root / name / "results.json")
        folders[name] = root / name
    return folders


def test_compare_prints_the_table_and_writes_three_files(runs: dict[str, Path], tmp_path: Path, capsys) -> None:
    code = main(["compare", str(runs["good"]), str(runs["worst"]), "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "worst (B) vs good (A)"
    assert lines[3].split() == ["Passkey", "256", "50", "100.00", "50.00", "-50.00", "[-64.00,", "-36.00]",
                                "1.0e-04", "*"]
    assert "raw p-value (two runs compared" in out
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"comparison.md", "comparison.json", "comparison.png"}
    for name in ("comparison.md", "comparison.json", "comparison.png"):
        assert f"wrote {tmp_path / 'out' / name}" in out
    saved = Comparison.load(tmp_path / "out")
    assert saved.pairs[0].differences[0].difference.estimate == -50.0 and saved.pairs[0].differences[0].significant
    assert json.loads((tmp_path / "out" / "comparison.json").read_text())["format"] == "longembed-comparison/1"
    assert "| Passkey | 256 | 50 | 100.00 | 50.00 | -50.00 |" in (tmp_path / "out" / "comparison.md").read_text()


def test_the_files_are_written_even_when_stdout_is_a_closed_pipe(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys,
) -> None:
    """`longembed compare A B --output DIR | head -3`: head closes the pipe before the table ends."""
    class ClosedPipe:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            pass

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = main(["compare", str(runs["good"]), str(runs["worst"]), "--output", str(tmp_path / "out")])
    assert code == BROKEN_PIPE_STATUS  # quiet, as a tool the signal ended
    assert capsys.readouterr().err == ""
    assert Comparison.load(tmp_path / "out").pairs[0].differences[0].difference.estimate == -50.0
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"comparison.md", "comparison.json", "comparison.png"}


@pytest.mark.slow
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(runs: dict[str, Path]) -> None:
    """A real process whose stdout is a pipe nobody reads: no traceback, no "Exception ignored" at exit,
    no error line; the shell's status for a tool that SIGPIPE ended."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "longembed.cli.main", "compare", str(runs["good"]),
                               str(runs["worst"])], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (BROKEN_PIPE_STATUS, "")


def test_three_runs_against_a_baseline_are_holm_adjusted(runs: dict[str, Path], capsys) -> None:
    code = main(["compare", str(runs["worse"]), str(runs["worst"]), "--baseline", str(runs["good"]),
                 "--resamples", "2000"])
    out = capsys.readouterr().out
    assert code == 0
    titles = [line for line in out.splitlines() if " vs " in line]
    assert titles == ["worse (B) vs good (A)", "worst (B) vs good (A)"]
    assert "Holm-adjusted over all 2 tests" in out and "2000 resamples" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("Passkey")]
    # raw p: 13 lost queries are enumerated exactly (2 / 2^13), 25 take 2000 random flips (1 / 2001);
    # Holm: the smaller x 2 = 4.9e-04, the larger x 1 = 5.0e-04
    assert [(r[5], r[-2], r[-1]) for r in rows] == [("-26.00", "4.9e-04", "*"), ("-50.00", "5.0e-04", "*")]


def test_an_old_results_file_is_a_one_line_error(runs: dict[str, Path], capsys) -> None:
    code = main(["compare", str(runs["good"]), str(OLD)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("longembed compare: error: run bm25 (") and "rerun it" in err
    assert len(err.strip().splitlines()) == 1
    assert RunResults.load(runs["good"]).has_per_query  # the new run itself is fine


def test_a_shared_and_a_distinct_needle_run_are_a_one_line_error(tmp_path: Path, capsys) -> None:
    lease = tmp_path / "lease"
    lease.mkdir()
    (lease / "lease.txt").write_text(" ".join(f"Clause {i} says the lessee keeps the garden tidy." for i in range(300)),
                                     encoding="utf-8")
    base = ["eval", "--model", "bm25", "--tasks", "needle", "--lengths", "256", "--haystack", str(lease)]
    assert main([*base, "--output", str(tmp_path / "shared")]) == 0
    assert main([*base, "--needle-haystacks", "distinct", "--output", str(tmp_path / "distinct")]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "shared"), str(tmp_path / "distinct")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("longembed compare: error: runs shared (") and len(err.strip().splitlines()) == 1
    assert "scored different data for needle at length 256" in err
    assert "their task options differ (needle_haystacks: the default vs 'distinct')" in err
