"""The arithmetic of hybrid retrieval: reciprocal rank fusion, the linear mix of normalised scores, and
the key that breaks fused ties (what each rule does, and why: :mod:`longembed.retrieval.fusion`)."""

from __future__ import annotations

import numpy as np

from longembed.errors import UserError
from longembed.retrieval.fusion import RRF_K, Fusion

#: up to this many columns :func:`competition_ranks_of` counts per column; beyond, it sorts the row
FEW_COLUMNS = 64


def fuse_scores(fusion: Fusion, dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """The fused (queries x documents) scores of two score matrices of the same shape."""
    dense, lexical = np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64)
    if dense.shape != lexical.shape:
        raise UserError(f"dense scores {dense.shape} and lexical scores {lexical.shape} differ in shape")
    if fusion.method == "rrf":
        return reciprocal_rank_fusion([dense, lexical_ranking(lexical)], fusion.k,
                                      outside=np.isneginf(dense) & np.isneginf(lexical))
    return linear_fusion(dense, lexical, fusion.weight)


def lexical_ranking(scores: np.ndarray) -> np.ndarray:
    """BM25's scores as a ranking: a document scored 0 shares no term with the query and is not in BM25's
    answer (``-inf``), as it would not be in a Lucene index's (:mod:`longembed.retrieval.fusion`)."""
    return np.where(scores > 0, scores, -np.inf)


def fuse_with_tie_break(fusion: Fusion, dense: np.ndarray, lexical: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the fused scores, the key that breaks their ties): what :func:`~longembed.retrieval.ranking.rank`
    takes as ``scores`` and ``tie_break``."""
    return fuse_scores(fusion, dense, lexical), tie_break_scores(dense, lexical)


def tie_break_scores(dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """The key that orders documents whose fused scores tie: ``minmax(dense) + minmax(lexical)`` per
    query (CombSUM of the normalised scores; why: :mod:`longembed.retrieval.fusion`).  A document that
    BM25 scores 0 gets BM25's minimum (0 after normalisation); one outside the candidates, ``-inf``."""
    dense, lexical = np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64)
    outside = ~np.isfinite(dense) | ~np.isfinite(lexical)
    dense_part, lexical_part = (np.where(outside, 0.0, min_max(s)) for s in (dense, lexical))
    return np.where(outside, -np.inf, dense_part + lexical_part)


def competition_ranks(scores: np.ndarray) -> np.ndarray:
    """Per row, each entry's rank: 1 + the number of entries strictly higher; ``-inf`` (not ranked)
    gets ``inf``.  One sort per row: in descending order an entry's rank is 1 + where its run of equal
    scores begins (no binary search per entry, which is random memory access over a long row)."""
    ranks = np.full(scores.shape, np.inf)
    for i, row in enumerate(scores):
        ranked = np.flatnonzero(np.isfinite(row))
        order = np.argsort(row[ranked])[::-1]  # descending; equal scores share a rank in any order
        ordered = row[ranked][order]
        begins = np.empty(len(ordered), dtype=bool)
        begins[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=begins[1:])
        ranks[i, ranked[order]] = 1.0 + np.maximum.accumulate(np.where(begins, np.arange(len(ordered)), 0))
    return ranks


def competition_ranks_of(scores: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """:func:`competition_ranks` of one row's entries at ``columns`` only (a search's shown results):
    a count of the higher entries per column, no sort of the row unless the columns are many."""
    chosen = scores[columns]
    if len(columns) > FEW_COLUMNS:
        return competition_ranks(scores[None, :])[0, columns]
    ranked = np.where(np.isfinite(scores), scores, -np.inf)
    higher = np.array([np.count_nonzero(ranked > value) for value in chosen.tolist()], dtype=np.float64)
    return np.where(np.isfinite(chosen), 1.0 + higher, np.inf)


def reciprocal_rank_fusion(rankings: list[np.ndarray], k: int = RRF_K, outside: np.ndarray | None = None) -> np.ndarray:
    """``sum over systems of 1 / (k + rank)``; a system that does not rank a document (``-inf``) adds
    nothing to it; entries of ``outside`` (no system's candidates) are ``-inf``."""
    fused = sum(1.0 / (k + competition_ranks(scores)) for scores in rankings)
    fused = np.asarray(fused, dtype=np.float64)
    if outside is not None:
        fused[outside] = -np.inf
    return fused


def min_max(scores: np.ndarray) -> np.ndarray:
    """Each row scaled to [0, 1] over its finite entries (all 0 for a constant row); ``-inf`` kept."""
    finite = np.isfinite(scores)
    low = np.where(finite, scores, np.inf).min(axis=1, keepdims=True)
    high = np.where(finite, scores, -np.inf).max(axis=1, keepdims=True)
    span = np.where(high > low, high - low, 1.0)
    return np.where(finite, (scores - np.where(np.isfinite(low), low, 0.0)) / span, -np.inf)


def linear_fusion(dense: np.ndarray, lexical: np.ndarray, weight: float) -> np.ndarray:
    """``(1 - weight) * minmax(dense) + weight * minmax(lexical)`` per query; ``-inf`` where either is."""
    outside = ~np.isfinite(dense) | ~np.isfinite(lexical)
    dense_part, lexical_part = (np.where(outside, 0.0, min_max(s)) for s in (dense, lexical))
    return np.where(outside, -np.inf, (1.0 - weight) * dense_part + weight * lexical_part)
