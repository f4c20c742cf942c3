"""Tests of longembed.evaluation.metrics: hand-computed cases and agreement with pytrec_eval."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from conftest import require_package

from longembed.evaluation.metrics import evaluate_scores, rank, retrieval_metrics

K_VALUES = (1, 3, 5, 10, 100)


# ---------------------------------------------------------------- rank


def test_rank_orders_by_score_descending() -> None:
    scores = np.array([[0.1, 0.9, 0.5], [3.0, 2.0, 1.0]])
    out = rank(scores, ["q1", "q2"], ["a", "b", "c"])
    assert out == {"q1": ["b", "c", "a"], "q2": ["a", "b", "c"]}


def test_rank_breaks_ties_by_doc_id_ascending_whatever_the_column_order() -> None:
    doc_ids = ["d3", "d1", "d2", "d0"]
    scores = np.array([[1.0, 1.0, 2.0, 1.0]])
    assert rank(scores, ["q"], doc_ids)["q"] == ["d2", "d0", "d1", "d3"]
    perm = [3, 0, 2, 1]
    assert rank(scores[:, perm], ["q"], [doc_ids[i] for i in perm])["q"] == ["d2", "d0", "d1", "d3"]


def test_rank_puts_nan_last_and_truncates() -> None:
    scores = np.array([[np.nan, 0.0, -5.0, 2.0]])
    assert rank(scores, ["q"], ["a", "b", "c", "d"], top_k=None)["q"] == ["d", "b", "c", "a"]
    assert rank(scores, ["q"], ["a", "b", "c", "d"], top_k=2)["q"] == ["d", "b"]


def test_rank_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="shape"):
        rank(np.zeros((2, 3)), ["q1"], ["a", "b", "c"])
    with pytest.raises(ValueError, match="duplicates"):
        rank(np.zeros((1, 2)), ["q1"], ["a", "a"])
    with pytest.raises(ValueError, match="top_k"):
        rank(np.zeros((1, 2)), ["q1"], ["a", "b"], top_k=0)


# ---------------------------------------------------------------- evaluate, by hand


def test_evaluate_single_relevant_document_at_rank_two() -> None:
    res = retrieval_metrics({"q": {"a": 1}}, {"q": ["b", "a", "c"]}, k_values=(1, 3))
    assert res["ndcg@1"] == 0.0
    assert res["ndcg@3"] == pytest.approx(1 / math.log2(3))
    assert res["mrr@1"] == 0.0
    assert res["mrr@3"] == pytest.approx(0.5)
    assert res["recall@1"] == 0.0
    assert res["recall@3"] == 1.0
    assert res["accuracy@1"] == 0.0


def test_evaluate_graded_relevance_uses_linear_gains_and_full_ideal() -> None:
    # Judged: a=2, b=1, c=0 (judged non-relevant). Ranking b, c, a.
    res = retrieval_metrics({"q": {"a": 2, "b": 1, "c": 0}}, {"q": ["b", "c", "a"]}, k_values=(1, 3))
    idcg3 = 2 + 1 / math.log2(3)
    assert res["ndcg@1"] == pytest.approx(1 / 2)  # gain 1 vs ideal gain 2
    assert res["ndcg@3"] == pytest.approx((1 + 2 / math.log2(4)) / idcg3)
    assert res["recall@1"] == pytest.approx(0.5)
    assert res["recall@3"] == pytest.approx(1.0)
    assert res["mrr@1"] == 1.0
    assert res["accuracy@1"] == 1.0


def test_evaluate_averages_over_qrels_and_missing_rankings_score_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"d": 0}}
    ranking = {"q1": ["a", "b"], "q2": ["a", "b"], "q_unjudged": ["a"]}  # q3 missing; q4 nothing relevant
    res = retrieval_metrics(qrels, ranking, k_values=(1, 2))
    assert res["accuracy@1"] == pytest.approx(1 / 4)
    assert res["mrr@2"] == pytest.approx((1 + 0.5) / 4)
    assert res["recall@2"] == pytest.approx(2 / 4)
    assert res["ndcg@2"] == pytest.approx((1 + 1 / math.log2(3)) / 4)
    assert set(res) == {f"{m}@{k}" for m in ("ndcg", "mrr", "recall") for k in (1, 2)} | {"accuracy@1"}


def test_evaluate_rejects_duplicates_and_empty_qrels() -> None:
    with pytest.raises(ValueError, match="twice"):
        retrieval_metrics({"q": {"a": 1}}, {"q": ["a", "a"]})
    with pytest.raises(ValueError, match="empty"):
        retrieval_metrics({}, {})


def test_evaluate_scores_keeps_enough_documents_for_the_largest_k() -> None:
    # 150 documents, the relevant one ranked 120th: found at k=120 only if 120 documents are kept.
    doc_ids = [f"d{i:03d}" for i in range(150)]
    scores = -np.arange(150, dtype=float)[None, :]
    res = evaluate_scores(scores, ["q"], doc_ids, {"q": {"d119": 1}}, k_values=(100, 120))
    assert res["recall@100"] == 0.0
    assert res["recall@120"] == 1.0
    assert res["mrr@120"] == pytest.approx(1 / 120)


# ---------------------------------------------------------------- agreement with pytrec_eval


def _random_case(seed: int) -> tuple[dict[str, dict[str, int]], np.ndarray, list[str], list[str]]:
    rng = random.Random(seed)
    n_q, n_d = 25, 130
    doc_ids = [f"doc{rng.randrange(10**6):06d}-{i}" for i in range(n_d)]
    query_ids = [f"q{i}" for i in range(n_q)]
    qrels: dict[str, dict[str, int]] = {}
    for qid in query_ids:
        judged = rng.sample(doc_ids, rng.randint(1, 12))
        qrels[qid] = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
    qrels["q0"] = {doc_ids[0]: 0}  # a query with no relevant document
    # Coarse integer scores, higher on average for relevant documents, with many ties (broken by doc id).
    scores = np.array(
        [[rng.randint(0, 6) + 2 * qrels[q].get(d, 0) for d in doc_ids] for q in query_ids], dtype=float
    )
    return qrels, scores, query_ids, doc_ids


@pytest.mark.parametrize("seed", range(6))
def test_evaluate_equals_pytrec_eval_on_random_runs(seed: int) -> None:
    pytrec_eval = require_package("pytrec_eval")
    qrels, scores, query_ids, doc_ids = _random_case(seed)
    ranking = rank(scores, query_ids, doc_ids, top_k=None)
    ours = retrieval_metrics(qrels, ranking, K_VALUES)

    def run_of(k: int | None) -> dict[str, dict[str, float]]:
        # Strictly decreasing scores along our ranking, so pytrec_eval's tie order does not matter.
        return {q: {d: float(len(r) - i) for i, d in enumerate(r[:k])} for q, r in ranking.items()}

    ks = ",".join(map(str, K_VALUES))
    measures = {f"ndcg_cut.{ks}", f"recall.{ks}", "P.1"}
    full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run_of(None))
    assert set(full) == set(qrels)

    def mean(per_query: dict[str, dict[str, float]], measure: str) -> float:
        return sum(v[measure] for v in per_query.values()) / len(qrels)

    for k in K_VALUES:
        assert ours[f"ndcg@{k}"] == pytest.approx(mean(full, f"ndcg_cut_{k}"), abs=1e-6)
        assert ours[f"recall@{k}"] == pytest.approx(mean(full, f"recall_{k}"), abs=1e-6)
        # trec_eval's recip_rank has no cutoff: give it the run cut at k.
        cut = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run_of(k))
        assert ours[f"mrr@{k}"] == pytest.approx(mean(cut, "recip_rank"), abs=1e-6)
    assert ours["accuracy@1"] == pytest.approx(mean(full, "P_1"), abs=1e-6)
    # The case is not degenerate: the metrics are neither all 0 nor all 1.
    assert 0.05 < ours["ndcg@10"] < 0.95
