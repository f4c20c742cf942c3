"""Hybrid retrieval (issue 26): the dense ranking fused with BM25's, checked against naive
implementations of reciprocal rank fusion (Cormack et al. 2009) and of the linear mix, and through a
whole run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata
from test_runner import HashEncoder, TinyTask, run

from longembed.evaluation.metrics import per_query_metrics
from longembed.report.labels import run_label
from longembed.results import RunResults
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import competition_ranks, competition_ranks_of, fuse_scores, min_max
from longembed.retrieval.strategy import Strategy
from longembed.tasks import get_task


def naive_rrf(dense: np.ndarray, lexical: np.ndarray, k: int) -> np.ndarray:
    """Cormack et al.'s formula written out: per query, each system's ranked list (BM25's without
    the documents it scores 0), rank = 1 + how many it scores strictly higher."""
    fused = np.zeros(dense.shape)
    for q in range(dense.shape[0]):
        for scores, ranked in ((dense[q], range(dense.shape[1])), (lexical[q], np.flatnonzero(lexical[q] > 0))):
            for d in ranked:
                rank = 1 + sum(1 for e in ranked if scores[e] > scores[d])
                fused[q, d] += 1.0 / (k + rank)
    return fused


def naive_tie_break(dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """The documented tie-break key written out: per query, each system's scores scaled to [0, 1] by
    (s - min) / (max - min), summed."""
    out = np.zeros(dense.shape)
    for scores in (dense, lexical):
        for q, row in enumerate(scores):
            low, high = min(row), max(row)
            out[q] += [(s - low) / (high - low) if high > low else 0.0 for s in row]
    return out


def naive_ranking(fused: np.ndarray, tie_break: np.ndarray, query_ids: list[str], doc_ids: list[str]) -> dict:
    """Each query's documents sorted by (fused score, tie-break key) descending, then id ascending."""
    return {qid: sorted(doc_ids, key=lambda d: (-fused[q, doc_ids.index(d)], -tie_break[q, doc_ids.index(d)], d))
            for q, qid in enumerate(query_ids)}


def test_competition_ranks_equal_scipys_min_ranks() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, size=(7, 30)).astype(float)  # many ties
    expected = np.stack([rankdata(-row, method="min") for row in scores])
    np.testing.assert_array_equal(competition_ranks(scores), expected)
    scores[0, :3] = -np.inf  # not ranked
    ranks = competition_ranks(scores)
    assert np.all(np.isinf(ranks[0, :3]))
    np.testing.assert_array_equal(ranks[0, 3:], rankdata(-scores[0, 3:], method="min"))


@pytest.mark.parametrize("shown", [1, 10, 150])
def test_the_ranks_of_a_few_shown_documents_are_their_competition_ranks(shown: int) -> None:
    rng = np.random.default_rng(shown)
    scores = rng.integers(0, 5, size=(4, 200)).astype(float)  # many ties
    scores[rng.random(scores.shape) < 0.1] = -np.inf  # not ranked
    scores[rng.random(scores.shape) < 0.05] = np.nan
    scores[rng.random(scores.shape) < 0.05] = np.inf
    expected = competition_ranks(scores)
    for q, row in enumerate(scores):
        columns = rng.choice(200, size=shown, replace=False)
        np.testing.assert_array_equal(competition_ranks_of(row, columns), expected[q, columns])


@pytest.mark.parametrize("k", [1, 60])
def test_rrf_equals_the_formula_written_out(k: int) -> None:
    rng = np.random.default_rng(1)
    dense = rng.normal(size=(5, 25)).round(1)  # rounding makes ties
    lexical = np.maximum(rng.normal(size=(5, 25)), 0).round(1)  # about half score 0: not in BM25's list
    fused = fuse_scores(Fusion(method="rrf", k=k), dense, lexical)
    np.testing.assert_allclose(fused, naive_rrf(dense, lexical, k), rtol=1e-12)


def test_rrf_lifts_a_document_both_systems_rank_second_over_one_each_ranks_first() -> None:
    dense = np.array([[3.0, 2.0, 0.0, 1.0]])  # d0 first, d1 second, d3 third, d2 last
    lexical = np.array([[0.0, 2.0, 3.0, 0.0]])  # d2 first, d1 second, d0 and d3 not retrieved
    fused = fuse_scores(Fusion(), dense, lexical)
    assert np.argmax(fused[0]) == 1  # 2/(60+2) beats 1/61 + 0 and 1/(60+4) + 1/61
    assert fused[0, 3] == pytest.approx(1 / 63)  # dense only


def test_linear_mix_of_min_max_normalised_scores() -> None:
    dense = np.array([[0.2, 0.6, 1.0], [0.5, 0.5, 0.5]])
    lexical = np.array([[4.0, 0.0, 2.0], [0.0, 1.0, 3.0]])
    fused = fuse_scores(Fusion(method="linear", weight=0.25), dense, lexical)
    expected = 0.75 * np.array([[0.0, 0.5, 1.0], [0.0, 0.0, 0.0]]) + 0.25 * np.array([[1.0, 0.0, 0.5], [0, 1 / 3, 1]])
    np.testing.assert_allclose(fused, expected)
    # w = 0 is the dense ranking, w = 1 BM25's
    only_dense = fuse_scores(Fusion(method="linear", weight=0.0), dense, lexical)
    np.testing.assert_array_equal(np.argsort(-only_dense[0]), np.argsort(-dense[0]))
    only_lexical = fuse_scores(Fusion(method="linear", weight=1.0), dense, lexical)
    np.testing.assert_array_equal(np.argsort(-only_lexical[0]), np.argsort(-lexical[0]))


