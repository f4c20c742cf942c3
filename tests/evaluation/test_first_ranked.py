"""Each unit keeps its queries' first-ranked documents and their summary: equal to the argmax of the
similarity matrix computed here, a hub found and said where the vectors have collapsed, none where
retrieval works, shown in the eval summary and report.md, absent from files written before."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA_DIR, load_benchmark_script, require_data
from test_per_query_scores import FIXTURE
from test_runner import HashEncoder, TinyTask, run

from longembed.evaluation.bm25 import BM25Model
from longembed.report.tables import results_summary
from longembed.report.write import write_report
from longembed.results import RunResults
from longembed.tasks import get_task


class CollapsedEncoder(HashEncoder):
    """Length collapse, exaggerated: every vector is one shared direction plus text-seeded noise,
    queries with little noise, documents with much; so the document whose noise leans most towards
    the shared direction is nearest to nearly every query."""

    def encode(self, texts: Sequence[str], prompt: str | None = None, **options) -> np.ndarray:
        shared = np.zeros(64)
        shared[0] = 1.0
        rows = []
        for text in texts:
            noise = np.random.default_rng(zlib.crc32(text.encode())).normal(size=64)
            scale = 0.05 if text.startswith("What is the pass key") else 0.6
            rows.append(shared + scale * noise)
        vectors = np.asarray(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def naive_first(encoder: HashEncoder, task: str, length: int) -> dict[str, str]:
    """Each query's first document by cosine, computed here (ties: the smallest id)."""
    data = get_task(task).load(None, length)
    docs = encoder.encode(list(data.corpus.values()))
    queries = encoder.encode(list(data.queries.values()))
    ids = list(data.corpus)
    first = {}
    for qid, row in zip(data.queries, queries @ docs.T, strict=True):
        best = max(row)
        first[qid] = min(i for i, s in zip(ids, row, strict=True) if s == best)
    return first


@pytest.fixture(scope="module")
def collapsed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResults, list[str], Path]:
    tmp_path = tmp_path_factory.mktemp("collapsed")
    said: list[str] = []
    results = run(CollapsedEncoder(tmp_path / "m"), tmp_path, tasks=["passkey"], lengths=[256, 512], log=said.append)
    return results, said, tmp_path


def test_first_ranked_is_the_argmax_of_the_similarities(collapsed_run, tmp_path: Path) -> None:
    results, _, _ = collapsed_run
    for length in (256, 512):
        unit = results.tasks["passkey"].lengths[length]
        assert unit.first_ranked == naive_first(CollapsedEncoder(tmp_path / "m"), "passkey", length)
        assert set(unit.first_ranked) == set(unit.per_query)
        # a query scores 100 exactly when its first document is its key's
        data = get_task("passkey").load(None, length)
        for qid, doc in unit.first_ranked.items():
            assert (unit.per_query[qid] == 100.0) == (data.qrels[qid].get(doc, 0) > 0)


def test_a_collapsed_encoder_has_a_hub_and_eval_says_so(collapsed_run) -> None:
    results, said, _ = collapsed_run
    for length in (256, 512):
        stats = results.tasks["passkey"].lengths[length].first_ranked_stats
        assert stats.is_hub and stats.top_share > 0.3 and stats.top_relevant_for <= 1
        assert stats.distinct < stats.distinct_relevant == stats.queries == 50
        assert f"hub at passkey/{length}: {stats.describe()}" in said
    assert set(results.hubs()) == {("passkey", 256), ("passkey", 512)}
    summary = results_summary(results)
    assert "hub at passkey/256: " in summary and "hub at passkey/512: " in summary


def test_working_retrieval_has_no_hub(tmp_path: Path) -> None:
    said: list[str] = []
    results = run(BM25Model(), tmp_path, tasks=["passkey", TinyTask()], lengths=[256], log=said.append)
    passkey, tiny = results.tasks["passkey"].lengths[256], results.tasks["tiny"]
    assert passkey.first_ranked_stats.distinct == passkey.first_ranked_stats.distinct_relevant  # BM25 finds every key
    assert tiny.first_ranked is not None and tiny.first_ranked_stats is not None  # a real task keeps them too
    assert results.hubs() == {} and not any(line.startswith("hub at") for line in said)
    assert "hub at" not in results_summary(results)


