"""Passage hit@1: whether the passage a search shows for the first correctly ranked document overlaps
where the task says the answer is (``RetrievalData.answers``).  nDCG counts a document as found; a
person reads the passage, so this is the number that says whether they saw the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from longembed.chunking.spans import Span
from longembed.results import Interval
from longembed.results.intervals import bootstrap_interval
from longembed.retrieval.passages import overlaps

#: the metric's name in results (beside ndcg@10)
PASSAGE_HIT = "passage_hit@1"
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


def passage_hit_interval(hits: Mapping[str, float]) -> Interval | None:
    """The mean hit rate (percent) with its bootstrap interval (nDCG's helper); None without queries."""
    return bootstrap_interval(list(hits.values())) if hits else None
