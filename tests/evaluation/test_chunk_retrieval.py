"""Retrieval over chunks: the cache of chunk matrices, MaxSim scoring, the passage task, ``eval --granularity``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA_DIR, require_data, words

from longembed import load_encoder
from longembed.cli.main import main as cli_main
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.cache.storage import EmbeddingCache
from longembed.evaluation.cache.wrapper import encode_cached
from longembed.evaluation.runner import evaluate_model
from longembed.evaluation.scoring import candidates
from longembed.report.labels import run_label
from longembed.results import RunResults
from longembed.retrieval.ranking import max_over_rows
from longembed.retrieval.strategy import Strategy
from longembed.tasks import Passage, RetrievalData, TaskMetadata, get_task
from longembed.tasks.qmsum_passages import (
    QMSumPassagesTask,
    load_qmsum_passages,
    meeting_passages,
    turn_spans,
)


# ----------------------------------------------------------------------------- cache
def test_chunk_matrices_round_trip_through_the_cache_and_its_compaction(tmp_path: Path) -> None:
    space = EmbeddingCache(tmp_path).namespace({"model": "m", "quantity": "chunks"})
    rng = np.random.default_rng(0)
    first = {"a": rng.normal(size=(3, 4)), "b": rng.normal(size=(1, 4))}
    second = {"c": rng.normal(size=(5, 4))}
    space.add("s", list(first), list(first.values()), [30, 10])
    space.add("s", list(second), list(second.values()), [50])
    space.compact("s")
    assert len(list((space.path / "s").glob("part-*.npz"))) == 1
    fresh = EmbeddingCache(tmp_path).namespace({"model": "m", "quantity": "chunks"}).load("s")
    for key, matrix in {**first, **second}.items():
        np.testing.assert_array_equal(fresh.vectors[key], matrix.astype(np.float32))
    assert fresh.tokens == {"a": 30, "b": 10, "c": 50}


def test_encode_cached_returns_chunk_rows_in_order_and_a_warm_run_encodes_nothing(tmp_path: Path) -> None:
    space = EmbeddingCache(tmp_path).namespace({"model": "m"})
    calls: list[list[str]] = []

    def chunk(texts: list[str]) -> list[np.ndarray]:
        calls.append(texts)
        return [np.full((len(t.split()), 2), float(len(t))) for t in texts]

    texts = ["a b c", "d", "e f", "a b c"]
    for attempt in range(2):
        out = encode_cached(texts, chunk, lambda ts: [1] * len(ts), space, "s")
        assert out.rows.tolist() == [3, 1, 2, 3]
        assert out.owners().tolist() == [0, 0, 0, 1, 2, 2, 3, 3, 3]
        np.testing.assert_array_equal(out.vectors[:, 0], [5, 5, 5, 1, 3, 3, 5, 5, 5])
        assert out.n_encoded == (3 if attempt == 0 else 0)
    assert sum(len(c) for c in calls) == 3


# ----------------------------------------------------------------------------- scoring
def test_max_over_rows_is_each_documents_best_chunk() -> None:
    rng = np.random.default_rng(1)
    rows = np.array([2, 1, 4, 3])
    scores = rng.normal(size=(5, rows.sum()))
    got = max_over_rows(scores, rows)
    owners = np.repeat(np.arange(4), rows)
    expected = np.array([[max(scores[q, owners == d]) for d in range(4)] for q in range(5)])
    np.testing.assert_array_equal(got, expected)
    assert max_over_rows(scores, None) is scores


def test_queries_search_only_their_context() -> None:
    data = RetrievalData(
        corpus={"x0": "ab", "x1": "cd", "y0": "ef"},
        queries={"q": "?", "r": "?"},
        qrels={"q": {"x1": 1}, "r": {"y0": 1}},
        contexts={"X": "ab cd", "Y": "ef"},
        passages={"x0": Passage("X", 0, 2), "x1": Passage("X", 3, 5), "y0": Passage("Y", 0, 2)},
        query_contexts={"q": "X", "r": "Y"},
    ).validate()
    allowed = candidates(data, ["q", "r"], ["x0", "x1", "y0"])
    assert allowed.tolist() == [[True, True, False], [False, False, True]]


def test_passage_data_is_validated() -> None:
    base = dict(corpus={"x0": "ab"}, queries={"q": "?"}, qrels={"q": {"x0": 1}}, contexts={"X": "ab cd"})
    with pytest.raises(ValueError, match=r"not X\[1:3\]"):
        RetrievalData(**base, passages={"x0": Passage("X", 1, 3)}).validate()
    with pytest.raises(ValueError, match="need passages"):
        RetrievalData(**base).validate()
    with pytest.raises(ValueError, match="unknown query or context"):
        RetrievalData(**base, passages={"x0": Passage("X", 0, 2)}, query_contexts={"q": "Z"}).validate()


# ----------------------------------------------------------------------------- the passage task
def write_meetings(root: Path, meetings: dict[str, dict]) -> Path:
    for split in ("train", "val"):
        (root / "qmsum/data/ALL" / split).mkdir(parents=True, exist_ok=True)
    for name, meeting in meetings.items():
        (root / "qmsum/data/ALL/train" / f"{name}.json").write_text(json.dumps(meeting))
    return root / "qmsum/data/ALL"


def test_passages_pack_turns_cut_long_turns_and_mark_the_answering_ones(tmp_path: Path) -> None:
    turns = [{"speaker": "A", "content": "one two three"}, {"speaker": "B", "content": "four five"},
             {"speaker": "A", "content": " ".join(f"w{i}" for i in range(11))},
             {"speaker": "C", "content": "six"}, {"speaker": "B", "content": "seven eight"}]
    meeting = {"meeting_transcripts": turns, "specific_query_list": [
        {"query": "what about four?", "relevant_text_span": [["1", "1"]]},
        {"query": "and the long one?", "relevant_text_span": [["2", "2"], ["4", "4"]]},
    ]}
    data = load_qmsum_passages(write_meetings(tmp_path, {"M1": meeting}), words=7)
    document = data.contexts["M1"]
    assert document == "\n".join(f"{t['speaker']}: {t['content']}" for t in turns)
    assert list(data.corpus.values()) == [
        "A: one two three\nB: four five",  # 7 words (speakers count): turns 0-1 packed
        "A: w0 w1 w2 w3 w4 w5",  # turn 2 (12 words) cut into 7-word pieces
        "w6 w7 w8 w9 w10",
        "C: six\nB: seven eight",
    ]
    assert data.qrels["M1-s00"] == {"M1-p000": 1}
    assert data.qrels["M1-s01"] == {"M1-p001": 1, "M1-p002": 1, "M1-p003": 1}
    assert data.query_contexts == {"M1-s00": "M1", "M1-s01": "M1"}
    spans = turn_spans(meeting)
    assert [document[a:b] for a, b in spans][3] == "C: six"
    assert meeting_passages(document, spans, 100) == [(0, len(document), [0, 1, 2, 3, 4])]
    bad = {"meeting_transcripts": turns, "specific_query_list": [{"query": "?", "relevant_text_span": [["3", "9"]]}]}
    with pytest.raises(ValueError, match=r"outside the meeting's 5 turns"):
        load_qmsum_passages(write_meetings(tmp_path / "bad", {"M2": bad}))


@pytest.mark.slow
def test_the_qmsum_passage_task_on_the_real_data() -> None:
    require_data("qmsum/data/ALL")
    data = get_task("qmsum_passages").load(DATA_DIR)
    assert len(data.contexts) == 197 and len(data.queries) == 1332
    assert all(len(text.split()) <= 192 for text in data.corpus.values())
    # every word of every meeting is in exactly one passage
    assert sum(len(t.split()) for t in data.corpus.values()) == sum(len(t.split()) for t in data.contexts.values())
    val = QMSumPassagesTask(splits=("val",)).load(DATA_DIR)  # the val meetings alone: a smaller run
    assert len(val.contexts) == 35 and set(val.corpus) < set(data.corpus)
    assert all(val.query_contexts[q] in val.contexts for q in val.queries)
    with pytest.raises(ValueError, match="splits must be"):
        QMSumPassagesTask(splits=("test",))


# ----------------------------------------------------------------------------- the runner and the CLI
class PassageTask:
    """Two meetings of topical sentences; each query asks for one sentence of its meeting."""

    metadata = TaskMetadata(name="passages", description="", main_score="ndcg@10", lengths=None, source="tests")

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        contexts, corpus, passages, queries, qrels, query_contexts = {}, {}, {}, {}, {}, {}
        for m in range(2):
            sentences = [words(12, seed=10 * m + k) for k in range(4)]
            text = " . ".join(sentences)
            contexts[f"M{m}"] = text
            start = 0
            for k, sentence in enumerate(sentences):
                doc_id = f"M{m}-p{k}"
                corpus[doc_id] = sentence
                passages[doc_id] = Passage(f"M{m}", start, start + len(sentence))
                start += len(sentence) + 3
            queries[f"M{m}-q"] = sentences[1][:20]
            qrels[f"M{m}-q"] = {f"M{m}-p1": 1}
            query_contexts[f"M{m}-q"] = f"M{m}"
        return RetrievalData(corpus, queries, qrels, contexts, passages, query_contexts).validate()


class WordsTask:
    """Eight documents of 60 tiny-vocabulary words; each query is a stretch of one document."""

    metadata = TaskMetadata(name="words", description="", main_score="accuracy@1", lengths=None, source="tests")

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        corpus = {f"d{i}": words(60, seed=100 + i) for i in range(8)}
        queries = {f"q{i}": " ".join(corpus[f"d{i}"].split()[20 + i : 28 + i]) for i in range(8)}
        return RetrievalData(corpus, queries, {f"q{i}": {f"d{i}": 1} for i in range(8)}).validate()


@pytest.mark.slow
def test_chunk_granularity_runs_scores_caches_and_is_recorded(tiny_models, tmp_path: Path) -> None:
    enc = load_encoder(tiny_models["bert"], method="pi", max_length=128)
    runs = {}
    for name, options in {
        "document": {},
        "late": {"granularity": "chunks", "chunking": "tokens:8"},
        "naive": {"granularity": "chunks", "chunking": "tokens:8", "late": False},
    }.items():
        runs[name] = evaluate_model(
            enc, tasks=[WordsTask(), PassageTask()], output_dir=tmp_path / name,
            cache_dir=tmp_path / "cache", estimate=False, show_progress=False, log=None, batch_size=4, **options,
        )
    assert runs["document"].config.strategy["granularity"] == "document"
    assert run_label(runs["late"]).endswith("late chunks tokens:8") and "chunks" not in run_label(runs["document"])
    assert run_label(runs["naive"]).endswith("naive chunks tokens:8")
    late = {"granularity": "chunks", "chunking": "tokens:8", "late": True}
    assert {k: runs["late"].config.strategy[k] for k in late} == late
    written = RunResults.from_dict(json.loads((tmp_path / "late/results.json").read_text())).config.strategy
    assert written == runs["late"].config.strategy
    # a document's score is its best chunk's, recomputed here from encode_chunks
    data = WordsTask().load(None)
    queries = enc.encode(list(data.queries.values()))
    chunks = [vectors for vectors, _ in enc.encode_chunks(list(data.corpus.values()), "tokens:8")]
    best = np.stack([(queries @ vectors.T).max(axis=1) for vectors in chunks], axis=1)
    top = np.argmax(best, axis=1)
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    accuracy = 100 * np.mean([data.qrels[q].get(doc_ids[t], 0) > 0 for q, t in zip(query_ids, top, strict=True)])
    assert runs["late"].tasks["words"].score == pytest.approx(accuracy)
    # the passage task: naive chunking is the document level; late differs; nothing truncated
    assert runs["naive"].tasks["passages"].metrics == runs["document"].tasks["passages"].metrics
    assert runs["late"].tasks["passages"].counts.documents_truncated == 0
    assert runs["late"].tasks["words"].cache.documents_encoded == 8
    again = evaluate_model(
        enc, tasks=[WordsTask(), PassageTask()], output_dir=tmp_path / "again",
        cache_dir=tmp_path / "cache", estimate=False, show_progress=False, log=None, batch_size=4,
        granularity="chunks", chunking="tokens:8",
    )
    assert again.tasks["words"].cache.encoded == 0 and again.tasks["passages"].cache.encoded == 0
    assert again.tasks["passages"].score == runs["late"].tasks["passages"].score


def test_eval_over_overlapping_naive_chunks_equals_each_span_embedded_alone_and_its_best_cosine(
    tiny_models, tmp_path: Path
) -> None:
    """A reference built without encode_chunks: spans of 8 tokens stepping by 5 cut from the tokenizer's
    offsets, each span's text embedded alone, a document scored by its best cosine."""
    enc = load_encoder(tiny_models["bert"], method="pi", max_length=128)
    run = evaluate_model(enc, tasks=[WordsTask()], output_dir=tmp_path / "run", cache_dir=tmp_path / "cache",
                         estimate=False, show_progress=False, log=None, batch_size=4, granularity="chunks",
                         chunking="tokens:8:3", late=False)
    assert run.config.strategy["chunking"] == "tokens:8:3"
    data = WordsTask().load(None)
    unit = lambda m: m / np.linalg.norm(m, axis=-1, keepdims=True)  # noqa: E731
    queries = unit(enc.encode(list(data.queries.values())))
    best = []
    for text in data.corpus.values():
        offsets = enc.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        starts = range(0, len(offsets), 5)
        spans = [(offsets[a][0], offsets[min(a + 8, len(offsets)) - 1][1]) for a in starts]
        spans = spans[: next(k for k, a in enumerate(starts) if a + 8 >= len(offsets)) + 1]
        assert len(spans) > 10 and spans[1][0] < spans[0][1]  # they overlap
        chunks = unit(enc.encode([text[a:b] for a, b in spans]))
        best.append((queries @ chunks.T).max(axis=1))
    scores = np.stack(best, axis=1)
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    top = np.argmax(scores, axis=1)
    accuracy = 100 * np.mean([data.qrels[q].get(doc_ids[t], 0) > 0 for q, t in zip(query_ids, top, strict=True)])
    assert run.tasks["words"].score == pytest.approx(accuracy)
    ranks = [1 + int((scores[i] > scores[i, i]).sum()) for i in range(len(query_ids))]  # query i's document is d{i}
    assert run.tasks["words"].metrics["ndcg@10"] == pytest.approx(100 * np.mean([1 / np.log2(r + 1) for r in ranks]),
                                                                  abs=1e-3)


