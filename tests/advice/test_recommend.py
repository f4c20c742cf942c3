"""The recommendation rule on constructed per-query scores: non-inferiority within a margin, by a lower
bound simultaneous over the strategies (Bonferroni), not "not significantly worse".

Four cases (issue 41): a clear winner; a cheap strategy truly equivalent to the best (recommended); a
cheap strategy worse but not significantly so after Holm (the old rule recommended it: BM25 8th of 9,
-9.6 [-16.2, -3.9]; now it must not be); data too small to decide (the headline says so and gives the
queries that would).  The bounds are checked against a naive bootstrap and the normal approximation
written out here, and the sample size against the textbook non-inferiority formula."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from longembed.advice.markdown import verdict_text
from longembed.advice.recommend import (
    REALISTIC_QUERIES,
    UNDECIDED,
    WITHIN,
    WORSE,
    choose_best,
    compare_with_best,
    cost_key,
    fmt_bytes,
    more_queries_text,
    queries_needed,
    recommend,
    simultaneous_confidence,
)
from longembed.results import (
    Counts,
    Interval,
    RunConfig,
    RunResults,
    StrategyCost,
    StrategyResult,
    TaskResult,
)


def run(scores: list[float] | np.ndarray) -> RunResults:
    """A run of one task whose queries scored ``scores`` (percent)."""
    scores = [float(s) for s in scores]
    per_query = {f"q{i:04d}": s for i, s in enumerate(scores)}
    mean = sum(scores) / len(scores)
    task = TaskResult(main_score="ndcg@10", score=mean, metrics={"ndcg@10": mean},
                      counts=Counts(40, len(scores), 100.0, 200, "tokenizer"), data_sha256="same-data",
                      per_query=per_query)
    return RunResults(config=RunConfig(encoder={}), complete=True, average=mean, average_tasks=["mine"],
                      tasks={"mine": task})


def cost(seconds: float, index_bytes: int = 1000) -> StrategyCost:
    return StrategyCost(seconds, 1.0, 8, index_bytes, 1.0, "float32 vectors")


def advise_on(runs: dict[str, RunResults], costs: dict[str, StrategyCost], margin: float = 2.0, more: str = ""):
    """What advise concludes from runs and costs (the same calls as its last step)."""
    best = choose_best({n: r.average for n, r in runs.items()}, costs)
    versus, _ = compare_with_best(runs, best, margin)
    strategies = [StrategyResult(n, n, "dense", f"runs/{n}", r.average, None, costs[n], versus_best=versus.get(n))
                  for n, r in runs.items()]
    return {s.name: s for s in strategies}, recommend(strategies, margin, more)


def old_rule_choice(strategies: dict[str, StrategyResult]) -> str:
    """The rule issue 41 replaced: the cheapest strategy not significantly worse after Holm."""
    tied = [s for s in strategies.values() if s.versus_best is None or not s.versus_best.significant]
    return min(tied, key=lambda s: cost_key(s.cost)).name


def noisy(base: np.ndarray, shift: float, spread: float, seed: int) -> np.ndarray:
    """``base`` moved by ``shift`` points on average with per-query noise of SD ``spread``, kept in [0, 100]."""
    rng = np.random.default_rng(seed)
    return base + shift + rng.normal(0.0, spread, size=len(base))


def test_a_clear_winner_is_recommended_and_the_closest_cheaper_strategy_is_named() -> None:
    base = np.random.default_rng(0).uniform(60, 100, size=60)
    runs = {"cheap": run(noisy(base, -30, 10, 1)), "middle": run(noisy(base, -15, 10, 2)), "best": run(base)}
    costs = {"cheap": cost(0.001), "middle": cost(0.01), "best": cost(0.1)}
    strategies, r = advise_on(runs, costs)
    assert (r.best, r.choice, r.within, r.undecided) == ("best", "best", [], [])
    assert strategies["cheap"].versus_best.verdict == WORSE and strategies["middle"].versus_best.verdict == WORSE
    assert "every cheaper strategy is worse by more than 2 points" in r.reason
    d = strategies["middle"].versus_best.difference
    assert d.estimate == pytest.approx(-15, abs=2)
    assert f"the closest cheaper one, middle, scores {d.estimate:+.1f} points [95%: {d.low:+.1f}, {d.high:+.1f}]" in r.reason


def test_a_truly_equivalent_cheap_strategy_is_recommended_with_its_cost_in_points() -> None:
    base = np.random.default_rng(0).uniform(0, 100, size=400)
    runs = {"cheap": run(noisy(base, -0.2, 3, 1)), "best": run(base), "worse": run(noisy(base, -20, 10, 2))}
    costs = {"cheap": cost(0.001), "best": cost(0.1), "worse": cost(0.01)}
    strategies, r = advise_on(runs, costs)
    cheap = strategies["cheap"].versus_best
    assert cheap.verdict == WITHIN and cheap.bound.low >= -2.0
    assert (r.best, r.choice, r.within, r.undecided) == ("best", "cheap", ["cheap"], [])
    d = cheap.difference
    assert r.reason.startswith("cheap is within 2 points of the best, best (")
    assert f"{d.estimate:+.1f} points [95%: {d.low:+.1f}, {d.high:+.1f}]" in r.reason  # its cost in points
    assert f"lower bound over all 2 comparisons, {cheap.bound.low:+.1f}" in r.reason
    assert "against 0.1 s per 1k tokens to encode" in r.reason  # and in what it saves
    # a tighter margin than the data can show: the same strategy is no longer within it
    _, tight = advise_on(runs, costs, margin=0.1)
    assert tight.choice == "best"


def bm25_case() -> tuple[dict[str, RunResults], dict[str, StrategyCost]]:
    """The issue's failure, rebuilt: 40 queries, nine strategies; the cheapest (bm25) 9.6 points below the
    best with its 95% interval wholly below 0, yet not significantly worse after Holm over eight."""
    rng = np.random.default_rng(3)
    best = rng.uniform(60, 100, size=40)
    lost = rng.normal(0.0, 1.0, size=40)  # about even on most questions...
    lost[:6] = [-40, -30, -25, -30, -20, -25]  # ...and a few BM25 misses badly
    runs = {"bm25": run(best + lost)}
    costs = {"bm25": cost(0.0001)}
    for i in range(7):
        pattern = np.random.default_rng(10 + i).permutation([10.0, -10.0] * 20)  # no mean: each exactly its shift
        runs[f"s{i}"] = run(best - 0.5 - 0.3 * i + pattern)
        costs[f"s{i}"] = cost(0.01 * (i + 1))
    runs["best"], costs["best"] = run(best), cost(1.0)
    return runs, costs


def test_a_cheap_strategy_worse_but_not_significantly_so_is_not_recommended() -> None:
    runs, costs = bm25_case()
    strategies, r = advise_on(runs, costs)
    bm25 = strategies["bm25"].versus_best
    assert bm25.difference.estimate < -4 and bm25.difference.high < 0  # worse on every resample of the queries
    assert not bm25.significant  # ...yet not significant after Holm over eight comparisons
    assert old_rule_choice(strategies) == "bm25"  # what the old rule recommended
    assert bm25.verdict != WITHIN and r.choice != "bm25" and "bm25" not in r.within
    assert r.best == "best" and r.choice == "best"
    # the headline names the cheapest strategy more queries could make the choice (s0), not bm25
    assert "whether cheaper s0 is within 2 points" in r.reason and "bm25" in r.reason.split("Also undecided:")[1]


def test_too_few_queries_to_decide_says_so_and_gives_the_queries_needed() -> None:
    base = np.random.default_rng(0).uniform(20, 80, size=12)
    spread = np.asarray([15.0, -15.0] * 6)  # no mean: the cheap strategy is 1 point below the best on average
    runs = {"cheap": run(base - 1 + spread), "best": run(base), "dear": run(base - 3 + spread[::-1])}
    costs = {"cheap": cost(0.001), "best": cost(0.1), "dear": cost(0.5)}
    strategies, r = advise_on(runs, costs, more="build a larger task with `longembed task-dir`")
    cheap = strategies["cheap"].versus_best
    assert cheap.verdict == UNDECIDED and old_rule_choice(strategies) == "cheap"  # the old rule took it
    assert r.choice == "best" and r.undecided == ["cheap"]
    assert "**The data cannot tell yet** whether cheaper cheap is within 2 points" in r.reason
    assert f"About {cheap.queries_needed:,} queries would tell" in r.reason and "you have 12" in r.reason
    assert "`longembed task-dir`" in r.reason and r.more_queries
    # the sample size, written out: n = n0 ((z_{1-0.025/m} + z_0.8) se / (margin + d))^2, se = width / 3.92
    d = cheap.difference
    se = (d.high - d.low) / (2 * NormalDist().inv_cdf(0.975))
    z = NormalDist().inv_cdf(1 - 0.025 / 2) + NormalDist().inv_cdf(0.8)
    assert cheap.queries_needed == math.ceil(12 * (z * se / (2.0 + d.estimate)) ** 2) > 12


def test_a_difference_too_close_to_the_margin_is_said_plainly_with_the_range_the_data_allow() -> None:
    # 40 queries, the cheap strategy 1.9 points below the best with a wide spread: at 0.1 point inside the
    # margin, the sample size formula asks for tens of thousands of queries; say that no task will decide.
    base = np.random.default_rng(1).uniform(20, 80, size=40)
    spread = np.asarray([12.0, -12.0] * 20)
    runs = {"cheap": run(base - 1.9 + spread), "best": run(base)}
    strategies, r = advise_on(runs, {"cheap": cost(0.001), "best": cost(0.1)})
    cheap = strategies["cheap"].versus_best
    assert cheap.verdict == UNDECIDED and cheap.queries_needed > REALISTIC_QUERIES
    d = cheap.difference
    assert "too close to the margin (-2) for any realistic task to decide" in r.reason
    assert f"about {cheap.queries_needed:,} queries (you have 40)" in r.reason
    assert f"from {d.low:+.1f} to {d.high:+.1f} points (95%)" in r.reason
    assert "queries would tell" not in r.reason
    assert verdict_text(strategies["cheap"], 2.0) == "can't tell (too close to the margin)"


@pytest.mark.parametrize("m", [1, 3, 8])
def test_the_simultaneous_bound_matches_a_naive_bootstrap_and_the_normal_approximation(m: int) -> None:
    rng = np.random.default_rng(m)
    best = rng.uniform(0, 100, size=200)
    runs = {"best": run(best)}
    for i in range(m):
        runs[f"s{i}"] = run(best + rng.normal(-4.0, 12, size=200))
    strategies, r = advise_on(runs, {n: cost(1.0 if n == "best" else 0.1) for n in runs})
    assert r.best == "best"
    for i in range(m):
        versus = strategies[f"s{i}"].versus_best
        differences = np.asarray(list(runs[f"s{i}"].tasks["mine"].per_query.values())) - best
        tail = 0.025 / m  # one-sided, Bonferroni over the m comparisons
        assert versus.bound.confidence == pytest.approx(simultaneous_confidence(m)) == pytest.approx(1 - 2 * tail)
        draws = np.random.default_rng(99).integers(0, 200, size=(20_000, 200))
        naive = np.percentile(differences[draws].mean(axis=1), 100 * tail)
        normal = differences.mean() - NormalDist().inv_cdf(1 - tail) * differences.std(ddof=1) / math.sqrt(200)
        se = differences.std(ddof=1) / math.sqrt(200)
        assert versus.bound.low == pytest.approx(naive, abs=0.15 * se)
        assert versus.bound.low == pytest.approx(normal, abs=0.25 * se)
        assert versus.bound.low <= versus.difference.low  # never looser than the single 95% interval
        if m == 1:
            assert versus.bound.low == pytest.approx(versus.difference.low)  # one comparison: the 95% lower end


def test_queries_needed_is_none_when_more_queries_would_only_show_it_worse() -> None:
    assert queries_needed(Interval(-3.0, -6.0, 0.0), 40, 8, 2.0) is None  # observed outside the margin
    assert queries_needed(Interval(0.0, 0.0, 0.0), 40, 8, 2.0) is None  # no spread
    # a true tie at 1 point of se on 40 queries, 8 comparisons: ((2.73 + 0.84) * 1 / 2)^2 * 40 = 128 queries
    z = NormalDist().inv_cdf(1 - 0.025 / 8) + NormalDist().inv_cdf(0.8)
    width = 2 * NormalDist().inv_cdf(0.975)
    assert queries_needed(Interval(0.0, -width / 2, width / 2), 40, 8, 2.0) == math.ceil(40 * (z / 2) ** 2)


def test_costs_order_encode_time_then_index_then_latency() -> None:
    assert cost_key(cost(0.1, 10)) < cost_key(cost(0.1, 20)) < cost_key(cost(0.2, 1))
    assert [fmt_bytes(n) for n in (512, 1500, 2_500_000, 3 * 10**9)] == ["512 B", "1.5 kB", "2.5 MB", "3.0 GB"]
    with pytest.raises(ValueError, match="exactly one strategy must be the best"):
        recommend([])
    with pytest.raises(ValueError, match="margin must be positive"):
        compare_with_best({"a": run([1.0, 2.0]), "b": run([1.0, 2.0])}, "a", margin=0)


def test_the_best_being_the_cheapest_is_said_with_its_costs() -> None:
    base = np.random.default_rng(0).uniform(60, 100, size=30)
    runs = {"best": run(base), "dear": run(noisy(base, -10, 5, 1))}
    _, r = advise_on(runs, {"best": cost(0.001), "dear": cost(0.5)})
    assert r.choice == r.best == "best"
    assert "is also the cheapest strategy measured: 0.001 s per 1k tokens to encode" in r.reason


def test_more_queries_for_a_judged_task_are_judged_on_the_page_not_written_with_task_dir() -> None:
    judged = more_queries_text(task_dirs=True, synthetic=False, sampled=False, queries_per_length=50, judged=True)
    assert judged == "judge more questions on the judging page (`longembed judge`)"
    written = more_queries_text(task_dirs=True, synthetic=False, sampled=False, queries_per_length=50)
    assert "longembed task-dir" in written and "judge" not in written
