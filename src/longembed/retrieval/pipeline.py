"""The one ranking pipeline of eval, search, the server and advise's latency meter: each system's
(queries x documents) scores -> best chunk per document -> filter -> fuse -> rank.  Since every caller
runs :func:`rank_documents`, a search ranks exactly as the run it reproduces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from longembed.errors import UserError
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import competition_ranks, fuse_with_tie_break, lexical_ranking
from longembed.retrieval.ranking import max_over_rows, rank_order

DENSE, LEXICAL = "dense", "bm25"


@dataclass(frozen=True)
class DenseScores:
    """Each document's dense score (its best chunk's cosine, MaxSim) and that chunk's global row (-1:
    not scored, e.g. outside an ANN index's candidates)."""

    scores: np.ndarray
    best_chunk: np.ndarray


@dataclass(frozen=True)
class RankedDocuments:
    """What :func:`rank_documents` returns: per query the ranked documents' positions (best first, at
    most k, only documents with a finite score), the ranking's scores (fused, or the one system's),
    each system's scores (``-inf``: not a candidate) and the dense side's best chunks."""

    order: list[np.ndarray]
    scores: np.ndarray
    systems: dict[str, np.ndarray]
    best_chunk: np.ndarray | None

    def ranks(self, system: str) -> np.ndarray:
        """(queries x documents) competition ranks of one system (``inf``: it does not rank the document;
        BM25 does not rank a document it scores 0)."""
        scores = self.systems[system]
        return competition_ranks(lexical_ranking(scores) if system == LEXICAL else scores)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of length 1 (a zero row stays zero): cosine is then a dot product."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def exact_dense_scores(query_vectors: np.ndarray, chunk_vectors: np.ndarray, rows: np.ndarray | None) -> DenseScores:
    """Every document's best chunk, by an exact scan of every chunk vector (``rows[i]`` consecutive chunks
    belong to document i; None: one vector per document)."""
    chunk_scores = query_vectors @ chunk_vectors.T
    if rows is None:
        return DenseScores(chunk_scores, np.broadcast_to(np.arange(chunk_scores.shape[1]), chunk_scores.shape))
    return DenseScores(max_over_rows(chunk_scores, rows), _best_chunks(chunk_scores, rows))


def rank_documents(
    doc_ids: Sequence[str],
    k: int | None,
    *,
    dense: DenseScores | None = None,
    lexical: np.ndarray | None = None,
    fusion: Fusion | None = None,
    allowed: np.ndarray | None = None,
) -> RankedDocuments:
    """Rank documents for every query (see the module docstring).

    ``dense``: the dense side (:func:`exact_dense_scores`, or an ANN index's); ``lexical``: BM25's
    (queries x documents) scores; at least one.  ``fusion``: how the two are fused (both needed).
    ``allowed``: the documents a query may rank, (documents,) or (queries x documents) booleans (a
    search's filter, a task's candidates); others score ``-inf`` in every system.  ``k``: at most this
    many per query (None: all).  Ties follow :mod:`longembed.retrieval.ranking`'s rule.
    """
    if dense is None and lexical is None:
        raise UserError("rank_documents needs dense scores, lexical scores or both")
    systems: dict[str, np.ndarray] = {}
    if dense is not None:
        systems[DENSE] = np.asarray(dense.scores, dtype=np.float64)
    if lexical is not None:
        systems[LEXICAL] = np.asarray(lexical, dtype=np.float64)
    if allowed is not None:
        systems = {name: np.where(allowed, scores, -np.inf) for name, scores in systems.items()}
    tie_break = None
    if fusion is not None:
        if len(systems) != 2:
            raise UserError("fusion needs both a dense and a lexical ranking")
        scores, tie_break = fuse_with_tie_break(fusion, systems[DENSE], systems[LEXICAL])
    elif len(systems) == 1:
        (scores,) = systems.values()
    else:
        raise UserError("dense and lexical scores without a fusion rule: say how to fuse them")
    query_ids = [str(q) for q in range(scores.shape[0])]
    order = rank_order(scores, query_ids, doc_ids, top_k=k, tie_break=tie_break)
    kept = [row[np.isfinite(scores[q, row])] for q, row in enumerate(order)]
    return RankedDocuments(kept, scores, systems, None if dense is None else dense.best_chunk)


def _best_chunks(chunk_scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per query and document, the (global) row of the document's best chunk (the first of equals)."""
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    best = np.empty((chunk_scores.shape[0], len(rows)), dtype=np.int64)
    for d, (start, count) in enumerate(zip(starts.tolist(), rows.tolist(), strict=True)):
        best[:, d] = start + np.argmax(chunk_scores[:, start : start + count], axis=1)
    return best
