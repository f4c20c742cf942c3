"""Tests of the benchmark report (longembed.report) and the ``report`` subcommand."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from longembed.evaluation.runner import evaluate_model
from longembed.report.labels import run_label
from longembed.report.tables import markdown_report, results_summary
from longembed.report.write import collect_runs, write_report
from longembed.results import RunResults, TaskResult
from longembed.retrieval.bm25 import BM25Model


def write_results(folder: Path, results: RunResults) -> None:
    results.save(folder / "results.json")


@pytest.fixture(scope="module")
def bm25_results(tmp_path_factory: pytest.TempPathFactory) -> RunResults:
    out = tmp_path_factory.mktemp("bm25")
    return evaluate_model(
        BM25Model(), ["passkey"], lengths=[256, 512], output_dir=out, show_progress=False, log=None
    )


def fake_run(
    bm25: RunResults,
    model: str,
    method: str,
    max_length: int,
    by_length: dict[int, float],
    qmsum: float | None = None,
    temperature: float = 1.0,
) -> RunResults:
    """Results like an encoder run's, with chosen scores (and, like a file written before per-query
    scores were kept, no intervals: BM25's would not match the chosen scores)."""
    results = without_intervals(copy.deepcopy(bm25))
    results.config.encoder = {
        "model": model,
        "method": method,
        "max_length": max_length,
        "temperature": temperature,
        "scale": "fixed",
        "apply_to": "long",
    }
    results.config.resolved = {"method": method, "max_length": max_length}
    results.config.temperatures = {"query": temperature, "document": temperature}
    passkey = results.tasks["passkey"]
    passkey.by_length = by_length
    passkey.score = sum(by_length.values()) / len(by_length)
    results.average = passkey.score
    if qmsum is not None:
        results.tasks["qmsum"] = TaskResult("ndcg@10", qmsum, {"ndcg@10": qmsum}, copy.deepcopy(passkey.counts))
        results.average = (passkey.score + qmsum) / 2
        results.average_tasks = ["passkey", "qmsum"]
    return results


def without_intervals(results: RunResults) -> RunResults:
    """``results`` as a file written before longembed kept per-query scores."""
    results.average_interval = None
    for task in results.tasks.values():
        for unit in task.units().values():
            unit.per_query = unit.interval = None
        task.interval = None
    return results


@pytest.fixture()
def run_dirs(tmp_path: Path, bm25_results: dict[str, Any]) -> list[Path]:
    runs = {
        "bm25": bm25_results,
        "minilm-truncate": fake_run(
            bm25_results, "/models/all-MiniLM-L6-v2", "truncate", 512, {256: 42.0, 512: 17.5}, qmsum=21.25
        ),
        "minilm-pi": fake_run(
            bm25_results, "/models/all-MiniLM-L6-v2", "pi", 4096, {256: 44.0, 512: 31.0}, temperature=0.7
        ),
    }
    dirs = []
    for name, results in runs.items():
        write_results(tmp_path / "runs" / name, results)
        dirs.append(tmp_path / "runs" / name)
    return dirs


def test_report_files_and_markdown_content(tmp_path: Path, run_dirs: list[Path]) -> None:
    written = write_report(run_dirs, tmp_path / "report")
    assert set(written) == {"report", "scores_by_task", "passkey_by_length", "passkey_vs_length"}  # no needle
    text = (tmp_path / "report" / "report.md").read_text()
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| run | model"))
    assert header == "| run | model | method | max_length | Passkey | QMSum | Avg. | Avg. (shared) |"
    bm25_row = next(line for line in lines if line.startswith("| BM25 |"))
    assert bm25_row == "| BM25 | BM25 | – | – | 100.0 [100, 100] | – | 100.0 [100, 100]* | 100.0 [100, 100] |"
    truncate_row = next(line for line in lines if line.startswith("| all-MiniLM-L6-v2 truncate 512 |"))
    assert "| truncate | 512 | 29.8 | 21.2 | 25.5 | 29.8 |" in truncate_row  # (42 + 17.5) / 2 = 29.75
    assert "## Passkey: accuracy@1 (%) by length (tokens)" in text
    assert "| run | 256 | 512 | mean |" in text
    assert "| all-MiniLM-L6-v2 pi 4096 tau=0.7 | 44.0 | 31.0 | 37.5 |" in text
    assert "![scores by task](scores_by_task.png)" in text
    assert "![passkey accuracy by length](passkey_by_length.png)" in text


@pytest.mark.slow
def test_pngs_are_readable_images(tmp_path: Path, run_dirs: list[Path]) -> None:
    import matplotlib.image

    written = write_report(run_dirs, tmp_path / "report")
    for key in ("scores_by_task", "passkey_by_length", "passkey_vs_length"):
        image = matplotlib.image.imread(written[key])
        assert image.ndim == 3 and image.shape[0] > 150 and image.shape[1] > 300
        assert image[..., :3].std() > 0.05  # not blank


