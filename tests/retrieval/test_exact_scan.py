"""The exact dense scan of eval and search (``exact_dense_scores``): scored block by block, it gives each
document the best chunk a full matrix product and a per-document argmax give, ties and NaN included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from longembed.errors import UserError
from longembed.retrieval.pipeline import exact_dense_scores, lexical_candidates


def full_scan(queries: np.ndarray, vectors: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference: one matrix product, then each document's max and first argmax, written out."""
    scores = queries @ vectors.T
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    best = np.empty((len(queries), len(rows)), dtype=scores.dtype)
    chunk = np.empty((len(queries), len(rows)), dtype=np.int64)
    for d, (start, count) in enumerate(zip(starts, rows, strict=True)):
        part = scores[:, start : start + count]
        best[:, d], chunk[:, d] = part.max(axis=1), start + part.argmax(axis=1)
    return best, chunk


def integer_vectors(seed: int, rows: np.ndarray, queries: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Small integer entries: every dot product is exact in float32 whatever the summation order, and
    chunks of one document often tie (so the first of equals is tested, across block boundaries)."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-2, 3, size=(queries, 6)).astype(np.float32),
            rng.integers(-2, 3, size=(int(rows.sum()), 6)).astype(np.float32))


@pytest.mark.parametrize("block_rows", [1, 2, 3, 5, 7, 16, 1000])
def test_blockwise_best_chunks_equal_a_full_product_with_blocks_that_split_documents(block_rows: int) -> None:
    rows = np.array([3, 1, 9, 2, 1, 6, 4, 1, 12, 2])  # 41 chunks: most blocks end inside a document
    queries, vectors = integer_vectors(block_rows, rows)
    expected_scores, expected_chunks = full_scan(queries, vectors, rows)
    got = exact_dense_scores(queries, vectors, rows, block_rows=block_rows)
    np.testing.assert_array_equal(got.scores, expected_scores)
    np.testing.assert_array_equal(got.best_chunk, expected_chunks)


def test_the_default_blocks_equal_a_full_product_over_a_memory_map(tmp_path: Path) -> None:
    rows = np.random.default_rng(0).integers(1, 9, size=600)  # about 2,700 chunks: blocks of 1,024 for 300 queries
    queries, vectors = integer_vectors(1, rows, queries=300)
    np.save(tmp_path / "vectors.npy", vectors)
    mapped = np.load(tmp_path / "vectors.npy", mmap_mode="r")
    expected_scores, expected_chunks = full_scan(queries, vectors, rows)
    got = exact_dense_scores(queries, mapped, rows)
    np.testing.assert_array_equal(got.scores, expected_scores)
    np.testing.assert_array_equal(got.best_chunk, expected_chunks)


@pytest.mark.parametrize("nan_chunk", [0, 2, 4])
def test_a_nan_chunk_is_its_documents_best_as_argmax_takes_it_wherever_the_block_ends(nan_chunk: int) -> None:
    rows = np.array([1, 5, 2])
    queries, vectors = integer_vectors(3, rows, queries=2)
    vectors[1 + nan_chunk, 0] = np.nan
    vectors[5, 0] = np.nan  # a second NaN later in the same document: the first one is the best chunk
    expected_scores, expected_chunks = full_scan(queries, vectors, rows)
    for block_rows in (1, 2, 3, 8):
        got = exact_dense_scores(queries, vectors, rows, block_rows=block_rows)
        np.testing.assert_array_equal(got.scores, expected_scores)  # NaN where NaN
        np.testing.assert_array_equal(got.best_chunk, expected_chunks)
        assert (got.best_chunk[:, 1] == 1 + min(nan_chunk, 4)).all()


def test_one_vector_per_document_is_the_product_itself() -> None:
    queries, vectors = integer_vectors(4, np.ones(11, dtype=np.int64))
    got = exact_dense_scores(queries, vectors, None, block_rows=4)
    np.testing.assert_array_equal(got.scores, queries @ vectors.T)
    np.testing.assert_array_equal(got.best_chunk, np.broadcast_to(np.arange(11), (5, 11)))


def test_rows_that_do_not_match_the_vectors_are_one_line_errors() -> None:
    queries, vectors = integer_vectors(5, np.array([2, 2]))
    with pytest.raises(UserError, match="add up to 5 chunks, but there are 4"):
        exact_dense_scores(queries, vectors, np.array([2, 3]))
    with pytest.raises(UserError, match="at least one chunk"):
        exact_dense_scores(queries, vectors, np.array([4, 0]))
    with pytest.raises(UserError, match="block_rows must be at least 1"):
        exact_dense_scores(queries, vectors, np.array([2, 2]), block_rows=0)


def test_lexical_candidates_are_bm25s_best_that_it_ranks():
    # Against a full sort: the `wanted` best BM25 scores, without the documents BM25 does not rank (score 0).
    rng = np.random.default_rng(3)
    scores = np.where(rng.random(200) < 0.7, 0.0, rng.random(200) * 5)
    for wanted in (1, 5, 40, 100, 500):
        expected = {int(d) for d in np.argsort(-scores, kind="stable")[:wanted] if scores[d] > 0}
        assert set(lexical_candidates(scores, wanted).tolist()) == expected
    assert lexical_candidates(np.zeros(10), 5).size == 0
    assert lexical_candidates(scores, 0).size == 0
