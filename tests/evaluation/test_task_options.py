"""Tests of the run options of passkey and needle (longembed.evaluation.task_options): queries per
length and the user's haystack, through ``evaluate_model`` and recorded in results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA_DIR, require_data
from test_runner import HashEncoder

from longembed.evaluation.runner import evaluate_model
from longembed.evaluation.spec import EvalSpec
from longembed.results import RunResults
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import get_task
from longembed.tasks.haystack import load_haystack

FIXTURES = Path(__file__).resolve().parents[1] / "results" / "fixtures"


def run(model: Any, tmp_path: Path, name: str = "run", **kwargs: Any) -> RunResults:
    kwargs.setdefault("cache_dir", tmp_path / "cache")
    kwargs.setdefault("estimate", False)
    return evaluate_model(model, output_dir=tmp_path / name, show_progress=False, log=None, **kwargs)


def haystack_folder(root: Path) -> Path:
    """One .txt document of 2,700 words: it fills lengths up to 2048 (1,536 words), not 4096 (3,072)."""
    root.mkdir(parents=True)
    sentences = [f"Section {i} says the lessee keeps the garden tidy." for i in range(300)]
    (root / "lease.txt").write_text(" ".join(sentences), encoding="utf-8")
    return root


def test_queries_per_length_sets_the_counts_and_is_recorded(tmp_path: Path) -> None:
    results = run(BM25Model(), tmp_path, tasks=["passkey"], lengths=[256, 1024], queries_per_length=4)
    passkey = results.tasks["passkey"]
    for length in (256, 1024):
        counts = passkey.lengths[length].counts
        assert (counts.documents, counts.queries) == (8, 4)
    assert (passkey.counts.documents, passkey.counts.queries) == (16, 8)
    raw = json.loads((tmp_path / "run" / "results.json").read_text())
    assert raw["config"]["task_options"] == {"queries_per_length": 4}
    assert RunResults.load(tmp_path / "run").config.task_options == {"queries_per_length": 4}


def test_a_default_run_records_no_task_options(tmp_path: Path) -> None:
    """The config of a default run is what it was before task options existed; old files load."""
    results = run(BM25Model(), tmp_path, tasks=["passkey"], lengths=[256], queries_per_length=50)
    raw = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "task_options" not in raw["config"] and results.config.task_options == {}
    assert results.tasks["passkey"].lengths[256].counts.queries == 50
    old = next(FIXTURES.rglob("results.json"))
    assert "task_options" not in json.loads(old.read_text())["config"]
    assert RunResults.load(old).config.task_options == {}


def test_the_estimate_and_the_dry_run_count_the_larger_sets(tmp_path: Path) -> None:
    results = run(BM25Model(), tmp_path, tasks=["passkey"], lengths=[256, 512], queries_per_length=120,
                  dry_run=True)
    assert results.estimate.documents == 2 * 240 and results.estimate.queries == 2 * 120
    assert [(u.documents.count, u.queries.count) for u in results.estimate.units] == [(240, 120), (240, 120)]
    assert not (tmp_path / "run" / "results.json").exists()


def test_nested_sets_reuse_the_cache(tmp_path: Path) -> None:
    """A 60-query run after the 50-query run encodes only the 20 new documents and 10 new queries."""
    encoder = HashEncoder(tmp_path / "m")
    run(encoder, tmp_path, "paper", tasks=["passkey"], lengths=[256])
    before = encoder.n_texts
    bigger = run(encoder, tmp_path, "sixty", tasks=["passkey"], lengths=[256], queries_per_length=60)
    assert encoder.n_texts - before == 20 + 10
    cache = bigger.tasks["passkey"].cache
    assert (cache.documents_cached, cache.queries_cached) == (100, 50)


def test_haystack_runs_passkey_and_needle_and_is_recorded(tmp_path: Path) -> None:
    folder = haystack_folder(tmp_path / "lease")
    haystack = load_haystack(folder)
    lines: list[str] = []
    results = evaluate_model(BM25Model(), ["passkey", "needle"], lengths=[256, 2048], haystack=folder,
                             queries_per_length=3, output_dir=tmp_path / "run", show_progress=False,
                             estimate=False, log=lines.append)
    assert set(results.tasks) == {"passkey", "needle"} and not results.skipped  # needle needs no data_dir
    for task in results.tasks.values():
        assert all(unit.counts.documents == 6 for unit in task.lengths.values())
    assert results.config.task_options == {"queries_per_length": 3, "haystack": haystack.describe()}
    assert any(line.startswith(f"haystack: 1 documents, {haystack.words} words") for line in lines)
    with pytest.raises(ValueError, match="fewer than the 3072 words of length 4096.*longest length it can serve is 2048"):
        run(BM25Model(), tmp_path, "long", tasks=["passkey"], lengths=[4096], haystack=folder)


def test_options_without_passkey_or_needle_are_an_error(tmp_path: Path) -> None:
    require_data("squality")
    for options, flag in (({"queries_per_length": 100}, "--queries-per-length"),
                          ({"haystack": haystack_folder(tmp_path / "h")}, "--haystack")):
        with pytest.raises(ValueError, match=f"{flag}: only passkey and needle take it, and neither is among"):
            run(BM25Model(), tmp_path, tasks=["squality"], data_dir=DATA_DIR, **options)
    with pytest.raises(ValueError, match="queries_per_length must be a whole number >= 1"):
        EvalSpec(queries_per_length=0)


def test_a_task_object_must_agree_with_the_run(tmp_path: Path) -> None:
    built = get_task("passkey", queries_per_length=7)
    with pytest.raises(ValueError, match="the passkey task given has 7 queries per length but the run asks for 50"):
        run(BM25Model(), tmp_path, tasks=[built], lengths=[256])
    results = run(BM25Model(), tmp_path, tasks=[built], lengths=[256], queries_per_length=7)
    assert results.tasks["passkey"].lengths[256].counts.queries == 7
    with pytest.raises(ValueError, match="built with another haystack than the run's"):
        run(BM25Model(), tmp_path, tasks=[built], lengths=[256], queries_per_length=7,
            haystack=haystack_folder(tmp_path / "h"))


def test_distinct_needle_haystacks_run_are_recorded_and_logged(tmp_path: Path) -> None:
    folder = haystack_folder(tmp_path / "lease")
    lines: list[str] = []
    results = evaluate_model(BM25Model(), ["passkey", "needle"], lengths=[256], haystack=folder,
                             needle_haystacks="distinct", output_dir=tmp_path / "run", show_progress=False,
                             estimate=False, log=lines.append)
    expected = {"haystack": load_haystack(folder).describe(), "needle_haystacks": "distinct"}
    assert results.config.task_options == expected
    assert RunResults.load(tmp_path / "run").config.task_options == expected
    assert json.loads((tmp_path / "run" / "results.json").read_text())["config"]["task_options"] == expected
    assert any(line.startswith("needle: distinct haystacks: every document is cut from its own window") for line in lines)
    # the needle scored the distinct documents; passkey (by name too) is as without the option
    distinct = get_task("needle", haystack=folder, haystacks="distinct").load(None, 256)
    shared = get_task("needle", haystack=folder).load(None, 256)
    assert results.tasks["needle"].lengths[256].data_sha256 == distinct.fingerprint() != shared.fingerprint()
    passkey = get_task("passkey", haystack=folder).load(None, 256)
    assert results.tasks["passkey"].lengths[256].data_sha256 == passkey.fingerprint()


def test_shared_needle_haystacks_are_the_default_and_record_nothing(tmp_path: Path) -> None:
    folder = haystack_folder(tmp_path / "lease")
    results = run(BM25Model(), tmp_path, tasks=["needle"], lengths=[256], haystack=folder, needle_haystacks="shared")
    assert results.config.task_options == {"haystack": load_haystack(folder).describe()}
    assert EvalSpec().needle_haystacks == "shared"
    with pytest.raises(ValueError, match="needle haystacks must be one of shared, distinct, got 'mixed'"):
        EvalSpec(needle_haystacks="mixed")


def test_needle_haystacks_without_needle_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--needle-haystacks: only needle takes it, and it is not among the tasks "
                                         r"\(passkey\)"):
        run(BM25Model(), tmp_path, tasks=["passkey"], lengths=[256], needle_haystacks="distinct")


def test_a_needle_task_object_must_agree_on_its_haystacks(tmp_path: Path) -> None:
    folder = haystack_folder(tmp_path / "lease")
    shared, distinct = get_task("needle", haystack=folder), get_task("needle", haystack=folder, haystacks="distinct")
    with pytest.raises(ValueError, match="the needle task given builds its documents with shared haystacks but the "
                                         "run asks for distinct"):
        run(BM25Model(), tmp_path, tasks=[shared], lengths=[256], haystack=folder, needle_haystacks="distinct")
    with pytest.raises(ValueError, match="with distinct haystacks but the run asks for shared"):
        run(BM25Model(), tmp_path, tasks=[distinct], lengths=[256], haystack=folder)
    results = run(BM25Model(), tmp_path, tasks=[distinct], lengths=[256], haystack=folder, needle_haystacks="distinct")
    assert results.config.task_options["needle_haystacks"] == "distinct"
