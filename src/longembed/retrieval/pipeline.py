"""The one ranking pipeline of eval, search, the server and advise's latency meter: each system's
(queries x documents) scores -> best chunk per document -> filter -> fuse -> rank.  Since every caller
runs :func:`rank_documents`, a search ranks exactly as the run it reproduces.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from longembed.errors import UserError
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import (
    competition_ranks,
    competition_ranks_of,
    fuse_with_tie_break,
    lexical_ranking,
)
from longembed.retrieval.ranking import rank_order

DENSE, LEXICAL = "dense", "bm25"
#: scores per matrix product in an exact scan (:func:`exact_dense_scores`): 1 MiB of float32, so a block's
#: scores stay in cache while they are reduced, whatever the number of chunks
SCAN_BLOCK_ELEMENTS = 2**18
#: chunk rows per matrix product at least, however many queries (a product of fewer is slower per row)
SCAN_MIN_BLOCK_ROWS = 1024


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

    def ranks_of(self, system: str, query: int, documents: np.ndarray) -> np.ndarray:
        """:meth:`ranks` of one query's ``documents`` only (without ranking every document)."""
        scores = self.systems[system][query]
        return competition_ranks_of(lexical_ranking(scores) if system == LEXICAL else scores, documents)


def lexical_candidates(scores: np.ndarray, wanted: int) -> np.ndarray:
    """The documents of BM25's ``wanted`` best scores for one query (in no order) that BM25 ranks at all
    (:func:`~longembed.retrieval.rank_fusion.lexical_ranking`): the lexical side's candidates that an ANN
    search adds to its own, so a fused ranking misses no document BM25 put near the top."""
    ranking = lexical_ranking(scores)
    wanted = min(wanted, len(ranking))
    if wanted < 1:
        return np.empty(0, dtype=np.int64)
    top = np.argpartition(-ranking, wanted - 1)[:wanted]
    return top[np.isfinite(ranking[top])]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of length 1 (a zero row stays zero): cosine is then a dot product."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def exact_dense_scores(query_vectors: np.ndarray, chunk_vectors: np.ndarray, rows: np.ndarray | None,
                       block_rows: int | None = None) -> DenseScores:
    """Every document's best chunk, by an exact scan of every chunk vector (``rows[i]`` consecutive chunks
    belong to document i; None: one vector per document).

    The chunk vectors are scored in blocks of ``block_rows`` consecutive rows (default: about
    :data:`SCAN_BLOCK_ELEMENTS` scores a block), one matrix product per block into one buffer, and each
    block is reduced to its documents' best chunks at once (:func:`_block_best`): a memory-mapped matrix
    is read once, block by block, and no (queries x chunks) matrix is made.  A document may straddle
    blocks; its best chunk is the first of its equals, and a NaN score counts as the best (as
    ``np.argmax`` and ``np.maximum`` take it)."""
    queries = np.asarray(query_vectors)
    blocks = _scored_blocks(queries, chunk_vectors, block_rows)
    if rows is None:
        scores = np.empty((len(queries), len(chunk_vectors)), dtype=np.result_type(queries, chunk_vectors))
        for first, block_scores in blocks:
            scores[:, first : first + block_scores.shape[1]] = block_scores
        return DenseScores(scores, np.broadcast_to(np.arange(scores.shape[1]), scores.shape))
    offsets = _document_offsets(rows, len(chunk_vectors))
    best = np.empty((len(queries), len(offsets) - 1), dtype=np.result_type(queries, chunk_vectors))
    best_chunk = np.empty(best.shape, dtype=np.int64)
    for first, block_scores in blocks:
        # the documents with a chunk in the block, and where each begins in it
        documents = slice(int(np.searchsorted(offsets, first, side="right")) - 1,
                          int(np.searchsorted(offsets, first + block_scores.shape[1], side="left")))
        scores, chunks = _block_best(block_scores, np.maximum(offsets[documents], first) - first)
        chunks += first
        if offsets[documents.start] < first:  # it began in an earlier block: the earlier chunk wins a tie
            before, before_chunk = best[:, documents.start], best_chunk[:, documents.start]
            later = (scores[:, 0] > before) | (np.isnan(scores[:, 0]) & ~np.isnan(before))
            scores[:, 0], chunks[:, 0] = np.where(later, scores[:, 0], before), np.where(later, chunks[:, 0], before_chunk)
        best[:, documents], best_chunk[:, documents] = scores, chunks
    return DenseScores(best, best_chunk)


def _document_offsets(rows: np.ndarray, n_chunks: int) -> np.ndarray:
    """Where each document's chunks begin, and the end: ``rows`` checked against the chunk count."""
    rows = np.asarray(rows)
    if np.any(rows < 1):
        raise UserError("every document needs at least one chunk vector")
    offsets = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)])
    if offsets[-1] != n_chunks:
        raise UserError(f"the documents' rows add up to {offsets[-1]} chunks, but there are {n_chunks} chunk vectors")
    return offsets


def _scored_blocks(queries: np.ndarray, vectors: np.ndarray, block_rows: int | None) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, ``queries @ vectors[first:first + block_rows].T``) block by block, each product written
    into one buffer (valid until the next block)."""
    if block_rows is None:
        block_rows = max(SCAN_MIN_BLOCK_ROWS, SCAN_BLOCK_ELEMENTS // max(len(queries), 1))
    if block_rows < 1:
        raise UserError(f"block_rows must be at least 1, got {block_rows}")
    buffer = np.empty(len(queries) * min(block_rows, len(vectors)), dtype=np.result_type(queries, vectors))
    for first in range(0, len(vectors), block_rows):
        block = vectors[first : first + block_rows]
        out = buffer[: len(queries) * len(block)].reshape(len(queries), len(block))
        yield first, np.matmul(queries, block.T, out=out)


def _block_best(scores: np.ndarray, segments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query and segment of consecutive columns (starting at ``segments``), the best score and the
    column of its first occurrence (NaN the best, as ``np.argmax`` takes it)."""
    best = np.maximum.reduceat(scores, segments, axis=1)
    lengths = np.diff(np.append(segments, scores.shape[1]))
    spread = np.repeat(best, lengths, axis=1)
    hits = scores == spread
    if np.isnan(best).any():
        hits |= np.isnan(scores) & np.isnan(spread)
    columns = np.where(hits, np.arange(scores.shape[1]), scores.shape[1])
    return best, np.minimum.reduceat(columns, segments, axis=1)


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