def test_collect_runs_from_a_parent_folder_and_unique_labels(
    tmp_path: Path, run_dirs: list[Path], bm25_results: RunResults
) -> None:
    write_results(tmp_path / "runs" / "bm25-again", bm25_results)
    runs = collect_runs([tmp_path / "runs"])
    labels = [r.label for r in runs]
    assert len(runs) == 4 and len(set(labels)) == 4
    assert "BM25 [bm25-again]" in labels and "BM25 [bm25]" in labels
    with pytest.raises(FileNotFoundError, match="no results.json"):
        collect_runs([tmp_path / "nowhere"])
    (tmp_path / "bad.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a longembed results file"):
        collect_runs([tmp_path / "bad.json"])
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a JSON list, not a longembed results file"):
        collect_runs([tmp_path / "list.json"])
    (tmp_path / "broken.json").write_text('{"format": ')
    with pytest.raises(ValueError, match="broken.json: not valid JSON"):
        collect_runs([tmp_path / "broken.json"])
    (tmp_path / "latin1.json").write_bytes('{"caf\u00e9": 1}'.encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.json: not UTF-8"):
        collect_runs([tmp_path / "latin1.json"])


def test_notes_for_incomplete_and_skipped(bm25_results: RunResults) -> None:
    from longembed.report.labels import Run

    results = copy.deepcopy(bm25_results)
    results.complete = False
    results.skipped = {"qmsum": "task 'qmsum': /data/qmsum does not exist."}
    text = markdown_report([Run(Path("r"), results, "BM25")])
    assert "**incomplete run**" in text
    assert "qmsum skipped: task 'qmsum': /data/qmsum does not exist." in text


def test_run_label_and_summary(bm25_results: RunResults) -> None:
    assert run_label(bm25_results) == "BM25"
    summary = results_summary(bm25_results)
    assert "passkey" in summary and "100.00" in summary and "256: 100.0" in summary


@pytest.mark.slow
def test_cli_report(tmp_path: Path, run_dirs: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    from longembed.cli.main import main

    out = tmp_path / "out"
    assert main(["report", *map(str, run_dirs), "--output", str(out)]) == 0
    assert (out / "report.md").is_file() and (out / "passkey_by_length.png").is_file()
    assert "report.md" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing"), "--output", str(out)]) == 2
    (tmp_path / "listy").mkdir()
    (tmp_path / "listy" / "results.json").write_text("[]")
    assert main(["report", str(tmp_path / "listy"), "--output", str(out)]) == 2
    assert "holds a JSON list" in capsys.readouterr().err  # one line, no traceback


def test_by_length_table_adds_a_mean_over_the_lengths_all_runs_share(
    tmp_path: Path, bm25_results: RunResults
) -> None:
    runs = {
        "short": fake_run(bm25_results, "/m/a", "truncate", 512, {256: 80.0, 512: 60.0, 1024: 20.0}),
        "long": fake_run(bm25_results, "/m/a", "pi", 4096, {512: 70.0, 1024: 50.0, 4096: 10.0}),
    }
    for name, results in runs.items():
        write_results(tmp_path / name, results)
    text = markdown_report(collect_runs([tmp_path / "short", tmp_path / "long"]))
    assert "| run | 256 | 512 | 1k | 4k | mean | mean 512..1k |" in text
    assert "| a truncate 512 | 80.0 | 60.0 | 20.0 | – | 53.3 | 40.0 |" in text
    assert "| a pi 4096 | – | 70.0 | 50.0 | 10.0 | 43.3 | 60.0 |" in text


def test_run_label_names_changed_passkey_needle_options(bm25_results: RunResults) -> None:
    """Runs of another query count or haystack score other data: their labels say so."""
    changed = copy.deepcopy(bm25_results)
    changed.config.task_options = {"queries_per_length": 200, "haystack": {"path": "/data/contracts/", "words": 9}}
    assert run_label(changed) == "BM25 200 q/length haystack=contracts"
    changed.config.encoder = {"model": "/m/all-MiniLM-L6-v2", "method": "pi", "max_length": 4096}
    assert run_label(changed).endswith("pi 4096 200 q/length haystack=contracts")
    changed.config.task_options["needle_haystacks"] = "distinct"
    assert run_label(changed).endswith("pi 4096 200 q/length haystack=contracts needle haystacks=distinct")
    changed.config.task_options["candidates"] = "blocks"
    assert run_label(changed).endswith("pi 4096 200 q/length in blocks of 50 haystack=contracts needle haystacks=distinct")
