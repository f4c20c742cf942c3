"""Paired statistics of two runs scored on the same queries: the interval of their mean difference,
a sign-flip permutation test, and Holm's correction when many tests are read together.

Two runs scored on the same queries differ query by query, d_i = B_i - A_i; which queries a task holds
is the shared source of noise, so the comparison works on the differences:

* **interval**: the paired percentile bootstrap. Resampling query indices, the same for both runs, is
  resampling the differences; a mean over several strata (a task's lengths, the tasks of an average)
  resamples within each stratum (:func:`~longembed.results.intervals.stratified_bootstrap_interval`).
* **p-value**: the paired sign-flip (randomisation) test. Under "no difference" each d_i is as likely
  as -d_i, so the statistic T = sum_i c_i d_i (c_i: the query's weight in the mean) is compared with
  its value under every pattern of sign flips: all 2^n patterns of the n non-zero terms when n <= 16
  (exact), else 10,000 seeded random patterns with the (count + 1) / (N + 1) correction that keeps a
  Monte Carlo p-value valid (Phipson and Smyth 2010).  Two-sided: |T*| >= |T|.
* **Holm's correction** (Holm 1979): the step-down adjusted p-values, which keep the chance of any
  false "significant" among all the tests at most alpha (as ``statsmodels``' ``multipletests(method="holm")``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from longembed.errors import UserError
from longembed.results.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, stratified_bootstrap_interval
from longembed.results.run import Interval

#: Up to this many non-zero differences the sign-flip test enumerates all 2^n patterns (65,536 at 16).
EXACT_MAX = 16
#: A difference is significant when its (adjusted) p-value is below this.
ALPHA = 0.05
PAIRED_BOOTSTRAP = "paired percentile bootstrap over shared queries"
#: Random sign patterns are drawn in blocks of this many, so memory stays bounded for long tasks.
BLOCK = 1_000


@dataclass(frozen=True)
class SignFlip:
    """A sign-flip test's two-sided p-value and how it was computed."""

    p_value: float
    method: str  # "exact (2^n sign patterns)" or "random (N seeded sign patterns)"
    nonzero: int  # the differences that were not 0 (zeros carry no sign)


def difference_interval(
    differences: Mapping[str, Sequence[float]],
    weights: Mapping[str, float] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The weighted mean over strata of each stratum's mean difference B - A, with its paired
    bootstrap interval (queries resampled within each stratum; ``weights`` as in
    :func:`~longembed.results.intervals.stratified_bootstrap_interval`)."""
    interval = stratified_bootstrap_interval(differences, confidence, n_resamples, seed, weights)
    return dataclasses.replace(interval, method=PAIRED_BOOTSTRAP)


def mean_terms(differences: Mapping[str, Sequence[float]], weights: Mapping[str, float] | None = None) -> list[float]:
    """Each query's term c_i d_i of the weighted mean of stratum means (their sum is the mean):
    c_i = the stratum's share / its query count."""
    shares = normalised(weights if weights is not None else {name: 1.0 for name in differences})
    if set(shares) != set(differences):
        raise UserError("weights must name exactly the strata of the differences")
    return [shares[name] * d / len(values) for name, values in differences.items() for d in values]


def normalised(weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` scaled to sum to 1 (each must be positive)."""
    if not weights or any(w <= 0 for w in weights.values()):
        raise UserError(f"weights must be positive, got {dict(weights)}")
    total = sum(weights.values())
    return {name: w / total for name, w in weights.items()}


def sign_flip_test(terms: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> SignFlip:
    """Two-sided p-value of the paired sign-flip test of T = sum(terms) against zero.

    Exact over all 2^n sign patterns of the n non-zero terms when n <= :data:`EXACT_MAX`; otherwise
    ``n_resamples`` seeded random patterns, p = (count + 1) / (n_resamples + 1).  No non-zero term: p = 1.
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
        raise UserError(f"n_resamples must be an integer of at least 100, got {n_resamples!r}")
    values = np.asarray(terms, dtype=np.float64)
    values = values[values != 0]
    observed = abs(float(values.sum()))
    # |T*| >= |T| up to rounding: the same sum added in another order may differ in its last bits
    threshold = observed - 1e-9 * max(1.0, float(np.abs(values).sum()))
    if len(values) <= EXACT_MAX:
        extreme = np.count_nonzero(np.abs(all_sign_patterns(len(values)) @ values) >= threshold)
        return SignFlip(extreme / 2 ** len(values), f"exact ({2 ** len(values)} sign patterns)", len(values))
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, n_resamples, BLOCK):
        signs = rng.integers(0, 2, size=(min(BLOCK, n_resamples - start), len(values))) * 2.0 - 1.0
        extreme += int(np.count_nonzero(np.abs(signs @ values) >= threshold))
    return SignFlip((extreme + 1) / (n_resamples + 1), f"random ({n_resamples} seeded sign patterns)", len(values))


def all_sign_patterns(n: int) -> np.ndarray:
    """The 2^n x n matrix of every +-1 pattern (row k: the bits of k)."""
    bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
    return bits * 2.0 - 1.0


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    Sorted ascending, the k-th smallest (k from 0) becomes max over j <= k of min(1, (m - j) p_(j)):
    a test is rejected at level alpha exactly when its adjusted p-value is at most alpha.
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
