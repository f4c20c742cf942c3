"""From the strategies' runs and costs to the advice: the best strategy, each other one against it, and
the cheapest strategy shown to be about as good as the best.

**The question** is "what is the cheapest strategy about as good as the best?", so the rule is
non-inferiority, not non-significance: "not significantly worse" is what too few queries give every
strategy, and it is not "as good" (SPEC, "Choosing among strategies").  A strategy **qualifies** when
the lower confidence bound of its difference to the best (strategy - best, in the score's points, on the
same queries) is at least -delta, the margin (``--margin``, default :data:`MARGIN`).

**The bound** is simultaneous over the m strategies compared with the best (Bonferroni): the paired
percentile bootstrap of :func:`longembed.results.compare` at two-sided confidence 1 - 0.05 / m, whose
lower end is a one-sided (1 - 0.025 / m) lower bound; all m bounds hold together with probability at
least 97.5%, so "every strategy called within the margin is" holds for the set.  (With one comparison
it is the lower end of the usual 95% interval: the one-sided 2.5% of non-inferiority trials, ICH E9.)
Holm's step-down gives sharper *tests* but no informative simultaneous *bounds* (the bounds compatible
with it, Strassburger and Bretz 2008, collapse to the margin for every rejected hypothesis), and the
advice reports the bounds, so it uses Bonferroni.

**Verdicts**: "within" (bound >= -delta), "worse" (the simultaneous upper end below -delta: worse by
more than the margin), else "undecided".  **The choice**: the cheapest of the best and the strategies
within the margin (:data:`COST_ORDER`).  When a cheaper strategy than the choice is undecided, the data
cannot separate them, and the headline says so, with the queries that would: a standard
non-inferiority sample size (normal approximation), n = n_now x ((z_{1-0.025/m} + z_{0.8}) se /
(delta + d))^2, 80% power at the observed difference d (when d > -delta) and the observed standard
error se of the difference (the 95% bootstrap interval's width / 3.92, i.e. the per-query differences'
SD / sqrt(n_now), weights of a multi-task average included).

**The default margin, 2 points** (of a 0-100 score such as nDCG@10 or accuracy@1): a cheaper strategy
may lose, on average, as much as one query in fifty outright (its relevant document leaving the top
ranks); smaller than the gaps between extension methods in LongEmbed's tables (several points); and
within reach of a task one can build: with per-query differences of SD 20 points (40 questions on 49
essays) and 8 comparisons, a true tie is shown within 2 points by ~1,300 queries, within 1 by ~5,100.
Choose your own with ``--margin`` (a margin is a judgement of what loss you accept, not a statistic).

The p-values of :func:`longembed.results.compare` (sign-flip, Holm-adjusted over the comparisons with
the best) are kept in the file as information; the rule reads the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist

from longembed.advice.spec import MARGIN
from longembed.errors import UserError
from longembed.results import Comparison, RunResults, compare
from longembed.results.advice import Recommendation, StrategyCost, StrategyResult, VersusBest
from longembed.results.comparison import AVERAGE, TASK, UNIT, Difference, PairComparison
from longembed.results.noninferiority import (
    CONFIDENCE,
    UNDECIDED,
    WITHIN,
    WORSE,  # noqa: F401  (re-exported: the verdicts are named here too)
    judge,
    simultaneous_confidence,
)
from longembed.results.paired import ALPHA, holm
from longembed.results.run_results import Interval

COST_ORDER = "encode seconds per 1k tokens, then index bytes, then query latency"
#: The power the sample size of an undecided comparison aims at.
POWER = 0.8
#: Queries beyond which a sample size is no advice (issue 56): more than the test sets of most public
#: retrieval benchmarks hold (BEIR's largest usual ones have a few thousand), and far past what a person
#: judges or writes for their own documents.
REALISTIC_QUERIES = 5_000


def cost_key(cost: StrategyCost) -> tuple[float, int, float]:
    """How strategies are ordered from cheapest (:data:`COST_ORDER`)."""
    return cost.encode_seconds_per_1k_tokens, cost.index_bytes, cost.query_latency_ms


def choose_best(scores: Mapping[str, float], costs: Mapping[str, StrategyCost]) -> str:
    """The strategy with the highest score (equal scores: the cheaper one)."""
    if not scores:
        raise UserError("no strategy has a score")
    return min(scores, key=lambda name: (-scores[name], cost_key(costs[name])))


def compare_with_best(
    runs: Mapping[str, RunResults], best: str, margin: float = MARGIN, seed: int = 0
) -> tuple[dict[str, VersusBest], Comparison]:
    """Every other strategy against ``best``: its headline difference with the 95% interval, the
    simultaneous bound, the verdict against ``margin`` and, when undecided, the queries that would
    decide; also the full 95% :class:`~longembed.results.Comparison` (written as comparison.md)."""
    if margin <= 0:
        raise UserError(f"the margin must be positive (points of the score), got {margin}")
    names = list(runs)
    comparison = compare([runs[n] for n in names], baseline=runs[best], labels=names, seed=seed, confidence=CONFIDENCE)
    m = len(comparison.pairs)
    bounds = compare([runs[n] for n in names], baseline=runs[best], labels=names, seed=seed,
                     confidence=simultaneous_confidence(m))
    headlines = [(pair.b, headline(pair), headline(wide)) for pair, wide in zip(comparison.pairs, bounds.pairs, strict=True)]
    adjusted = holm([d.p_value for _, d, _ in headlines])
    versus = {}
    for (name, d, wide), p in zip(headlines, adjusted, strict=True):
        verdict = judge(wide.difference, margin)
        needed = queries_needed(d.difference, d.queries, m, margin) if verdict == UNDECIDED else None
        versus[name] = VersusBest(d.difference, d.level, float(d.p_value), d.p_method, float(p), bool(p < ALPHA),
                                  wide.difference, verdict, d.queries, needed)
    return versus, comparison


def headline(pair: PairComparison) -> Difference:
    """The test that compares the two runs' scores: the average over tasks, else the task over its
    lengths, else the single unit."""
    for level in (AVERAGE, TASK, UNIT):
        found = [d for d in pair.differences if d.level == level]
        if len(found) == 1:
            return found[0]
    raise UserError(f"{pair.b} vs {pair.a}: no single test compares the runs' scores "
                     f"({[(d.task, d.length, d.level) for d in pair.differences]})")


def queries_needed(
    difference: Interval, queries: int, comparisons: int, margin: float, power: float = POWER
) -> int | None:
    """Queries a non-inferiority test (one-sided 0.025 / ``comparisons``, ``power``) would need to show
    a strategy within ``margin``, at its observed difference and standard error (the 95% interval's
    width / 3.92, at ``queries`` queries); None when the observed difference is not inside the margin
    (more queries would show it worse, not within) or shows no spread."""
    gap = margin + difference.estimate
    z95 = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)
    se = (difference.high - difference.low) / (2 * z95)
    if gap <= 0 or se <= 0 or queries < 1:
        return None
    z_bound = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2 / max(comparisons, 1))
    z_power = NormalDist().inv_cdf(power)
    return math.ceil(queries * ((z_bound + z_power) * se / gap) ** 2)


def recommend(strategies: Sequence[StrategyResult], margin: float = MARGIN, more_queries: str = "") -> Recommendation:
    """The best strategy (the one without ``versus_best``), the cheapest one within ``margin`` of it, and
    the headline; ``more_queries``: how this data could grow (said when it cannot decide)."""
    best = [s for s in strategies if s.versus_best is None]
    if len(best) != 1:
        raise UserError(f"exactly one strategy must be the best (no versus_best), got {[s.name for s in best]}")
    top = best[0]
    others = [s for s in strategies if s.versus_best is not None]
    within = [s for s in others if s.versus_best.verdict == WITHIN]  # type: ignore[union-attr]
    choice = min([top, *within], key=lambda s: cost_key(s.cost))
    undecided = sorted((s for s in others if s.versus_best.verdict == UNDECIDED  # type: ignore[union-attr]
                        and cost_key(s.cost) < cost_key(choice.cost)), key=lambda s: cost_key(s.cost))
    text = reason(top, choice, others, undecided, margin, more_queries)
    return Recommendation(top.name, choice.name, margin, [s.name for s in within], [s.name for s in undecided],
                          COST_ORDER, text, more_queries if undecided else "")


def reason(
    best: StrategyResult, choice: StrategyResult, others: Sequence[StrategyResult], undecided: Sequence[StrategyResult],
    margin: float, more_queries: str,
) -> str:
    """The headline: what to use, what it costs in points against the best (with its interval), and
    whether the data could decide."""
    m = len(others)
    best_text = f"{best.name} ({score_text(best)})"
    if choice is not best:
        return (f"{choice.name} is within {margin:g} points of the best, {best_text}: {difference_text(choice)}, and "
                f"its lower bound over all {m} comparisons, {choice.versus_best.bound.low:+.1f}, is above "  # type: ignore[union-attr]
                f"-{margin:g}. It is the cheapest such strategy: {cost_text(choice.cost)}, against "
                f"{cost_text(best.cost)} for {best.name}." + undecided_text(undecided, margin, more_queries))
    if undecided:
        return (f"{best.name} scores best ({score_text(best)}); use it until more queries tell whether a cheaper "
                "strategy is as good." + undecided_text(undecided, margin, more_queries))
    cheaper = sorted((s for s in others if cost_key(s.cost) < cost_key(best.cost)), key=lambda s: cost_key(s.cost))
    if not cheaper:
        return (f"{best.name} scores best ({score_text(best)}) and is also the cheapest strategy measured: "
                f"{cost_text(best.cost)}.")
    nearest = max(cheaper, key=lambda s: s.score)
    return (f"{best.name} scores best ({score_text(best)}), and every cheaper strategy is worse by more than "
            f"{margin:g} points (its simultaneous upper bound below -{margin:g}); the closest cheaper one, {nearest.name}, scores "
            f"{difference_text(nearest)}.")


def undecided_text(undecided: Sequence[StrategyResult], margin: float, more_queries: str) -> str:
    """" The data cannot tell whether cheaper X is within 2 points of the best ...": empty when none is."""
    if not undecided:
        return ""
    promising = [s for s in undecided if s.versus_best is not None and s.versus_best.queries_needed is not None]
    first = (promising or list(undecided))[0]  # the cheapest that more queries could make the choice
    versus = first.versus_best
    assert versus is not None
    text = (f" **The data cannot tell yet** whether cheaper {first.name} is within {margin:g} points of the best "
            f"({difference_text(first)}; lower bound {versus.bound.low:+.1f}).")  # type: ignore[union-attr]
    if versus.queries_needed is not None and versus.queries_needed > REALISTIC_QUERIES:
        text += too_close_text(versus.difference, versus.queries_needed, versus.queries, margin)
    elif versus.queries_needed is not None:
        text += (f" About {versus.queries_needed:,} queries would tell, at the observed spread and difference (you "
                 f"have {versus.queries})")
        text += f": {more_queries}." if more_queries else "."
    else:
        text += " It looks worse than that; more queries would most likely confirm it."
    if len(undecided) > 1:
        text += " Also undecided: " + ", ".join(s.name for s in undecided if s is not first) + "."
    return text


def too_close_text(difference: Interval, needed: int, queries: int, margin: float) -> str:
    """What to say when the queries that would decide are past :data:`REALISTIC_QUERIES`: the difference is
    too close to the margin for any realistic task, and the differences the data allow."""
    return (f" Its difference is too close to the margin (-{margin:g}) for any realistic task to decide: it would "
            f"take about {needed:,} queries (you have {queries}). The data allow a difference anywhere from "
            f"{difference.low:+.1f} to {difference.high:+.1f} points (95%); choose between the two on cost, or on "
            "a score that matters more to you.")


def score_text(s: StrategyResult) -> str:
    return f"{s.score:.1f}" + ("" if s.interval is None else f" [{s.interval.low:.1f}, {s.interval.high:.1f}]")


def difference_text(s: StrategyResult) -> str:
    """"-1.8 points [95%: -6.8, +3.3]": a strategy's difference from the best."""
    assert s.versus_best is not None
    d = s.versus_best.difference
    return f"{d.estimate:+.1f} points [95%: {d.low:+.1f}, {d.high:+.1f}]"


