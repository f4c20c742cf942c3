"""Scoring a benchmark run: retrieval problems ("units") -> metrics -> task scores -> the average.

A unit is one task at one length (passkey, needle) or a whole real task.  Queries and documents are
encoded (through the cache) or scored by BM25, ranked by cosine similarity, and evaluated with
:func:`~longembed.evaluation.metrics.evaluate_scores`; every number is a percentage.  A task's score
is its main metric, for synthetic tasks the mean over the evaluated lengths (LongEmbed section 3.2);
the run's average is the unweighted mean of its task scores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from longembed.encoder_protocol import TextScorer
from longembed.errors import UserError
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.cache.wrapper import CachedEncoding
from longembed.evaluation.metrics import (
    DEFAULT_K_VALUES,
    judged_at_k,
    judges_non_relevant,
    mean_metrics,
    per_query_metrics,
    same_vector_groups,
)
from longembed.evaluation.passage_hits import (
    PASSAGE_HIT,
    ShownPassage,
    dense_shown_passages,
    lexical_shown_passages,
    passage_hit_interval,
    passage_hits,
)
from longembed.results import (
    CacheUse,
    Counts,
    Interval,
    TaskResult,
    UnitResult,
    first_ranked_summary,
    hub_line,
)
from longembed.results.intervals import bootstrap_interval, stratified_bootstrap_interval
from longembed.results.run_results import JUDGED_AT_10, SECONDARY_METRICS
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.maxsim import maxsim_scores
from longembed.retrieval.pipeline import DenseScores, exact_dense_scores, rank_documents
from longembed.retrieval.strategy import Strategy
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS, RetrievalData, Task, TaskDataMissing
from longembed.tasks.base import WORDS_PER_TOKEN


@dataclass
class Unit:
    """One retrieval problem: a task at one length (passkey/needle) or a whole real task."""

    task: str
    length: int | None
    data: RetrievalData
    load_seconds: float

    @property
    def label(self) -> str:
        return self.task if self.length is None else f"{self.task}/{self.length}"

    def shard(self, side: str) -> str:
        """The cache shard of one side ("documents" or "queries"), e.g. "passkey/4096/documents"."""
        return f"{self.task}/{'all' if self.length is None else self.length}/{side}"


@dataclass
class Side:
    """How one side of every unit is encoded: its prompt and TempScale tau."""

    name: str  # "queries" or "documents"
    prompt: str
    temperature: float


def load_units(
    tasks: Sequence[Task], data_dir: Path | None, lengths: Sequence[int], log: Callable[[str], None]
) -> tuple[list[Unit], dict[str, str]]:
    """Load every task/length; a task with missing data is skipped (name -> message)."""
    units: list[Unit] = []
    skipped: dict[str, str] = {}
    for task in tasks:
        meta = task.metadata
        task_lengths: list[int | None] = (
            [n for n in lengths if n in meta.lengths] if meta.lengths is not None else [None]
        )
        if not task_lengths:
            skipped[meta.name] = f"none of the requested lengths {list(lengths)} is a length of this task"
            log(f"skipped {meta.name}: {skipped[meta.name]}")
            continue
        loaded: list[Unit] = []
        try:
            for length in task_lengths:
                began = time.perf_counter()
                data = task.load(data_dir, length)
                loaded.append(Unit(meta.name, length, data, time.perf_counter() - began))
        except TaskDataMissing as exc:
            skipped[meta.name] = str(exc)
            log(f"skipped {meta.name}: {exc}")
            continue
        units.extend(loaded)
    return units, skipped


def _percent(metrics: dict[str, float]) -> dict[str, float]:
    return {name: round(100.0 * value, 4) for name, value in metrics.items()}


def score_unit(
    unit: Unit,
    model: CachedEncoder | TextScorer,
    sides: dict[str, Side],
    max_length: int | None,
    main_score: str,
    strategy: Strategy | None = None,
    keep: Callable[[Unit, DenseScores, np.ndarray], None] | None = None,
) -> UnitResult:
    """Encode (or BM25-score) one unit and evaluate it; metrics in percent.  The ranking is
    :func:`~longembed.retrieval.pipeline.rank_documents`, search's own: with the strategy's fusion the
    dense ranking (after MaxSim over chunks) is fused with BM25's on the same documents.  ``keep``: given a
    hybrid's (unit, dense scores, BM25 scores) before they are fused, so another fusion of the same scores
    (advise's tuned fusion) needs no encoding."""
    began = time.perf_counter()
    strategy = strategy or Strategy()
    data = unit.data
    doc_ids, doc_texts = list(data.corpus), list(data.corpus.values())
    query_ids, query_texts = list(data.queries), list(data.queries.values())
    cache: CacheUse | None = None
    truncated: int | None = None
    dense = lexical = None
    if isinstance(model, TextScorer):
        lexical = lexical_scores(model, data, query_texts, doc_texts)
        doc_tokens = np.asarray([round(len(t.split()) / WORDS_PER_TOKEN) for t in doc_texts])
        encode_seconds = 0.0
    else:
        if strategy.multivector:
            documents, queries, dense = token_scores(unit, model, sides, strategy)
        else:
            documents = encode_documents(unit, model, sides["documents"], strategy)
            queries = model.encode(
                query_texts, shard=unit.shard("queries"), prompt=sides["queries"].prompt,
                temperature=sides["queries"].temperature, desc=f"{unit.label} queries",
            )
            dense = exact_dense_scores(queries.vectors, documents.vectors, documents.rows)
        if strategy.fusion is not None:
            lexical = lexical_scores(BM25Model(), data, query_texts, doc_texts)
            if keep is not None:
                keep(unit, dense, lexical)
        doc_tokens = documents.tokens
        if data.passages is not None and len(doc_tokens) != len(doc_ids):  # contexts were encoded
            doc_tokens = np.asarray(model.count_tokens(doc_texts, sides["documents"].prompt))
        encode_seconds = documents.encode_seconds + queries.encode_seconds
        cache = CacheUse(documents.n_cached, documents.n_encoded, queries.n_cached, queries.n_encoded)
        if max_length is not None:
            # chunks are never cut: late chunking runs long texts as overlapping windows
            # nor are token vectors: one pass runs as windows, naive chunks fit
            truncated = 0 if strategy.chunked or strategy.multivector else int(np.sum(doc_tokens > max_length))
    ranked = rank_documents(doc_ids, max(DEFAULT_K_VALUES), dense=dense, lexical=lexical, fusion=strategy.fusion,
                            allowed=candidates(data, query_ids, doc_ids))
    ranking = {qid: [doc_ids[d] for d in row] for qid, row in zip(query_ids, ranked.order, strict=True)}
    # documents with the same vector (BM25 has none; fused ranks would hide them)
    same_vector = None if dense is None else same_vector_groups(ranked.systems["dense"], doc_ids)
    per_query = per_query_metrics(data.qrels, ranking)
    metrics = _percent(mean_metrics(per_query))
    passage = unit_passage_hits(unit, model, sides, strategy, ranking,
                                None if dense is None else (documents, queries.vectors))
    if passage is not None:
        metrics[PASSAGE_HIT] = round(float(np.mean(list(passage.values()))), 4)
    if judges_non_relevant(data.qrels):  # pooled judgments: how much of each top 10 was judged
        metrics[JUDGED_AT_10] = round(100.0 * float(np.mean(list(judged_at_k(data.qrels, ranking, 10).values()))), 4)
    first = {qid: ranking[qid][0] for qid in data.qrels if ranking.get(qid)}
    counts = Counts(
        documents=len(doc_ids),
        queries=len(query_ids),
        document_tokens_mean=round(float(np.mean(doc_tokens)), 1),
        document_tokens_max=int(np.max(doc_tokens)),
        tokens_counted="words / 0.75" if isinstance(model, TextScorer) or model.tokenizer is None else "tokenizer",
        documents_truncated=truncated,
    )
    return UnitResult(
        score=metrics[main_score],
        metrics=metrics,
        counts=counts,
        cache=cache,
        encode_time_s=round(encode_seconds, 3),
        wall_time_s=round(time.perf_counter() - began + unit.load_seconds, 3),
        interval=_rounded(bootstrap_interval([100.0 * v for v in per_query[main_score].values()])),
        data_sha256=data.fingerprint(),
        per_query={qid: round(100.0 * v, 4) for qid, v in per_query[main_score].items()},
        first_ranked=first,
        first_ranked_stats=first_ranked_summary(first, data.qrels, same_vector, documents=doc_ids),
        secondary_per_query={m: {qid: round(100.0 * v, 4) for qid, v in per_query[m].items()}
                             for m in SECONDARY_METRICS} | ({} if passage is None else {PASSAGE_HIT: passage}),
        secondary_intervals={m: _rounded(bootstrap_interval([100.0 * v for v in per_query[m].values()]))
                             for m in SECONDARY_METRICS}
                            | ({} if passage is None else {PASSAGE_HIT: passage_hit_interval(passage)}),
    )


def token_scores(unit: Unit, model: CachedEncoder, sides: dict[str, Side],
                 strategy: Strategy) -> tuple[CachedEncoding, CachedEncoding, DenseScores]:
    """Late interaction (``granularity`` tokens): (documents' and queries' token vectors, MaxSim scores),
    each query scored only against its :func:`candidates`; a document is its own best "chunk"."""
    data = unit.data
    check_token_unit(unit, strategy)
    doc_side, query_side = sides["documents"], sides["queries"]
    documents = model.encode_token_vectors(
        list(data.corpus.values()), shard=unit.shard(doc_side.name), late=strategy.late, chunking=strategy.chunking,
        prompt=doc_side.prompt, temperature=doc_side.temperature, desc=f"{unit.label} document tokens",
    )
    queries = model.encode_token_vectors(
        list(data.queries.values()), shard=unit.shard(query_side.name), document=False, prompt=query_side.prompt,
        temperature=query_side.temperature, desc=f"{unit.label} query tokens",
    )
    scores = maxsim_scores(queries.vectors, _rows(queries), documents.vectors, _rows(documents),
                           allowed=candidates(data, list(data.queries), list(data.corpus)))
    return documents, queries, DenseScores(scores, np.broadcast_to(np.arange(scores.shape[1]), scores.shape))


def check_token_unit(unit: Unit, strategy: Strategy) -> None:
    """A UserError for late interaction over one pass on a passage task (each passage's tokens taken from
    its context's pass is not built yet)."""
    if strategy.multivector and strategy.late and unit.data.passages is not None:
        raise UserError(f"{unit.label} is a passage task: --granularity tokens --late (each passage's tokens from "
                        "one pass over its context) is not built yet (issue 56); give --naive (each passage "
                        "embedded alone)")


def _rows(encoding: CachedEncoding) -> np.ndarray:
    """Token vectors per text (every text has its own matrix, so ``rows`` is set but for no text at all)."""
    return encoding.rows if encoding.rows is not None else np.ones(len(encoding.tokens), dtype=np.int64)


def unit_passage_hits(unit: Unit, model: CachedEncoder | TextScorer, sides: dict[str, Side], strategy: Strategy,
                      ranking: dict[str, list[str]],
                      dense: tuple[CachedEncoding, np.ndarray] | None) -> dict[str, float] | None:
    """Passage hit@1 per query (:mod:`longembed.evaluation.passage_hits`) when the unit locates its answers
    and the run shows passages: BM25 (``dense`` None), or chunks whose spans the encoder tells
    (``dense``: the documents' chunk vectors and the query vectors); else None."""
    data = unit.data
    if not data.answers or data.passages is not None:
        return None
    if dense is None:
        shown = lexical_shown_passages(data.answers, ranking, data.corpus, data.queries)
    elif strategy.chunked and isinstance(model, CachedEncoder) and hasattr(model.encoder, "chunk_spans"):
        documents, query_vectors = dense
        shown = _dense_shown(unit, model, sides, strategy, ranking, documents,
                             dict(zip(data.queries, query_vectors, strict=True)))
    else:
        return None
    return passage_hits(data.answers, ranking, shown) or None


def _dense_shown(unit: Unit, model: CachedEncoder, sides: dict[str, Side], strategy: Strategy,
                 ranking: dict[str, list[str]], documents: CachedEncoding,
                 query_vectors: dict[str, np.ndarray]) -> ShownPassage:
    """The passages a search over the unit's chunks would show (:func:`dense_shown_passages`); windows
    embedded through the cache, as the documents are."""
    data = unit.data
    doc_ids = list(data.corpus)
    assert documents.rows is not None and data.answers is not None
    firsts = np.concatenate([[0], np.cumsum(documents.rows)[:-1]])
    position = {d: i for i, d in enumerate(doc_ids)}

    def chunk_vectors(doc_id: str) -> np.ndarray:
        d = position[doc_id]
        return documents.vectors[firsts[d] : firsts[d] + documents.rows[d]]

    def chunk_spans(doc_id: str) -> list[tuple[int, int]]:
        (spans,) = model.encoder.chunk_spans([data.corpus[doc_id]], strategy.chunking)
        return spans

    side = sides["documents"]

    def embed(texts: list[str]) -> np.ndarray:
        return model.encode(texts, shard=unit.shard("passage-windows"), prompt=side.prompt,
                            temperature=side.temperature, desc=f"{unit.label} passage windows").vectors

    return dense_shown_passages(data.answers, ranking, data.corpus, data.queries, query_vectors, chunk_vectors,
                                chunk_spans, embed, lexical=strategy.fusion is not None, fusion=strategy.fusion)


def lexical_scores(model: TextScorer, data: RetrievalData, query_texts: list[str], doc_texts: list[str]) -> np.ndarray:
    """A lexical model's (BM25's) (queries x documents) scores, ``-inf`` outside each query's :func:`candidates`.

    On a set cut into blocks every block is indexed alone (its own document frequencies), so a block
    scores exactly as the paper's 100-document set would on its own, for BM25 as for a dense model.
    """
    query_ids, doc_ids = list(data.queries), list(data.corpus)
    if data.blocks is None:
        allowed = candidates(data, query_ids, doc_ids)
        scores = model.score(query_texts, doc_texts)
        return scores if allowed is None else np.where(allowed, scores, -np.inf)
    query_block, doc_block = block_labels(data, query_ids, doc_ids)
    scores = np.full((len(query_ids), len(doc_ids)), -np.inf)
    for block in np.unique(query_block):
        rows, columns = np.flatnonzero(query_block == block), np.flatnonzero(doc_block == block)
        scores[np.ix_(rows, columns)] = model.score([query_texts[i] for i in rows], [doc_texts[j] for j in columns])
    return scores


def encode_documents(unit: Unit, model: CachedEncoder, side: Side, strategy: Strategy) -> CachedEncoding:
    """The unit's document vectors (``rows`` set when documents have several chunk vectors each).

    Document level: one vector per document.  Chunks: every document's chunk vectors; on a passage
    task with late chunking, each context is encoded once and every passage gets the vector of its
    span inside it (in corpus order, one row per passage).
    """
    data = unit.data
    texts = list(data.corpus.values())
    desc = f"{unit.label} {side.name}"
    common = {"prompt": side.prompt, "temperature": side.temperature, "desc": desc}
    if not strategy.chunked or (data.passages is not None and not strategy.late):
        return model.encode(texts, shard=unit.shard(side.name), **common)
    if data.passages is None:
        return model.encode_chunks(
            texts, shard=unit.shard(side.name), chunking=strategy.chunking, late=strategy.late, **common
        )
    by_context = passages_by_context(data)
    context_texts, spans = context_spans(data, by_context)
    encoded = model.encode_chunks(
        context_texts, shard=unit.shard("contexts"), chunking=None, spans=spans, late=True, **common
    )
    row_of = {doc_id: row for row, doc_id in enumerate(d for ids in by_context.values() for d in ids)}
    encoded.vectors = encoded.vectors[[row_of[d] for d in data.corpus]]
    encoded.rows = None
    return encoded


def passages_by_context(data: RetrievalData) -> dict[str, list[str]]:
    """Context id -> the ids of its passages, in corpus order (the order their spans are encoded in)."""
    assert data.passages is not None
    by_context: dict[str, list[str]] = {}
    for doc_id in data.corpus:
        by_context.setdefault(data.passages[doc_id].context, []).append(doc_id)
    return by_context


def context_spans(
    data: RetrievalData, by_context: dict[str, list[str]] | None = None
) -> tuple[list[str], list[list[tuple[int, int]]]]:
    """(each context's text, its passages' character spans), in :func:`passages_by_context` order."""
    assert data.passages is not None and data.contexts is not None
    by_context = passages_by_context(data) if by_context is None else by_context
    texts = [data.contexts[c] for c in by_context]
    spans = [[(data.passages[d].start, data.passages[d].end) for d in ids] for ids in by_context.values()]
    return texts, spans


def candidates(data: RetrievalData, query_ids: list[str], doc_ids: list[str]) -> np.ndarray | None:
    """The (queries x documents) documents each query ranks: those of its context on a passage task, of
    its block on a set cut into blocks; None when every query ranks every document."""
    if data.query_contexts is not None:
        assert data.passages is not None
        doc_context = np.asarray([data.passages[d].context for d in doc_ids])
        query_context = np.asarray([data.query_contexts[q] for q in query_ids])
        return query_context[:, None] == doc_context[None, :]
    if data.blocks is not None:
        query_block, doc_block = block_labels(data, query_ids, doc_ids)
        return query_block[:, None] == doc_block[None, :]
    return None


def block_labels(data: RetrievalData, query_ids: list[str], doc_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(each query's block, each document's block), in the order of ``query_ids`` and ``doc_ids``."""
    assert data.blocks is not None
    return (np.asarray([data.blocks.queries[q] for q in query_ids]),
            np.asarray([data.blocks.documents[d] for d in doc_ids]))


def task_result(task: Task, unit_results: list[tuple[Unit, UnitResult]]) -> TaskResult:
    """Aggregate the units of one task: for synthetic tasks every metric is the mean over lengths."""
    meta = task.metadata
    if meta.lengths is None:
        ((_, result),) = unit_results
        return TaskResult(
            main_score=meta.main_score, score=result.score, metrics=result.metrics, counts=result.counts,
            cache=result.cache, encode_time_s=result.encode_time_s, wall_time_s=result.wall_time_s,
            stand_in_for=meta.stand_in_for, interval=result.interval, data_sha256=result.data_sha256,
            per_query=result.per_query, first_ranked=result.first_ranked,
            first_ranked_stats=result.first_ranked_stats, secondary_per_query=result.secondary_per_query,
            secondary_intervals=result.secondary_intervals,
        )
    results = [r for _, r in unit_results]
    names = [n for n in results[0].metrics if all(n in r.metrics for r in results)]
    metrics = {n: round(float(np.mean([r.metrics[n] for r in results])), 4) for n in names}
    caches = [r.cache for r in results if r.cache is not None]
    return TaskResult(
        main_score=meta.main_score,
        score=metrics[meta.main_score],
        metrics=metrics,
        counts=Counts.total([r.counts for r in results]),
        cache=sum(caches[1:], caches[0]) if caches else None,
        encode_time_s=round(sum(r.encode_time_s for r in results), 3),
        wall_time_s=round(sum(r.wall_time_s for r in results), 3),
        stand_in_for=meta.stand_in_for,
        by_length={u.length: r.score for u, r in unit_results if u.length is not None},
        lengths={u.length: r for u, r in unit_results if u.length is not None},
        interval=_rounded(stratified_bootstrap_interval({str(u.length): _values(r) for u, r in unit_results})),
    )


def _values(unit: UnitResult | TaskResult) -> list[float]:
    assert unit.per_query is not None
    return list(unit.per_query.values())


def percent_interval(values: list[float]) -> Interval:
    """The bootstrap interval of per-query scores (percent) as results.json keeps it."""
    return _rounded(bootstrap_interval(values))


def _rounded(interval: Interval) -> Interval:
    """An interval as results.json keeps it (4 decimals, as every score)."""
    interval.estimate, interval.low, interval.high = (round(v, 4) for v in (interval.estimate, interval.low, interval.high))
    return interval


def average_interval(tasks: dict[str, TaskResult]) -> Interval | None:
    """The interval of the run's average (the unweighted mean of task scores, a synthetic task's score
    the mean over its lengths): queries resampled within each task and length, each length weighted
    1 / (tasks x its task's lengths).  None when a task has no per-query scores (an old file)."""
    groups: dict[str, list[float]] = {}
    weights: dict[str, float] = {}
    for name, task in tasks.items():
        units = task.units()
        for length, unit in units.items():
            if unit.per_query is None:
                return None
            key = f"{name}/{length}"
            groups[key], weights[key] = list(unit.per_query.values()), 1 / (len(tasks) * len(units))
    return _rounded(stratified_bootstrap_interval(groups, weights=weights)) if groups else None


def average(tasks: dict[str, TaskResult], lengths: Sequence[int]) -> tuple[float | None, list[str], str]:
    """(unweighted mean of the task scores, the tasks it covers, a note saying what it covers)."""
    names = list(tasks)
    if not names:
        return None, [], "no task ran"
    value = round(float(np.mean([tasks[n].score for n in names])), 4)
    notes = [f"unweighted mean of {len(names)} task score(s): {', '.join(names)}"]
    missing = [t for t in DEFAULT_TASKS if t not in tasks]
    if missing and len(missing) < len(DEFAULT_TASKS):  # a run of only your own tasks is not a partial benchmark
        notes.append(f"not included: {', '.join(missing)}")
    if any(tasks[n].by_length is not None for n in names) and list(lengths) != list(SYNTHETIC_LENGTHS):
        notes.append(f"passkey/needle over lengths {', '.join(map(str, lengths))} only")
    return value, names, "; ".join(notes)


def task_summary(name: str, task: TaskResult) -> str:
    """One progress line: "passkey: accuracy@1 = 53.20 (12.3 s)"."""
    return f"{name}: {task.main_score} = {task.score:.2f} ({task.wall_time_s:.1f} s)"


def hub_warnings(name: str, task: TaskResult) -> list[str]:
    """A line for each of the task's units whose most often first-ranked document is a hub
    (:data:`~longembed.results.hubness.HUB_RULE`): "hub at passkey/2048: passkey-2048-doc017 is ranked
    first for 96 of 200 queries (relevant to 1); ...".  Empty when none is."""
    return [hub_line(name, length, stats) for length, stats in task.hubs().items()]
