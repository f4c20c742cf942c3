"""Each unit keeps its queries' first-ranked documents and their summary: equal to the argmax of the
similarity matrix computed here, a hub found and said where the vectors have collapsed, none where
retrieval works, shown in the eval summary and report.md, absent from files written before."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA_DIR, load_benchmark_script, require_data
from test_per_query_scores import FIXTURE
from test_runner import HashEncoder, TinyTask, run

from longembed import load_encoder
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.metrics import same_vector_groups
from longembed.report.tables import results_summary
from longembed.report.write import write_report
from longembed.results import RunResults
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import RetrievalData, TaskMetadata, get_task


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
        assert stats.skewness > 3 and stats.asked_skewness == 0.0  # the scores' vectors, not BM25's counts
    assert set(results.hubs()) == {("passkey", 256), ("passkey", 512)}
    summary = results_summary(results)
    assert "hub at passkey/256: " in summary and "hub at passkey/512: " in summary


def test_working_retrieval_has_no_hub(tmp_path: Path) -> None:
    said: list[str] = []
    results = run(BM25Model(), tmp_path, tasks=["passkey", TinyTask()], lengths=[256], log=said.append)
    passkey, tiny = results.tasks["passkey"].lengths[256], results.tasks["tiny"]
    assert passkey.first_ranked_stats.distinct == passkey.first_ranked_stats.distinct_relevant  # BM25 finds every key
    # every key found, each asked once among 100 documents: N1 is 0/1 as the asked counts are (skewness 0)
    assert passkey.first_ranked_stats.skewness == passkey.first_ranked_stats.asked_skewness == 0.0
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


@pytest.mark.slow
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


# ---------------------------------------------------------------- twins: identical vectors


def naive_twins(scores: np.ndarray, column: int, tolerance: float = 1e-4) -> set[int]:
    """The columns equal to ``column`` for every row, by plain loops."""
    found = set()
    for j in range(scores.shape[1]):
        if all((a == b) if np.isinf(a) or np.isinf(b) else abs(a - b) <= tolerance
               for a, b in zip(scores[:, j], scores[:, column], strict=True)):
            found.add(j)
    return found


@pytest.mark.parametrize("seed", range(4))
def test_same_vector_groups_equal_a_naive_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.random((40, 30))
    blocks = [rng.choice(30, size=rng.integers(2, 6), replace=False) for _ in range(3)]
    for block in blocks:
        scores[:, block] = scores[:, [block[0]]] + rng.normal(scale=1e-6, size=(40, len(block)))  # one vector
        scores[rng.integers(40), block] = -np.inf  # a query outside these documents' context
    near = next(j for j in range(30) if not any(j in b for b in blocks))
    scores[:, near] = scores[:, blocks[0][0]] + np.where(np.arange(40) == 36, 3e-4, 0.0)  # off on one query
    nan_column = next(j for j in range(30) if j != near and not any(j in b for b in blocks))
    scores[5, nan_column] = np.nan
    ids = [f"d{j:02d}" for j in range(30)]
    found = same_vector_groups(scores, ids)
    for j, doc in enumerate(ids):
        assert found[doc] == {ids[k] for k in naive_twins(scores, j)} | {doc}  # a NaN column: alone
    assert found[ids[nan_column]] == {ids[nan_column]} and found[ids[near]] == {ids[near]}


def test_same_vector_groups_survive_close_sums() -> None:
    """Columns whose sums fall between a group's members' sums, different vectors all, do not split
    the group nor join it."""
    rng = np.random.default_rng(7)
    base = rng.random(50)
    shuffled = np.stack([base, base + 1e-6, rng.permutation(base), rng.permutation(base), base - 1e-6], axis=1)
    ids = ["a", "b", "x", "y", "c"]
    found = same_vector_groups(shuffled, ids)
    assert found["a"] == found["b"] == found["c"] == {"a", "b", "c"}
    assert found["x"] == {"x"} and found["y"] == {"y"}


@pytest.mark.slow
def test_truncation_makes_twins_and_eval_says_so(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    """Needle documents share their haystack prefix: cut to the tiny model's 32 tokens, most read the
    same and have one vector: twins are exactly the documents that read the same, and the summary
    counts the first-ranked documents with their twins."""
    require_data("paul_graham_essays")
    encoder = load_encoder(tiny_models["bert"], method="truncate")
    results = run(encoder, tmp_path, tasks=["needle"], lengths=[256], data_dir=DATA_DIR)
    unit = results.tasks["needle"].lengths[256]
    stats = unit.first_ranked_stats
    data = get_task("needle").load(DATA_DIR, 256)
    head = {doc: tuple(encoder.tokenizer(text, truncation=True, max_length=32)["input_ids"])
            for doc, text in data.corpus.items()}
    shared = Counter(head.values()).most_common(1)[0][0]
    assert sum(h == shared for h in head.values()) > 50  # most documents read the same
    ids = list(data.corpus)
    scores = encoder.encode(list(data.queries.values())) @ encoder.encode(list(data.corpus.values())).T
    found = same_vector_groups(scores, ids)
    for doc in ids:  # twins: exactly the documents that read the same
        assert found[doc] == {d for d in head if head[d] == head[doc]}
    assert (stats.documents, stats.distinct_vectors) == (len(head), len(set(head.values())))
    assert stats.shared_vectors and f"only {stats.distinct_vectors} distinct vectors" in stats.describe()
    same_head = {doc for doc in head if head[doc] == head[stats.top_document]}
    assert stats.top_twins == len(same_head) - 1 and stats.top_document == min(same_head)
    assert stats.top_count == sum(doc in same_head for doc in unit.first_ranked.values())


class TwinTask:
    """Eight documents that read the same in their first five words (as truncated documents that
    share a prefix do) and four others; every query shares three words with the eight and two with
    the one of the four it asks for."""

    metadata = TaskMetadata(name="twins", description="twins", main_score="ndcg@10", lengths=None, source="tests")

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        corpus = {f"f{i}": f"weather report rain wind cloud, then part {i}" for i in range(8)}
        topics = ("violin", "penguin", "glacier", "chess")
        corpus |= {f"u{i}": f"weather note on {topic}" for i, topic in enumerate(topics)}
        words = ("apple", "brick", "candle", "dragon", "ember", "falcon", "garnet", "harbor", "igloo", "jasper",
                 "kettle", "lantern")
        queries = {f"q{j}": f"weather report rain {topics[j % 4]} {words[j]}" for j in range(12)}
        return RetrievalData(corpus, queries, {f"q{j}": {f"u{j % 4}": 1} for j in range(12)}).validate()


class BatchNoiseEncoder(HashEncoder):
    """The hashing model reading a text's first five words (a truncation), plus float noise of 1e-7
    per vector, as batches of different make-up give a real model: texts that read the same once cut
    have vectors equal but for the noise, so which of them comes first is noise."""

    def encode(self, texts: Sequence[str], **options) -> np.ndarray:
        vectors = super().encode([" ".join(t.replace(",", " ").split()[:5]) for t in texts], **options)
        self.noise = getattr(self, "noise", np.random.default_rng(0))
        return vectors + self.noise.normal(scale=1e-7, size=vectors.shape).astype(np.float32)


def test_twins_spread_by_float_noise_count_as_one_document(tmp_path: Path) -> None:
    said: list[str] = []
    results = run(BatchNoiseEncoder(tmp_path / "m"), tmp_path, tasks=[TwinTask()], log=said.append)
    unit = results.tasks["twins"]
    counted_apart = Counter(unit.first_ranked.values())
    assert set(counted_apart) <= {f"f{i}" for i in range(8)} and len(counted_apart) > 1  # spread by the noise
    stats = unit.first_ranked_stats
    assert (stats.top_document, stats.top_twins, stats.top_count, stats.distinct) == ("f0", 7, 12, 1)
    assert (stats.documents, stats.distinct_vectors) == (12, 5)  # eight read the same, four differ
    assert max(counted_apart.values()) < stats.top_count  # counted apart, the twins hide part of their hub
    assert stats.is_hub
    assert any(line.startswith("hub at twins: f0 or one of its 7 twins") for line in said)


def test_a_collapsed_hub_has_no_twins(collapsed_run) -> None:
    results, _, _ = collapsed_run
    for unit in results.tasks["passkey"].lengths.values():
        assert unit.first_ranked_stats.top_twins == 0
        assert unit.first_ranked_stats.distinct_vectors == unit.first_ranked_stats.documents == 100
        assert "twins" not in unit.first_ranked_stats.describe() and "vectors" not in unit.first_ranked_stats.describe()


def counting(encode, calls: list):
    """``encode`` that keeps each result (to count what was encoded rather than read from the cache)."""
    def wrapped(*args, **kwargs):
        calls.append(result := encode(*args, **kwargs))
        return result
    return wrapped


@pytest.mark.slow
def test_the_top_documents_script_reads_a_runs_first_ranked_as_the_model_ranks(
        tiny_models: dict[str, Path], tmp_path: Path) -> None:
    """benchmarks/passkey_top_documents.py: --run (results.json) and --model (ranking through the cache)
    find the same first documents, and its statistics count them."""
    script = load_benchmark_script("passkey_top_documents")
    encoder = load_encoder(tiny_models["bert"], method="pi", max_length=256)
    results = run(encoder, tmp_path, tasks=["passkey"], lengths=[256])
    data = get_task("passkey").load(None, 256)
    first = script.first_ranked_by_run(results, 256)
    cached = CachedEncoder(encoder, tmp_path / "cache", log=None)
    cached.encode = counting(cached.encode, calls := [])
    assert first == script.first_ranked_by_model(cached, data, 256)
    assert sum(r.n_encoded for r in calls) == 0  # the run's vectors, read from its cache
    row = script.top_documents(first, data, 256)
    assert row["accuracy@1"] == pytest.approx(results.tasks["passkey"].lengths[256].score, abs=0.01)
    assert row["distinct top-1 documents"] == len(set(first.values()))
    assert row["most frequent top-1 (queries won, key offset in words)"][0][0] == max(Counter(first.values()).values())