def more_queries_text(task_dirs: bool, synthetic: bool, sampled: bool, queries_per_length: int,
                      judged: bool = False) -> str:
    """How the user gets more queries for this advice's data (``judged``: a task folder was built on the
    judging page, where more questions are judged)."""
    ways = []
    if sampled:
        ways.append("run without --budget-seconds (this advice scored a sample)")
    if judged:
        ways.append("judge more questions on the judging page (`longembed judge`)")
    elif task_dirs or not synthetic:
        ways.append("build a larger task from your own documents and questions with `longembed task-dir`")
    if synthetic:
        ways.append(f"a larger --queries-per-length (now {queries_per_length})")
    return "; or ".join(ways)


def cost_text(cost: StrategyCost) -> str:
    """"0.012 s per 1k tokens to encode, 1 vector per document, a 1.2 MB index"."""
    vectors = "no vectors" if cost.vectors_per_document is None else (
        f"{cost.vectors_per_document:g} vector{'s' if cost.vectors_per_document != 1 else ''} per document")
    return f"{cost.encode_seconds_per_1k_tokens:.3g} s per 1k tokens to encode, {vectors}, a {fmt_bytes(cost.index_bytes)} index"


def fmt_bytes(n: int) -> str:
    """1234567 -> "1.2 MB" (powers of 1000)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
