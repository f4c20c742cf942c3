"""Late interaction's MaxSim: the blocked scan against a naive double loop, the candidates a query ranks, and
the token granularity's names and dict."""

from __future__ import annotations

import json

import numpy as np
import pytest

from longembed.errors import UserError
from longembed.retrieval.maxsim import maxsim_scores
from longembed.retrieval.strategy import TOKENS, Strategy


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _texts(rng: np.random.Generator, counts: list[int], dim: int = 8) -> tuple[np.ndarray, np.ndarray]:
    vectors = _unit(rng.normal(size=(sum(counts), dim))).astype(np.float16)
    return vectors, np.asarray(counts)


def naive_maxsim(queries: np.ndarray, query_rows: np.ndarray, documents: np.ndarray, document_rows: np.ndarray):
    """The definition, loop by loop: per query, per document, the sum over query tokens of the max cosine."""
    q_starts, d_starts = np.concatenate([[0], np.cumsum(query_rows)]), np.concatenate([[0], np.cumsum(document_rows)])
    out = np.zeros((len(query_rows), len(document_rows)))
    for q in range(len(query_rows)):
        for d in range(len(document_rows)):
            total = 0.0
            for i in range(q_starts[q], q_starts[q + 1]):
                total += max(float(np.dot(queries[i].astype(np.float64), documents[j].astype(np.float64)))
                             for j in range(d_starts[d], d_starts[d + 1]))
            out[q, d] = total
    return out


@pytest.mark.parametrize("block_tokens", [1, 3, 7, None])
def test_maxsim_equals_the_naive_double_loop_whatever_the_block(block_tokens: int | None) -> None:
    rng = np.random.default_rng(0)
    queries, query_rows = _texts(rng, [3, 1, 5, 2])
    documents, document_rows = _texts(rng, [4, 1, 9, 2, 6])  # documents straddle the small blocks
    scores = maxsim_scores(queries, query_rows, documents, document_rows, block_tokens=block_tokens)
    assert scores.shape == (4, 5) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, naive_maxsim(queries, query_rows, documents, document_rows), atol=1e-5)


def test_maxsim_sums_the_best_match_of_each_query_token_not_the_best_sum() -> None:
    """Query tokens a, b.  Document 1 matches a and b, each with one token (MaxSim 2); document 2 has a token
    halfway between them (0.707 each: 1.41), and three copies of it would win a sum-then-max (or mean) rule."""
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    half = _unit(np.array([[1.0, 1.0]]))[0]
    queries = np.stack([a, b])
    documents = np.stack([a, b, half, half, half])
    scores = maxsim_scores(queries, np.array([2]), documents, np.array([2, 3]))
    np.testing.assert_allclose(scores, [[2.0, 2 * half[0]]], atol=1e-6)


def test_only_a_querys_candidates_are_scored_the_rest_minus_infinity() -> None:
    rng = np.random.default_rng(1)
    queries, query_rows = _texts(rng, [2, 3, 1])
    documents, document_rows = _texts(rng, [3, 2, 4, 1])
    allowed = np.array([[True, True, False, False], [False, False, True, True], [True, True, False, False]])
    scores = maxsim_scores(queries, query_rows, documents, document_rows, allowed=allowed, block_tokens=2)
    full = naive_maxsim(queries, query_rows, documents, document_rows)
    np.testing.assert_allclose(scores[allowed], full[allowed], atol=1e-5)
    assert np.all(np.isneginf(scores[~allowed]))


def test_a_text_without_token_vectors_is_an_error() -> None:
    vectors = np.ones((2, 4), dtype=np.float16)
    with pytest.raises(UserError, match="at least one token vector"):
        maxsim_scores(vectors, np.array([2]), vectors, np.array([2, 0]))
    with pytest.raises(UserError, match="add up to 3"):
        maxsim_scores(vectors, np.array([2]), vectors, np.array([3]))


# ----------------------------------------------------------------------------- the strategy
@pytest.mark.parametrize("late, name", [(True, "late-tokens"), (False, "naive-tokens")])
def test_the_token_granularity_round_trips_through_its_dict_and_its_name(late: bool, name: str) -> None:
    strategy = Strategy("m", "pi", 4096, granularity=TOKENS, chunking="tokens:128", late=late)
    assert strategy.multivector and not strategy.chunked and strategy.name == name
    data = json.loads(json.dumps(strategy.to_dict()))
    assert data["granularity"] == "tokens" and data["late"] is late
    assert data["chunking"] == (None if late else "tokens:128")  # one pass: no chunking decides its tokens
    assert Strategy.from_dict(data) == strategy and Strategy.from_dict(data).to_dict() == data
    base = Strategy(method="pi", max_length=4096, chunking="tokens:128")
    made = Strategy.from_name(name, "m", base)
    assert made.name == name and made.multivector and made.late is late
    if late:  # one pass with the extension method, as late chunks
        assert made == strategy
    else:  # each chunk alone: the model's own window
        assert (made.method, made.max_length, made.chunking) == ("truncate", None, "tokens:128")
    assert Strategy.from_name(name + "+bm25", "m", base).name == name + "+bm25"


def test_late_tokens_are_one_strategy_whatever_the_chunking_and_bm25_has_no_tokens() -> None:
    assert Strategy("m", granularity=TOKENS, chunking="tokens:64") == Strategy("m", granularity=TOKENS)
    assert Strategy("m", granularity=TOKENS, chunking="tokens:64", late=False) != Strategy("m", granularity=TOKENS,
                                                                                           late=False)
    with pytest.raises(UserError, match="need an embedding model"):
        Strategy("bm25", granularity=TOKENS)
