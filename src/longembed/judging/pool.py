"""TREC pooling of one question: the union of every strategy's top k, one result per document, in a
seeded random order, with nothing that says which strategy found which.

A result is a document (BEIR's qrels judge documents, not passages): found by several strategies, it is
shown once, with the passage of the strategy that ranked it highest (the first strategy given on a
tie).  The order is a shuffle of the documents sorted by id, seeded by the seed and the question's text:
the same question pools in the same order in every session, whatever order the strategies come in, and
no position (first, or grouped) tells a strategy.  The payload the page gets (:meth:`PooledResult.to_page`)
holds the document's id, its source and the passage: no rank, score or strategy.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the default pool depth: each strategy's top 10 (what nDCG@10 reads)
POOL_DEPTH = 10
#: the passage fields the page shows
PASSAGE_FIELDS = ("text", "before", "after", "location", "page")


@dataclass(frozen=True)
class PooledResult:
    """One document of a pool: its id, source, shown passage, and (kept here, never sent to the page)
    each pooling strategy's rank of it."""

    doc_id: str
    source: str
    passage: dict[str, Any]
    ranks: dict[str, int] = field(default_factory=dict)

    def to_page(self) -> dict[str, Any]:
        """What the judging page shows of it: no rank, score or strategy."""
        return {"doc_id": self.doc_id, "source": self.source,
                "passage": {k: self.passage.get(k) for k in PASSAGE_FIELDS}}


#: a strategy's search: (question, k) -> its ranked results, each a dict as ``search --json`` prints one
#: (``id``, ``rank``, ``source``, ``passage``)
Searcher = Callable[[str, int], Sequence[Mapping[str, Any]]]


def pool_question(question: str, searchers: Mapping[str, Searcher], depth: int = POOL_DEPTH,
                  seed: int = 0) -> list[PooledResult]:
    """The pool of ``question``: the top ``depth`` of each searcher, merged per document and shuffled
    (module docstring)."""
    if depth < 1:
        raise ValueError(f"the pool depth must be at least 1, not {depth}")
    rankings = {name: list(search(question, depth))[:depth] for name, search in searchers.items()}
    return merge_rankings(rankings, question, seed)


def merge_rankings(rankings: Mapping[str, Sequence[Mapping[str, Any]]], question: str,
                   seed: int = 0) -> list[PooledResult]:
    """One :class:`PooledResult` per document ranked by any strategy, shown with the passage of its best
    rank, in the seeded order of :func:`shuffled`."""
    best: dict[str, tuple[int, Mapping[str, Any]]] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, results in rankings.items():
        for position, result in enumerate(results, 1):
            doc_id, rank = str(result["id"]), int(result.get("rank", position))
            ranks.setdefault(doc_id, {})[name] = rank
            if doc_id not in best or rank < best[doc_id][0]:
                best[doc_id] = (rank, result)
    pooled = [PooledResult(doc, str(result.get("source", doc)), dict(result.get("passage") or {}), ranks[doc])
              for doc, (_, result) in best.items()]
    return shuffled(pooled, question, seed)


def shuffled(pooled: Sequence[PooledResult], question: str, seed: int) -> list[PooledResult]:
    """``pooled`` sorted by document id, then shuffled by a RNG seeded with ``seed`` and the question."""
    ordered = sorted(pooled, key=lambda result: result.doc_id)
    random.Random(f"{seed}\n{question}").shuffle(ordered)
    return ordered