def test_the_file_keeps_them_and_the_report_shows_them(collapsed_run, tmp_path: Path) -> None:
    results, _, folder = collapsed_run
    again = RunResults.load(folder / "run")
    assert again == results
    assert again.tasks["passkey"].lengths[256].first_ranked_stats == results.tasks["passkey"].lengths[256].first_ranked_stats
    bm25 = run(BM25Model(), tmp_path, name="bm25", tasks=["passkey"], lengths=[256])
    report = write_report([folder / "run", tmp_path / "bm25"], tmp_path / "report")["report"].read_text()
    section = report.split("## First-ranked documents", 1)[1].split("\n## ", 1)[0]
    stats = results.tasks["passkey"].lengths[256].first_ranked_stats
    table = [line for line in section.splitlines() if line.startswith("| ")]
    assert table[0] == "| run | passkey 256 | passkey 512 |"
    (collapsed_row,) = [line for line in table[2:] if "bm25" not in line.lower()]
    (bm25_row,) = [line for line in table[2:] if "bm25" in line.lower()]
    assert f"{stats.top_share:.0%} · {stats.distinct}/50 **hub**" in collapsed_row
    b = bm25.tasks["passkey"].lengths[256].first_ranked_stats
    assert f"{b.top_share:.0%} · 50/50 |" in bm25_row and "hub" not in bm25_row
    assert "–" in bm25_row  # BM25 ran no 512
    assert f"{stats.describe()}" in section


def test_files_written_before_have_none_and_no_report_section(tmp_path: Path) -> None:
    old = RunResults.load(next(FIXTURE.glob("*/results.json")))
    units = [u for t in old.tasks.values() for u in t.units().values()]
    assert all(u.first_ranked is None and u.first_ranked_stats is None for u in units)
    assert old.hubs() == {}
    assert "first_ranked" not in json.dumps(old.to_dict())
    report = write_report([next(FIXTURE.glob("*/results.json")).parent], tmp_path / "r")["report"].read_text()
    assert "First-ranked" not in report


def test_the_report_orders_units_as_longembed_does(tmp_path: Path) -> None:
    """LongEmbed's task order (passkey before needle, a user's task last), not the alphabet's."""
    require_data("paul_graham_essays")
    run(BM25Model(), tmp_path, tasks=[TinyTask(), "needle", "passkey"], lengths=[256, 512], data_dir=DATA_DIR)
    report = write_report([tmp_path / "run"], tmp_path / "report")["report"].read_text()
    section = report.split("## First-ranked documents", 1)[1]
    header = next(line for line in section.splitlines() if line.startswith("| run"))
    assert header == "| run | passkey 256 | passkey 512 | needle 256 | needle 512 | tiny |"


def test_the_length_script_counts_first_ranked_and_asked_documents_by_quintile(tmp_path: Path) -> None:
    """benchmarks/first_ranked_lengths.py against a count made here on a BM25 run of a real-style task."""
    script = load_benchmark_script("first_ranked_lengths")
    results = run(BM25Model(), tmp_path, tasks=[TinyTask()])
    data = TinyTask().load(None)
    words = {doc: len(text.split()) for doc, text in data.corpus.items()}
    quintile = script.length_quintiles(words)
    ordered = sorted(words, key=lambda d: (words[d], d))
    assert [quintile[d] for d in ordered] == sorted(quintile.values())  # shorter never in a later quintile
    assert sorted(set(quintile.values())) == [0, 1, 2, 3, 4] and quintile[ordered[0]] == 0
    row = script.first_ranked_by_quintile(results, "tiny", words, data.qrels)
    first = results.tasks["tiny"].first_ranked
    assert row["first_ranked_by_quintile"] == [sum(quintile[d] == k for d in first.values()) for k in range(5)]
    asked = [next(d for d, rel in data.qrels[q].items() if rel > 0) for q in first]
    assert row["asked_by_quintile"] == [sum(quintile[d] == k for d in asked) for k in range(5)]
    assert sum(row["asked_by_quintile"]) == row["queries"] == len(data.qrels)
