"""The rule that calls a strategy "about as good as the best": non-inferiority within a margin, with
bounds that hold simultaneously over every strategy compared with the best (Bonferroni).

"Not significantly worse" is what too few queries give every strategy, and it is not "as good" (SPEC,
"Choosing among strategies").  A strategy is **within** the margin delta when the lower end of its
paired difference to the best (strategy - best, in the score's points, on the same queries) is at least
-delta, where the interval is the paired percentile bootstrap at two-sided confidence 1 - 0.05 / m for
m strategies compared with the best: its lower end is a one-sided 1 - 0.025 / m bound, and all m hold
together with probability at least 97.5%.  **Worse**: the simultaneous upper end below -delta.  Else
**undecided**: the data cannot tell.  ``longembed advise`` (:mod:`longembed.advice.recommend`, which
explains the choice of Bonferroni over Holm) and ``longembed report --summary`` both read it from here.
"""

from __future__ import annotations

from longembed.results.run_results import Interval

#: Points of a 0-100 score a strategy may lose against the best and still be called about as good.
MARGIN = 2.0
#: Two-sided confidence of the displayed intervals; the bounds are Bonferroni-adjusted from it.
CONFIDENCE = 0.95
WITHIN, WORSE, UNDECIDED = "within", "worse", "undecided"
RULE = ("non-inferiority: within when the lower end of the paired bootstrap interval of (strategy - best), "
        "Bonferroni-adjusted over the strategies compared with the best (two-sided 1 - 0.05/m), is above "
        "-margin; worse when its upper end is below -margin; else undecided")


def simultaneous_confidence(comparisons: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided confidence whose intervals hold for all ``comparisons`` at once (Bonferroni): its
    lower ends are one-sided (1 - (1 - confidence) / 2 / m) bounds."""
    return 1 - (1 - confidence) / max(comparisons, 1)


def judge(bound: Interval, margin: float) -> str:
    """"within" the margin (lower bound >= -margin), "worse" (upper bound < -margin), else "undecided"."""
    if bound.low >= -margin:
        return WITHIN
    if bound.high < -margin:
        return WORSE
    return UNDECIDED
