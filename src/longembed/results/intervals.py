"""Confidence intervals of retrieval scores: percentile bootstrap over queries.

A benchmark score is a mean over queries; which queries a task happens to hold is the main source of
its uncertainty (50 per length on passkey and needle).  Resampling the queries with replacement and
reading the 2.5th and 97.5th percentiles of the resampled means gives a 95% interval (Efron and
Tibshirani 1993, the percentile method; ``scipy.stats.bootstrap(method="percentile")`` computes the
same).  The interval's type, :class:`~longembed.results.run.Interval`, lives with the results it
belongs to (numpy-free).  An average over tasks resamples within each task, so every task keeps its own weight
(a stratified bootstrap).  Everything is seeded: the same scores give the same interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from longembed.errors import UserError
from longembed.results.run import Interval

#: Resamples per interval: the percentiles of 10,000 resampled means move by well under 0.5 points.
DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95


def bootstrap_interval(
    scores: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The mean of per-query ``scores`` with its percentile-bootstrap interval."""
    return stratified_bootstrap_interval({"scores": scores}, confidence, n_resamples, seed)


def stratified_bootstrap_interval(
    groups: Mapping[str, Sequence[float]],
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    weights: Mapping[str, float] | None = None,
) -> Interval:
    """The mean over groups (tasks, or a task's lengths) of each group's mean, with a
    percentile-bootstrap interval that resamples queries within each group.

    ``weights`` (group -> weight, normalised here; default equal) give a nested average its shape:
    the run's average weighs each length of a synthetic task by 1 / (tasks x its lengths).
    """
    _check(groups, confidence, n_resamples)
    share = _shares(groups, weights)
    rng = np.random.default_rng(seed)
    estimate = float(sum(share[n] * np.mean(np.asarray(v, dtype=np.float64)) for n, v in groups.items()))
    resampled = np.zeros(n_resamples)
    for name in sorted(groups):  # a fixed order, so the draws do not depend on the mapping's
        values = np.asarray(groups[name], dtype=np.float64)
        draws = rng.integers(0, len(values), size=(n_resamples, len(values)))
        resampled += share[name] * values[draws].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), confidence, resamples=n_resamples, seed=seed)


def _shares(groups: Mapping[str, Sequence[float]], weights: Mapping[str, float] | None) -> dict[str, float]:
    """Each group's weight, summing to 1."""
    if weights is None:
        return {name: 1 / len(groups) for name in groups}
    if set(weights) != set(groups) or any(w <= 0 for w in weights.values()):
        raise UserError("weights must give every group a positive weight, and only the groups")
    total = sum(weights.values())
    return {name: weights[name] / total for name in groups}


def _check(groups: Mapping[str, Sequence[float]], confidence: float, n_resamples: int) -> None:
    if not groups:
        raise UserError("no scores to resample")
    empty = sorted(name for name, values in groups.items() if len(values) == 0)
    if empty:
        raise UserError(f"no per-query scores for {', '.join(empty)}")
    if not 0 < confidence < 1:
        raise UserError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
        raise UserError(f"n_resamples must be an integer of at least 100, got {n_resamples!r}")
