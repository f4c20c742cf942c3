"""Ranking: a score matrix -> each query's documents, best first; a document's score from its chunks'.

The one ranking rule of ``longembed eval`` and ``longembed search``:

* a document's dense score is its best chunk's (MaxSim, :func:`max_over_rows`);
* documents are ordered by score, descending; equal scores by the ``tie_break`` key when there is one
  (fused runs: :func:`~longembed.retrieval.rank_fusion.tie_break_scores`), descending; then by document
  id, ascending (string order), which is deterministic and independent of the matrix's column order but
  carries no information; NaN ranks last;
* a run file lists strictly decreasing scores in that order (:func:`strictly_decreasing`), so any tool
  (trec_eval breaks ties by document id, descending) reads the ranking the scores came from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from longembed.errors import UserError


def rank(
    scores: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    top_k: int | None = 100,
    tie_break: np.ndarray | None = None,
) -> dict[str, list[str]]:
    """Ranked document ids per query, best first, from a ``(len(query_ids), len(doc_ids))`` score matrix.

    Higher scores rank first; ties are broken by ``tie_break`` (same shape, higher first) when given,
    then by document id, ascending; NaN ranks last. At most ``top_k`` documents are kept per query (all
    if ``top_k`` is None).
    """
    order = rank_order(scores, query_ids, doc_ids, top_k, tie_break)
    return {qid: [doc_ids[j] for j in row] for qid, row in zip(query_ids, order.tolist(), strict=True)}


def rank_order(
    scores: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    top_k: int | None = 100,
    tie_break: np.ndarray | None = None,
) -> np.ndarray:
    """Per query, the ranked documents' positions in ``doc_ids``: :func:`rank` as indices, for callers
    that need each ranked document's scores too."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (len(query_ids), len(doc_ids)):
        raise UserError(f"scores have shape {scores.shape}, expected ({len(query_ids)}, {len(doc_ids)})")
    if tie_break is not None and np.shape(tie_break) != scores.shape:
        raise UserError(f"tie_break has shape {np.shape(tie_break)}, expected {scores.shape}")
    if len(set(doc_ids)) != len(doc_ids):
        raise UserError("doc_ids contain duplicates")
    if len(set(query_ids)) != len(query_ids):
        raise UserError("query_ids contain duplicates")
    if top_k is not None and top_k < 1:
        raise UserError(f"top_k must be at least 1 (or None), not {top_k}")
    keys = _descending(scores)  # ascending sort of -score = descending score
    ties = None if tie_break is None else _descending(np.asarray(tie_break, dtype=np.float64))
    if top_k is None or top_k >= len(doc_ids):
        return _sorted(keys, ties, doc_ids, np.arange(len(doc_ids)), top_k)
    order = np.empty((len(query_ids), top_k), dtype=np.int64)
    for q, row in enumerate(keys):
        # the first k have a key of at most the k-th smallest: sort only those (ties at the k-th included)
        candidates = np.flatnonzero(row <= np.partition(row, top_k - 1)[top_k - 1])
        order[q] = _sorted(keys[q : q + 1], None if ties is None else ties[q : q + 1], doc_ids, candidates, top_k)[0]
    return order


def _sorted(keys: np.ndarray, ties: np.ndarray | None, doc_ids: Sequence[str], columns: np.ndarray,
            top_k: int | None) -> np.ndarray:
    """Per row of ``keys``, the first ``top_k`` of the documents at ``columns`` in the ranking's order:
    key, then tie key (both ascending), then id."""
    by_id = np.asarray(sorted(columns.tolist(), key=doc_ids.__getitem__), dtype=np.int64)
    if not len(by_id):
        return np.zeros((len(keys), 0), dtype=np.int64)
    sort_keys = [keys[:, by_id]] if ties is None else [ties[:, by_id], keys[:, by_id]]
    # lexsort is stable and sorts by its last key first: key, then tie key, then id order
    return by_id[np.lexsort(sort_keys, axis=-1)[:, :top_k]]


def _descending(values: np.ndarray) -> np.ndarray:
    keys = -values
    keys[np.isnan(keys)] = np.inf
    return keys


def max_over_rows(scores: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """(queries, documents) scores from (queries, chunks) ones: each document's best chunk (MaxSim);
    ``rows[i]`` consecutive columns belong to document i.  The identity when rows is None."""
    if rows is None:
        return scores
    if np.any(rows < 1):
        raise UserError("every document needs at least one chunk vector")
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    return np.maximum.reduceat(scores, starts, axis=1)


#: The least relative step between consecutive scores of a run file: 2^-20, 8 float32 ulps, because some
#: readers hold scores as float32 (pytrec_eval tells 1 + 1e-7 from 1, not 1 + 1e-8).
RUN_SCORE_STEP = 2.0**-20
#: The least absolute step (a step from a score of 0).
RUN_SCORE_FLOOR = 1e-30


def strictly_decreasing(scores: Sequence[float]) -> list[float]:
    """Scores listed in rank order, each lowered where needed to lie at least :data:`RUN_SCORE_STEP`
    (relative) below the one before it: a run file whose order every reader, float32 or float64, takes
    as given.  A score already that far below its predecessor is kept as it is.  Finite scores only."""
    out: list[float] = []
    for score in scores:
        value = float(score)
        if not np.isfinite(value):
            raise UserError(f"a run file needs finite scores, got {value}")
        if out:
            value = min(value, out[-1] - max(abs(out[-1]) * RUN_SCORE_STEP, RUN_SCORE_FLOOR))
        out.append(value)
    return out
