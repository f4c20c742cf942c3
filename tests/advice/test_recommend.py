"""The recommendation against hand-made per-query results: the best strategy, the cheapest one tied with
it, and a cheaper one that is significantly worse is never chosen.  The p-values are checked against the
sign-flip test and Holm's correction written out for these differences."""

from __future__ import annotations

import pytest

from longembed.advice.recommend import (
    choose_best,
    compare_with_best,
    cost_key,
    fmt_bytes,
    recommend,
)
from longembed.results import Counts, RunConfig, RunResults, StrategyCost, StrategyResult, TaskResult

QUERIES = [f"q{i:02d}" for i in range(20)]


def run(scores: list[float]) -> RunResults:
    """A run of one task whose queries scored ``scores`` (percent)."""
    per_query = dict(zip(QUERIES, scores, strict=True))
    mean = sum(scores) / len(scores)
    task = TaskResult(main_score="ndcg@10", score=mean, metrics={"ndcg@10": mean},
                      counts=Counts(40, 20, 100.0, 200, "tokenizer"), data_sha256="same-data", per_query=per_query)
    return RunResults(config=RunConfig(encoder={}), complete=True, average=mean, average_tasks=["mine"],
                      tasks={"mine": task})


def cost(seconds: float, index_bytes: int = 1000) -> StrategyCost:
    return StrategyCost(seconds, 1.0, 8, index_bytes, 1.0, "float32 vectors")


def advise_on(runs: dict[str, RunResults], costs: dict[str, StrategyCost]):
    """What advise concludes from runs and costs (the same calls as its last step)."""
    best = choose_best({n: r.average for n, r in runs.items()}, costs)
    versus, _ = compare_with_best(runs, best)
    strategies = [StrategyResult(n, n, "dense", f"runs/{n}", r.average, None, costs[n], versus_best=versus.get(n))
                  for n, r in runs.items()]
    return strategies, recommend(strategies)


def test_the_cheapest_tied_strategy_is_chosen_and_a_cheaper_worse_one_is_not() -> None:
    runs = {
        "worse-cheap": run([0.0] * 12 + [100.0] * 8),  # 12 queries lost: significantly worse
        "tied-cheap": run([0.0] + [100.0] * 19),  # one query lost: not significantly worse
        "best": run([100.0] * 20),
        "equal-dear": run([100.0] * 20),  # as good as the best, dearer
    }
    costs = {"worse-cheap": cost(0.001), "tied-cheap": cost(0.01), "best": cost(0.1), "equal-dear": cost(1.0)}
    strategies, recommendation = advise_on(runs, costs)
    by_name = {s.name: s for s in strategies}
    assert recommendation.best == "best"  # a tie in score goes to the cheaper strategy
    assert recommendation.choice == "tied-cheap"
    assert recommendation.tied == ["tied-cheap", "equal-dear"]
    worse = by_name["worse-cheap"].versus_best
    assert worse.significant and worse.difference.estimate == pytest.approx(-60.0)
    # the sign-flip test written out: 12 non-zero differences, all of one sign: 2 of 2^12 patterns as extreme
    assert worse.p_value == pytest.approx(2 / 2**12) and worse.p_method.startswith("exact")
    assert by_name["tied-cheap"].versus_best.p_value == pytest.approx(1.0)  # one difference: both signs as extreme
    assert by_name["equal-dear"].versus_best.p_value == pytest.approx(1.0)  # no difference at all
    # Holm over the three comparisons with the best: the smallest p times 3, the others capped at 1
    assert worse.p_adjusted == pytest.approx(3 * 2 / 2**12)
    assert by_name["tied-cheap"].versus_best.p_adjusted == pytest.approx(1.0)
    assert by_name["best"].versus_best is None
    assert recommendation.reason.startswith("tied-cheap is not significantly worse than the best, best (-5.0 points")
    assert recommendation.caution == ""  # its interval reaches 0


def test_the_best_is_chosen_when_everything_cheaper_is_significantly_worse() -> None:
    runs = {"worse-cheap": run([0.0] * 12 + [100.0] * 8), "best": run([100.0] * 20),
            "dear": run([100.0] * 20)}
    costs = {"worse-cheap": cost(0.001), "best": cost(0.1), "dear": cost(0.5)}
    _, recommendation = advise_on(runs, costs)
    assert (recommendation.best, recommendation.choice, recommendation.tied) == ("best", "best", ["dear"])
    assert "also the cheapest of the strategies not significantly worse" in recommendation.reason
    _, alone = advise_on({"worse-cheap": runs["worse-cheap"], "best": runs["best"], "other": run([0.0] * 20)},
                         {"worse-cheap": cost(0.001), "best": cost(0.1), "other": cost(0.2)})
    assert alone.choice == "best" and alone.tied == []
    assert "every other strategy is significantly worse" in alone.reason


def test_a_choice_tied_only_for_want_of_queries_comes_with_a_caution() -> None:
    runs = {"cheap": run([0.0] * 4 + [100.0] * 16), "best": run([100.0] * 20), "dear": run([50.0] * 20)}
    costs = {"cheap": cost(0.001), "best": cost(0.1), "dear": cost(0.2)}
    strategies, recommendation = advise_on(runs, costs)
    cheap = next(s for s in strategies if s.name == "cheap").versus_best
    assert cheap.p_value == pytest.approx(2 / 2**4) and not cheap.significant  # 0.125, times Holm's factor
    assert cheap.difference.high < 0  # yet every resample of the queries has it worse
    assert recommendation.choice == "cheap"
    assert "entirely below 0" in recommendation.caution and "more" in recommendation.caution


def test_costs_order_encode_time_then_index_then_latency() -> None:
    assert cost_key(cost(0.1, 10)) < cost_key(cost(0.1, 20)) < cost_key(cost(0.2, 1))
    assert [fmt_bytes(n) for n in (512, 1500, 2_500_000, 3 * 10**9)] == ["512 B", "1.5 kB", "2.5 MB", "3.0 GB"]
    with pytest.raises(ValueError, match="exactly one strategy must be the best"):
        recommend([])
