"""Bootstrap intervals of per-query scores, against scipy's bootstrap and the normal approximation."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest
from conftest import require_package

from longembed.evaluation.metrics import per_query_metrics, retrieval_metrics
from longembed.results.intervals import Interval, bootstrap_interval, stratified_bootstrap_interval


def bernoulli_scores(p: float, n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(np.float64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interval_equals_scipy_percentile_bootstrap(seed: int) -> None:
    stats = require_package("scipy.stats")
    scores = np.random.default_rng(seed).random(80) ** 2  # skewed, like nDCG
    ours = bootstrap_interval(scores, n_resamples=20_000, seed=seed)
    theirs = stats.bootstrap(
        (scores,), np.mean, confidence_level=0.95, n_resamples=20_000, method="percentile", random_state=seed + 100
    ).confidence_interval
    assert ours.estimate == pytest.approx(scores.mean())
    # two independent sets of 20,000 resamples: their percentiles agree to Monte Carlo error
    assert ours.low == pytest.approx(theirs.low, abs=0.006)
    assert ours.high == pytest.approx(theirs.high, abs=0.006)


def test_interval_width_matches_the_normal_approximation_for_accuracy() -> None:
    scores = bernoulli_scores(0.6, 400, seed=3)
    interval = bootstrap_interval(scores)
    p = scores.mean()
    half_width = 1.959964 * np.sqrt(p * (1 - p) / len(scores))
    assert interval.low < p < interval.high
    assert (interval.high - interval.low) / 2 == pytest.approx(half_width, rel=0.08)


def test_interval_is_seeded_and_constant_scores_have_no_spread() -> None:
    scores = np.random.default_rng(4).random(50)
    assert bootstrap_interval(scores, seed=7) == bootstrap_interval(scores, seed=7)
    assert bootstrap_interval(scores, seed=7) != bootstrap_interval(scores, seed=8)
    assert bootstrap_interval([1.0] * 20) == Interval(1.0, 1.0, 1.0)


def test_stratified_interval_keeps_each_task_its_weight() -> None:
    groups = {"small": bernoulli_scores(0.9, 20, seed=5), "large": bernoulli_scores(0.2, 500, seed=6)}
    interval = stratified_bootstrap_interval(groups)
    assert interval.estimate == pytest.approx((groups["small"].mean() + groups["large"].mean()) / 2)
    # pooling the queries would weight the large task 25 to 1 and put the mean near 0.23
    assert interval.low < interval.estimate < interval.high
    assert interval.low > 0.4
    # one group is the plain bootstrap; the order of the mapping does not matter
    assert stratified_bootstrap_interval({"a": groups["large"]}) == bootstrap_interval(groups["large"])
    assert stratified_bootstrap_interval(dict(reversed(list(groups.items())))) == interval


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="no per-query scores for b"):
        stratified_bootstrap_interval({"a": [1.0], "b": []})
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_interval([1.0, 0.0], confidence=95)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_interval([1.0, 0.0], n_resamples=10)


def test_per_query_metrics_average_to_evaluate_exactly() -> None:
    rng = np.random.default_rng(9)
    docs = [f"d{i}" for i in range(30)]
    qrels = {f"q{i}": {docs[j]: int(rng.integers(1, 3)) for j in rng.choice(30, 3, replace=False)} for i in range(40)}
    qrels["q_none"] = {"d0": 0}  # no relevant document: scores 0, still counted
    ranking = {q: list(rng.permutation(docs)[:10]) for q in qrels if q != "q5"}  # q5: no ranking
    per_query = per_query_metrics(qrels, ranking, (1, 10))
    means = retrieval_metrics(qrels, ranking, (1, 10))
    assert set(per_query) == set(means)
    for name, values in per_query.items():
        assert list(values) == list(qrels)
        assert means[name] == functools.reduce(operator.add, values.values(), 0.0) / len(qrels)  # left to right
        assert values["q5"] == 0.0 and values["q_none"] == 0.0