@pytest.mark.parametrize("method", ["rrf", "linear"])
def test_documents_outside_a_querys_candidates_stay_out(method: str) -> None:
    """A passage task's other contexts are -inf for both systems: they stay -inf, and the ranks and
    the normalisation are taken over the candidates only."""
    dense = np.array([[0.9, 0.1, -np.inf, -np.inf], [-np.inf, -np.inf, 0.3, 0.7]])
    lexical = np.array([[0.0, 5.0, -np.inf, -np.inf], [-np.inf, -np.inf, 1.0, 0.0]])
    fused = fuse_scores(Fusion(method=method, weight=1.0 if method == "linear" else 0.5), dense, lexical)
    assert np.isneginf(fused[0, 2:]).all() and np.isneginf(fused[1, :2]).all()
    assert np.isfinite(fused[0, :2]).all() and np.isfinite(fused[1, 2:]).all()
    if method == "rrf":  # ranks within the candidates: d0 is dense's 1st, d1 its 2nd and BM25's 1st
        np.testing.assert_allclose(fused[0, :2], [1 / 61, 1 / 62 + 1 / 61])
    else:
        np.testing.assert_allclose(fused, np.where(np.isfinite(fused), min_max(lexical), -np.inf))


def test_bad_fusion_options_are_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="fuse_weight given without fuse"):
        Strategy(fuse_weight=0.3)
    with pytest.raises(ValueError, match="with rrf set fuse_k"):
        Strategy(fuse="bm25", fuse_weight=0.3)
    with pytest.raises(ValueError, match="fuse_k is rrf's constant"):
        Strategy(fuse="bm25", fuse_method="linear", fuse_k=10)
    with pytest.raises(ValueError, match=r"fuse_weight must be in \[0, 1\]"):
        Strategy(fuse="bm25", fuse_method="linear", fuse_weight=1.5)
    with pytest.raises(ValueError, match="fuse must be one of"):
        Strategy(fuse="splade")
    with pytest.raises(ValueError, match="fuse_k must be a positive integer"):
        Strategy(fuse="bm25", fuse_k=0)
    assert Strategy(fuse="bm25").fusion == Fusion("bm25", "rrf", 60)
    assert Strategy().fusion is None


def test_a_fused_run_scores_the_naive_fusion_of_the_encoders_and_bm25s_scores(tmp_path: Path) -> None:
    encoder = HashEncoder(tmp_path / "m")
    results = run(encoder, tmp_path, tasks=["passkey", TinyTask()], lengths=[256], fuse="bm25")
    assert results.config.retrieval().fusion.to_dict() == {"source": "bm25", "method": "rrf", "k": 60}
    assert RunResults.load(tmp_path / "run") == results
    for task, length in (("passkey", 256), ("tiny", None)):
        data = (TinyTask() if task == "tiny" else get_task("passkey")).load(None, length)
        doc_ids, query_ids = list(data.corpus), list(data.queries)
        queries = encoder.encode(list(data.queries.values()), prompt="search_query: ")
        documents = encoder.encode(list(data.corpus.values()), prompt="search_document: ")
        lexical = BM25Model().score(list(data.queries.values()), list(data.corpus.values()))
        dense = queries @ documents.T
        ranking = naive_ranking(naive_rrf(dense, lexical, 60), naive_tie_break(dense, lexical), query_ids, doc_ids)
        expected = per_query_metrics(data.qrels, ranking)
        unit = results.tasks[task].units()[length]
        main = results.tasks[task].main_score
        assert unit.per_query == {q: pytest.approx(100 * v, abs=1e-3) for q, v in expected[main].items()}


def test_fusion_changes_the_ranking_and_the_dense_cache_is_reused(tmp_path: Path) -> None:
    """The fused run reads the dense run's vectors from the cache (nothing encoded again) and differs
    from it where BM25 disagrees; the report labels it."""
    encoder = HashEncoder(tmp_path / "m", temperature=0.2)  # noisy vectors: BM25 has something to fix
    dense = run(encoder, tmp_path, "dense", tasks=["passkey"], lengths=[512])
    encoded = encoder.n_texts
    hybrid = run(encoder, tmp_path, "hybrid", tasks=["passkey"], lengths=[512], fuse="bm25")
    assert encoder.n_texts == encoded
    assert hybrid.tasks["passkey"].score > dense.tasks["passkey"].score
    assert run_label(hybrid).endswith("+ bm25 rrf") and "bm25" not in run_label(dense)
    linear = run(encoder, tmp_path, "linear", tasks=["passkey"], lengths=[512], fuse="bm25",
                 fuse_method="linear", fuse_weight=0.3)
    assert linear.config.retrieval().fusion.to_dict() == {"source": "bm25", "method": "linear", "weight": 0.3}
    assert run_label(linear).endswith("+ bm25 linear w=0.3")


def test_bm25_cannot_be_fused_with_itself(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the model is BM25 already"):
        run(BM25Model(), tmp_path, tasks=["passkey"], lengths=[256], fuse="bm25")
