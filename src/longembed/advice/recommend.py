"""From the strategies' runs and costs to the advice: the best strategy, each other one against it, and
the cheapest strategy statistically tied with the best.

The statistics are :func:`longembed.results.compare`'s (paired bootstrap interval of the difference on
the same queries, paired sign-flip p-value), each strategy against the best as baseline.  Of each pair
the headline test is read: the average over tasks, else the task over its lengths, else the one task.
Their p-values are Holm-adjusted together (:func:`longembed.results.paired.holm`): the family is the
question advice answers, "which strategies are worse than the best?", one test per other strategy.
(``comparison/comparison.md`` keeps every per-task and per-length test, Holm-adjusted over all of them.)

Tied: not significantly different from the best after Holm (adjusted p >= alpha).  Cheapest: the
smallest encode seconds per 1k tokens, then index bytes, then query latency (:data:`COST_ORDER`).  A
choice tied only after the correction (its unadjusted interval entirely below 0) comes with a caution.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from longembed.results import Comparison, RunResults, compare
from longembed.results.advice import Recommendation, StrategyCost, StrategyResult, VersusBest
from longembed.results.comparison import AVERAGE, TASK, UNIT, Difference, PairComparison
from longembed.results.paired import ALPHA, holm

COST_ORDER = "encode seconds per 1k tokens, then index bytes, then query latency"


def cost_key(cost: StrategyCost) -> tuple[float, int, float]:
    """How strategies are ordered from cheapest (:data:`COST_ORDER`)."""
    return cost.encode_seconds_per_1k_tokens, cost.index_bytes, cost.query_latency_ms


def choose_best(scores: Mapping[str, float], costs: Mapping[str, StrategyCost]) -> str:
    """The strategy with the highest score (equal scores: the cheaper one)."""
    if not scores:
        raise ValueError("no strategy has a score")
    return min(scores, key=lambda name: (-scores[name], cost_key(costs[name])))


def compare_with_best(
    runs: Mapping[str, RunResults], best: str, alpha: float = ALPHA, seed: int = 0
) -> tuple[dict[str, VersusBest], Comparison]:
    """Every other strategy against ``best`` (the comparison's baseline), its headline test
    Holm-adjusted over the strategies; also the full :class:`~longembed.results.Comparison`."""
    names = list(runs)
    comparison = compare([runs[n] for n in names], baseline=runs[best], labels=names, seed=seed)
    headlines = [(pair.b, headline(pair)) for pair in comparison.pairs]
    adjusted = holm([d.p_value for _, d in headlines])
    versus = {
        name: VersusBest(d.difference, d.level, float(d.p_value), d.p_method, float(p), bool(p < alpha))
        for (name, d), p in zip(headlines, adjusted, strict=True)
    }
    return versus, comparison


def headline(pair: PairComparison) -> Difference:
    """The test that compares the two runs' scores: the average over tasks, else the task over its
    lengths, else the single unit."""
    for level in (AVERAGE, TASK, UNIT):
        found = [d for d in pair.differences if d.level == level]
        if len(found) == 1:
            return found[0]
    raise ValueError(f"{pair.b} vs {pair.a}: no single test compares the runs' scores "
                     f"({[(d.task, d.length, d.level) for d in pair.differences]})")


def recommend(strategies: Sequence[StrategyResult], alpha: float = ALPHA) -> Recommendation:
    """The best strategy (the one without ``versus_best``) and the cheapest one tied with it, with why."""
    best = [s for s in strategies if s.versus_best is None]
    if len(best) != 1:
        raise ValueError(f"exactly one strategy must be the best (no versus_best), got {[s.name for s in best]}")
    top = best[0]
    tied = [s for s in strategies if s.versus_best is not None and not s.versus_best.significant]
    choice = min([top, *tied], key=lambda s: cost_key(s.cost))
    return Recommendation(top.name, choice.name, [s.name for s in tied], COST_ORDER, reason(top, choice, tied, alpha),
                          caution(choice))


def caution(choice: StrategyResult) -> str:
    """A warning when the chosen strategy's difference from the best has an (unadjusted) 95% interval
    entirely below 0: it is tied only because Holm's correction over this many comparisons, with this
    many queries, cannot tell; more queries may well show it worse."""
    versus = choice.versus_best
    if versus is None or versus.difference.high >= 0:
        return ""
    d = versus.difference
    return (f"{choice.name}'s difference from the best, {d.estimate:+.1f} points, has a 95% interval entirely below 0 "
            f"([{d.low:+.1f}, {d.high:+.1f}], not adjusted for the comparisons): it is tied only after Holm's "
            "correction, for want of queries; rerun with more of them (all of a task without --budget-seconds; for "
            "passkey and needle a larger --queries-per-length) "
            "before relying on it.")


def reason(best: StrategyResult, choice: StrategyResult, tied: Sequence[StrategyResult], alpha: float) -> str:
    """The recommendation's reason, in one sentence."""
    score = f"{best.score:.1f}" + ("" if best.interval is None else f" [{best.interval.low:.1f}, {best.interval.high:.1f}]")
    if choice is best and not tied:
        return (f"{best.name} scores best ({score}) and every other strategy is significantly worse "
                f"(Holm-adjusted p < {alpha:g}), so nothing cheaper can take its place.")
    if choice is best:
        return (f"{best.name} scores best ({score}) and is also the cheapest of the strategies not significantly "
                f"worse than it ({', '.join(s.name for s in tied)}).")
    versus = choice.versus_best
    assert versus is not None
    d = versus.difference
    return (f"{choice.name} is not significantly worse than the best, {best.name} ({d.estimate:+.1f} points "
            f"[{d.low:+.1f}, {d.high:+.1f}], Holm-adjusted p = {versus.p_adjusted:.2g}), and it is the cheapest such "
            f"strategy: {cost_text(choice.cost)}, against {cost_text(best.cost)} for {best.name}.")


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


def strategy_results(
    names: Sequence[str], scored: Mapping[str, StrategyResult], versus: Mapping[str, VersusBest]
) -> list[StrategyResult]:
    """The strategies in ``names`` order, each with its comparison against the best filled in."""
    out = []
    for name in names:
        result = scored[name]
        result.versus_best = versus.get(name)
        out.append(result)
    return out