def test_cached_encoder_late_chunks_equal_the_encoders(tiny_models, tmp_path: Path) -> None:
    enc = load_encoder(tiny_models["bert"], method="pi", max_length=128)
    cached = CachedEncoder(enc, tmp_path, show_progress=False, log=None)
    texts = [words(40, seed=1), words(70, seed=2)]
    spans = [[(0, 9), (10, 30)], [(5, 50)]]
    got = cached.encode_chunks(texts, shard="t", chunking=None, spans=spans)
    expected = np.concatenate([v for v, _ in enc.encode_chunks(texts, spans, normalize_embeddings=True)])
    np.testing.assert_allclose(got.vectors, expected, atol=1e-6)
    assert got.rows.tolist() == [2, 1]
    other = cached.encode_chunks(texts, shard="t", chunking=None, spans=[[(0, 9)], [(5, 50)]])
    assert (other.n_cached, other.n_encoded) == (1, 1)  # the changed spans are a new entry, the same ones are not
    with pytest.raises(ValueError, match="exactly one of chunking and spans"):
        cached.encode_chunks(texts, shard="t", chunking="tokens:8", spans=spans)


def test_eval_cli_takes_granularity_flags(tiny_models, tmp_path: Path) -> None:
    status = cli_main([
        "eval", "--model", str(tiny_models["bert"]), "--method", "pi", "--max-length", "128", "--tasks", "passkey",
        "--lengths", "256", "--queries-per-length", "5", "--granularity", "chunks", "--chunking", "sentences:2",
        "--naive", "--output", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--no-estimate",
    ])
    assert status == 0
    record = json.loads((tmp_path / "run/results.json").read_text())
    assert {k: record["config"]["strategy"][k] for k in ("granularity", "chunking", "late")} == {
        "granularity": "chunks", "chunking": "sentences:2", "late": False}
    assert cli_main(["eval", "--model", "bm25", "--tasks", "passkey", "--lengths", "256", "--granularity", "chunks",
                     "--output", str(tmp_path / "bm25")]) != 0


def test_granularity_is_checked() -> None:
    with pytest.raises(ValueError, match="granularity must be one of"):
        Strategy(granularity="pages")
    with pytest.raises(ValueError, match="unknown chunking"):
        Strategy(granularity="chunks", chunking="pages:3")
