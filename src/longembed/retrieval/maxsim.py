"""Late interaction's score (ColBERT's MaxSim, Khattab & Zaharia 2020): a document scores, for a query, the
sum over the query's token vectors of the best cosine with any of the document's token vectors.

Token vectors are unit rows (float16 or float32), every text's rows one after another with ``rows[i]`` rows
for text i.  The scan goes block by block over the document tokens (each block widened to float32 for one
matrix product), keeping per query token its best match in each document: no (query tokens x document
tokens) matrix is made, whatever the documents' length.
"""

from __future__ import annotations

import numpy as np

from longembed.errors import UserError

#: query-token x document-token scores per matrix product (16 Mi float32: 64 MiB)
MAXSIM_BLOCK_ELEMENTS = 2**24
#: document tokens per product at least, however many query tokens
MAXSIM_MIN_BLOCK_TOKENS = 256


def offsets_of(rows: np.ndarray, n_vectors: int, what: str) -> np.ndarray:
    """Where each text's vectors begin, and the end; ``rows`` checked against the vectors (every text
    needs at least one vector)."""
    rows = np.asarray(rows, dtype=np.int64)
    if np.any(rows < 1):
        raise UserError(f"every {what} needs at least one token vector")
    offsets = np.concatenate([[0], np.cumsum(rows)])
    if offsets[-1] != n_vectors:
        raise UserError(f"the {what}s' rows add up to {offsets[-1]} token vectors, but there are {n_vectors}")
    return offsets


def maxsim_scores(query_vectors: np.ndarray, query_rows: np.ndarray, document_vectors: np.ndarray,
                  document_rows: np.ndarray, allowed: np.ndarray | None = None,
                  block_tokens: int | None = None) -> np.ndarray:
    """(queries x documents) float32 MaxSim scores (see the module docstring).

    ``allowed``: (queries x documents) booleans, the documents each query ranks (a passage task's context, a
    block); the others are not computed and score ``-inf``.  Queries with the same candidates are scored
    together.  ``block_tokens``: document tokens per matrix product (default: about
    :data:`MAXSIM_BLOCK_ELEMENTS` scores a product)."""
    query_offsets = offsets_of(query_rows, len(query_vectors), "query")
    document_offsets = offsets_of(document_rows, len(document_vectors), "document")
    n_queries, n_documents = len(query_offsets) - 1, len(document_offsets) - 1
    if allowed is None:
        return _group_scores(query_vectors, query_offsets, document_vectors, document_offsets, block_tokens)
    allowed = np.broadcast_to(np.asarray(allowed, dtype=bool), (n_queries, n_documents))
    scores = np.full((n_queries, n_documents), -np.inf, dtype=np.float32)
    patterns, group_of = np.unique(allowed, axis=0, return_inverse=True)
    for group, pattern in enumerate(patterns):
        queries, documents = np.flatnonzero(group_of.reshape(-1) == group), np.flatnonzero(pattern)
        if len(documents) == 0:
            continue
        q_vectors, q_offsets = _subset(query_vectors, query_offsets, queries)
        d_vectors, d_offsets = _subset(document_vectors, document_offsets, documents)
        scores[np.ix_(queries, documents)] = _group_scores(q_vectors, q_offsets, d_vectors, d_offsets, block_tokens)
    return scores


def _subset(vectors: np.ndarray, offsets: np.ndarray, texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The token vectors of ``texts`` only, one after another, and their offsets."""
    rows = np.diff(offsets)[texts]
    index = np.concatenate([np.arange(offsets[t], offsets[t + 1]) for t in texts])
    return vectors[index], np.concatenate([[0], np.cumsum(rows)])


def _group_scores(query_vectors: np.ndarray, query_offsets: np.ndarray, document_vectors: np.ndarray,
                  document_offsets: np.ndarray, block_tokens: int | None) -> np.ndarray:
    """Every query against every document: the best match of each query token in each document (block by
    block over the document tokens), then the sum over each query's tokens."""
    queries = np.asarray(query_vectors, dtype=np.float32)
    n_documents = len(document_offsets) - 1
    if block_tokens is None:
        block_tokens = max(MAXSIM_MIN_BLOCK_TOKENS, MAXSIM_BLOCK_ELEMENTS // max(len(queries), 1))
    if block_tokens < 1:
        raise UserError(f"block_tokens must be at least 1, got {block_tokens}")
    best = np.full((len(queries), n_documents), -np.inf, dtype=np.float32)
    for first in range(0, len(document_vectors), block_tokens):
        last = min(first + block_tokens, len(document_vectors))
        block = np.asarray(document_vectors[first:last], dtype=np.float32)
        # the documents with a token in the block, and where each begins in it
        begin = int(np.searchsorted(document_offsets, first, side="right")) - 1
        end = int(np.searchsorted(document_offsets, last, side="left"))
        starts = np.maximum(document_offsets[begin:end], first) - first
        block_best = np.maximum.reduceat(queries @ block.T, starts, axis=1)
        best[:, begin:end] = np.maximum(best[:, begin:end], block_best)
    return np.add.reduceat(best, query_offsets[:-1], axis=0, dtype=np.float32) if len(queries) else best
