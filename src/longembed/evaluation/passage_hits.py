"""Passage hit@1: whether the passage a search shows for the first correctly ranked document overlaps
where the task says the answer is (``RetrievalData.answers``).  nDCG counts a document as found; a
person reads the passage, so this is the number that says whether they saw the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from longembed.chunking.spans import Span
from longembed.results import Interval, RunResults
from longembed.results.intervals import bootstrap_interval
from longembed.results.run_results import PASSAGE_HIT
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.passages import (
    EmbedTexts,
    PassageQuery,
    PassageRequest,
    best_chunk_rows,
    choose_passages,
    chunk_pieces,
    overlaps,
)

#: a query counts when one of its answered documents is ranked within this depth (nDCG@10's)
PASSAGE_DEPTH = 10

#: (query id, document id) -> the (start, end) span of the passage shown for that document
ShownPassage = Callable[[str, str], Span]


def first_answered(ranked: Sequence[str], answered: Mapping[str, object], depth: int = PASSAGE_DEPTH) -> str | None:
    """The first of ``ranked`` (within ``depth``) that the task located an answer in, else None."""
    return next((d for d in list(ranked)[:depth] if d in answered), None)


def passage_hits(answers: Mapping[str, Mapping[str, Sequence[Span]]], ranking: Mapping[str, Sequence[str]],
                 shown: ShownPassage, depth: int = PASSAGE_DEPTH) -> dict[str, float]:
    """Per query with located answers whose answered document is ranked within ``depth``: 100 when the
    passage ``shown`` for the first such document overlaps an answer span, else 0.  Queries whose
    answered documents are all ranked lower are left out (their miss is nDCG's, not the passage's)."""
    hits: dict[str, float] = {}
    for qid, by_document in answers.items():
        doc_id = first_answered(ranking.get(qid, ()), by_document, depth)
        if doc_id is not None:
            hits[qid] = 100.0 if overlaps(shown(qid, doc_id), by_document[doc_id]) else 0.0
    return hits


def passage_hit_interval(hits: Mapping[object, float]) -> Interval | None:
    """The mean hit rate (percent) with its bootstrap interval (nDCG's helper, rounded as results.json
    keeps scores); None without queries."""
    if not hits:
        return None
    interval = bootstrap_interval(list(hits.values()))
    interval.estimate, interval.low, interval.high = (round(v, 4) for v in (interval.estimate, interval.low, interval.high))
    return interval


def dense_shown_passages(
    answers: Mapping[str, Mapping[str, Sequence[Span]]],
    ranking: Mapping[str, Sequence[str]],
    corpus: Mapping[str, str],
    queries: Mapping[str, str],
    query_vectors: Mapping[str, np.ndarray],
    chunk_vectors: Callable[[str], np.ndarray],
    chunk_spans: Callable[[str], Sequence[Span]],
    embed: EmbedTexts,
    lexical: bool = False,
    fusion: Fusion | None = None,
) -> ShownPassage:
    """What search shows for the documents :func:`passage_hits` judges: the best window around each
    one's best chunks (:func:`~longembed.retrieval.passages.choose_passages`), every sentence piece of
    the run embedded in one call of ``embed`` (eval passes its cached encoder: a rerun reads them back)."""
    wanted = {(q, d) for q, by_doc in answers.items() if (d := first_answered(ranking.get(q, ()), by_doc))}
    requests = {}
    for qid, doc_id in wanted:
        spans = list(chunk_spans(doc_id))
        best = best_chunk_rows(chunk_vectors(doc_id) @ query_vectors[qid], 0)
        requests[(qid, doc_id)] = PassageRequest(corpus[doc_id], [spans[r] for r in best])
    texts = sorted({corpus[d][s:e] for (_, d), r in requests.items() for run in chunk_pieces(r.text, r.chunks)
                    for s, e in run})
    vectors = dict(zip(texts, np.asarray(embed(texts)) if texts else [], strict=True))
    shown = {}
    for (qid, doc_id), request in requests.items():
        (shown[(qid, doc_id)],) = choose_passages(PassageQuery(queries[qid], query_vectors[qid]), [request],
                                                  lambda ts: np.stack([vectors[t] for t in ts]), lexical, fusion)
    return lambda qid, doc_id: shown[(qid, doc_id)]


def lexical_shown_passages(answers: Mapping[str, Mapping[str, Sequence[Span]]], ranking: Mapping[str, Sequence[str]],
                           corpus: Mapping[str, str], queries: Mapping[str, str]) -> ShownPassage:
    """What a BM25 index's search shows: the best window of the whole document by BM25."""
    shown = {}
    for qid, by_doc in answers.items():
        doc_id = first_answered(ranking.get(qid, ()), by_doc)
        if doc_id is not None:
            text = corpus[doc_id]
            (shown[(qid, doc_id)],) = choose_passages(PassageQuery(queries[qid]), [PassageRequest(text, [(0, len(text))])],
                                                      None, lexical=True)
    return lambda qid, doc_id: shown[(qid, doc_id)]


def run_passage_hit(run: RunResults) -> Interval | None:
    """A run's passage hit@1 pooled over the queries of every task (and length) that located answers,
    with its bootstrap interval; None when none did (``advise`` shows it beside the score)."""
    values: list[float] = []
    for task in run.tasks.values():
        units = list(task.lengths.values()) if task.lengths else [task]
        for unit in units:
            values += list(((unit.secondary_per_query or {}).get(PASSAGE_HIT) or {}).values())
    return passage_hit_interval(dict(enumerate(values)))
