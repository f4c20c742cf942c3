"""``longembed eval --task-dir DIR --task-name NAME``: a run on a user's folder, recorded in results.json
and shown by ``longembed report`` under its name."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import LO, build_tiny, words
from transformers import AutoTokenizer

from longembed.cli.main import main
from longembed.evaluation.runner import DATA_DIR_ENV
from longembed.results import RunResults
from longembed.results.intervals import bootstrap_interval
from longembed.tasks import RetrievalData, write_task_dir


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def task_folder(root: Path) -> tuple[Path, list[str]]:
    """A BEIR folder of 8 documents of 5..75 words (some longer than Lo = 32 tokens) and 4 queries."""
    documents = {f"d{i}": words(5 + 10 * i, seed=i) for i in range(8)}
    queries = {f"q{i}": " ".join(documents[f"d{2 * i}"].split()[:4]) for i in range(4)}
    qrels = {f"q{i}": {f"d{2 * i}": 1} for i in range(4)}
    return write_task_dir(RetrievalData(documents, queries, qrels), root), list(documents.values())


def test_eval_task_dir_writes_the_task_under_its_name(tmp_path: Path, tiny_bert: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    folder, documents = task_folder(tmp_path / "folder")
    out = tmp_path / "run"
    argv = ["eval", "--model", str(tiny_bert), "--max-length", str(LO), "--task-dir", str(folder),
            "--task-name", "mine", "--output", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-estimate"]
    assert main(argv) == 0
    assert "mine: 8 documents, 4 queries, from" in capsys.readouterr().out
    results = RunResults.load(out)
    assert list(results.tasks) == ["mine"] and results.config.tasks == ["mine"]
    recorded = results.config.task_dirs["mine"]
    assert recorded["path"] == str(folder.resolve()) and (recorded["documents"], recorded["queries"]) == (8, 4)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    longer = sum(len(tokenizer(text)["input_ids"]) > LO for text in documents)
    assert results.tasks["mine"].counts.documents_truncated == longer and 0 < longer < 8

    assert main(["report", str(out), "--output", str(tmp_path / "report")]) == 0
    header = next(line for line in (tmp_path / "report" / "report.md").read_text().splitlines() if "| run |" in line)
    assert "| mine |" in header


def test_eval_task_dir_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _ = task_folder(tmp_path / "folder")
    base = ["eval", "--model", "bm25", "--output", str(tmp_path / "r"), "--task-dir", str(folder)]
    assert main([*base, "--task-name", "a", "--task-name", "b"]) == 2
    assert "--task-name given 2 time(s) for 1 --task-dir" in capsys.readouterr().err
    assert main([*base, "--task-name", "needle"]) == 2
    assert "is a built-in task's" in capsys.readouterr().err
    assert main(["eval", "--model", "bm25", "--output", str(tmp_path / "r"), "--task-dir", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    needles = tmp_path / "needles.jsonl"
    needles.write_text('{"fact": "x", "question": "y"}\n')
    assert main([*base, "--needles", str(needles)]) == 2  # --task-dir alone: no needle task to give them to
    assert "not among --tasks" in capsys.readouterr().err
    # two folders, and --tasks: all three run
    other, _ = task_folder(tmp_path / "other")
    assert main([*base, "--task-dir", str(other), "--tasks", "passkey", "--lengths", "256"]) == 0
    assert list(RunResults.load(tmp_path / "r").tasks) == ["passkey", "folder", "other"]


def test_eval_task_dir_prints_all_three_metrics_with_intervals_and_no_stray_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: ``eval --task-dir`` printed "no --data-dir ... only tasks that need no data (passkey) can run"
    (not true of a task dir) and only nDCG@10.  Now the note shows only where it is true, and the summary
    gives accuracy@1 and recall@10 with bootstrap intervals over the queries, recorded in results.json."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    folder, _ = task_folder(tmp_path / "folder")
    out = tmp_path / "run"
    assert main(["eval", "--model", "bm25", "--task-dir", str(folder), "--task-name", "mine", "--output", str(out),
                 "--cache-dir", str(tmp_path / "cache"), "--no-estimate"]) == 0
    printed = capsys.readouterr().out
    assert "no --data-dir" not in printed
    task = RunResults.load(out).tasks["mine"]
    assert set(task.secondary_per_query) == {"accuracy@1", "recall@10"}
    for metric in ("accuracy@1", "recall@10"):
        per_query = task.secondary_per_query[metric]
        assert len(per_query) == 4 and sum(per_query.values()) / 4 == pytest.approx(task.metrics[metric], abs=1e-3)
        reference = bootstrap_interval(list(per_query.values()))
        interval = task.secondary_intervals[metric]
        assert (interval.low, interval.high) == (pytest.approx(reference.low, abs=1e-3),
                                                 pytest.approx(reference.high, abs=1e-3))
        bounds = f"[{interval.low:.0f}, {interval.high:.0f}]"
        assert f"{metric}: {task.metrics[metric]:.1f} {bounds}" in printed
    # the note stays where it is true: a built-in task that needs data, and no data folder
    assert main(["eval", "--model", "bm25", "--tasks", "qmsum", "--output", str(tmp_path / "r2"),
                 "--cache-dir", str(tmp_path / "cache"), "--no-estimate"]) == 1
    assert "no --data-dir and no $LONGEMBED_DATA_DIR" in capsys.readouterr().out
