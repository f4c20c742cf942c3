"""``longembed eval --queries-per-length N`` and ``--haystack DIR`` (passkey and needle), and
``--needle-haystacks shared|distinct`` (needle)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.results import RunResults
from longembed.tasks import get_task


def lease_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "lease.txt").write_text(" ".join(f"Clause {i} says the lessee keeps the garden tidy." for i in range(300)),
                                    encoding="utf-8")
    return root


def needles_file(path: Path, count: int) -> Path:
    rows = [{"fact": f"Quibble {i} is the capital of Zarn {i}.", "question": f"What is the capital of Zarn {i}?"}
            for i in range(count)]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


def test_eval_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    printed = " ".join(capsys.readouterr().out.split())
    assert "--queries-per-length N passkey/needle: queries per length" in printed
    assert "--haystack DIR passkey/needle: build them from this folder's .txt/.jsonl documents" in printed
    assert ("--needle-haystacks {shared,distinct} needle: shared: every document of a length is one haystack "
            "prefix with its own needle inserted") in printed
    assert "distinct: every document is cut from its own window of the haystack" in printed


def test_eval_queries_per_length_and_haystack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LONGEMBED_DATA_DIR", raising=False)
    out = tmp_path / "run"
    argv = ["eval", "--model", "bm25", "--tasks", "passkey,needle", "--lengths", "256,1k",
            "--queries-per-length", "5", "--haystack", str(lease_folder(tmp_path / "lease")), "--output", str(out)]
    assert main(argv) == 0
    results = RunResults.load(out)
    for task in ("passkey", "needle"):  # needle from the haystack: no --data-dir needed
        assert {n: (u.counts.documents, u.counts.queries) for n, u in results.tasks[task].lengths.items()} == {
            256: (10, 5), 1024: (10, 5)
        }
    options = results.config.task_options
    assert options["queries_per_length"] == 5 and options["haystack"]["words"] == 2700
    assert options["haystack"]["path"] == str(tmp_path / "lease") and len(options["haystack"]["sha256"]) == 64


def test_eval_task_option_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--model", "bm25", "--lengths", "256", "--output", str(tmp_path / "r")]
    assert main([*base, "--tasks", "passkey", "--queries-per-length", "0"]) == 2
    assert "queries_per_length must be a whole number >= 1" in capsys.readouterr().err
    assert main([*base, "--tasks", "hotpotqa", "--queries-per-length", "100"]) == 2
    assert "--queries-per-length: only passkey and needle take it" in capsys.readouterr().err
    assert main([*base, "--tasks", "passkey", "--haystack", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main([*base, "--tasks", "passkey", "--queries-per-length", "1251"]) == 2
    assert "at most 1250 queries per length" in capsys.readouterr().err


def test_eval_needles_file_with_more_queries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lease = lease_folder(tmp_path / "lease")
    base = ["eval", "--model", "bm25", "--tasks", "needle", "--lengths", "256", "--haystack", str(lease)]
    few = needles_file(tmp_path / "few.jsonl", 7)
    assert main([*base, "--needles", str(few), "--queries-per-length", "60", "--output", str(tmp_path / "a")]) == 2
    assert "60 queries per length need 120 needles (one document each), the needles file has 7" in (
        capsys.readouterr().err
    )
    many = needles_file(tmp_path / "many.jsonl", 130)
    assert main([*base, "--needles", str(many), "--queries-per-length", "60", "--output", str(tmp_path / "b")]) == 0
    assert f"needle: 130 needles from {many} (120 documents, 60 queries per length)" in capsys.readouterr().out
    counts = RunResults.load(tmp_path / "b").tasks["needle"].counts
    assert (counts.documents, counts.queries) == (120, 60)


def test_eval_needle_haystacks_reaches_the_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lease = lease_folder(tmp_path / "lease")
    base = ["eval", "--model", "bm25", "--tasks", "needle", "--lengths", "256", "--haystack", str(lease)]
    assert main([*base, "--needle-haystacks", "distinct", "--output", str(tmp_path / "distinct")]) == 0
    assert "needle: distinct haystacks: every document is cut from its own window" in capsys.readouterr().out
    assert main([*base, "--output", str(tmp_path / "shared")]) == 0
    distinct, shared = RunResults.load(tmp_path / "distinct"), RunResults.load(tmp_path / "shared")
    assert distinct.config.task_options["needle_haystacks"] == "distinct"
    assert "needle_haystacks" not in shared.config.task_options
    expected = get_task("needle", haystack=lease, haystacks="distinct").load(None, 256).fingerprint()
    assert distinct.tasks["needle"].lengths[256].data_sha256 == expected
    assert shared.tasks["needle"].lengths[256].data_sha256 != expected
    # with --needles the CLI builds the needle task itself: it gets the option too
    many = needles_file(tmp_path / "many.jsonl", 100)
    argv = [*base, "--needles", str(many), "--needle-haystacks", "distinct", "--output", str(tmp_path / "own")]
    assert main(argv) == 0
    own = get_task("needle", needles_path=many, haystack=lease, haystacks="distinct").load(None, 256)
    assert RunResults.load(tmp_path / "own").tasks["needle"].lengths[256].data_sha256 == own.fingerprint()


def test_eval_needle_haystacks_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--model", "bm25", "--lengths", "256", "--output", str(tmp_path / "r")]
    with pytest.raises(SystemExit):
        main([*base, "--tasks", "needle", "--needle-haystacks", "mixed"])
    assert "argument --needle-haystacks: invalid choice: 'mixed'" in capsys.readouterr().err
    assert main([*base, "--tasks", "passkey", "--needle-haystacks", "distinct"]) == 2
    assert "--needle-haystacks: only needle takes it, and it is not among the tasks (passkey)" in (
        capsys.readouterr().err
    )
