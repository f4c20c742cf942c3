"""Query latency is timed after untimed warm-up searches, over the sampled queries, the median reported;
no timing here: a fake clock advances by what each call is declared to cost."""

from __future__ import annotations

import statistics

from longembed.advice import costs
from longembed.advice.costs import WARM_UP_QUERIES, timed_queries
from longembed.advice.spec import LATENCY_QUERIES


def test_warm_up_searches_are_run_first_and_left_out_of_the_timing() -> None:
    calls: list[str] = []

    def search_ms(query: str) -> float:
        calls.append(query)
        return 700.0 if len(calls) <= 3 else 25.0  # the first calls after long documents: slow

    queries = [f"q{i}" for i in range(20)]
    latencies = timed_queries(search_ms, queries)
    assert calls[:WARM_UP_QUERIES] == queries[:WARM_UP_QUERIES] and calls[WARM_UP_QUERIES:] == queries
    assert len(latencies) == 20 and statistics.median(latencies) == 25.0
    # without the warm-up, five timed queries reported the slow calls' 700 ms
    assert statistics.median([700.0, 700.0, 700.0, 25.0, 25.0]) == 700.0
    assert timed_queries(search_ms, []) == []
    assert timed_queries(lambda q: 1.0, ["only"]) == [1.0]


def test_the_default_times_twenty_queries() -> None:
    assert LATENCY_QUERIES == 20 and WARM_UP_QUERIES == 3 and costs.TOP_K == 10


def test_encode_time_is_the_median_of_repeated_runs(monkeypatch) -> None:
    """One slow encode (a first call, a busy moment) moved advise's encode column 3x between identical runs;
    the meter reports the median of ENCODE_RUNS encodes."""
    clock = iter([0.0, 3.0, 3.0, 4.0, 4.0, 5.1])  # runs of 3.0 s (the slow one), 1.0 s and 1.1 s
    monkeypatch.setattr(costs.time, "perf_counter", lambda: next(clock))
    calls: list[int] = []
    assert costs.ENCODE_RUNS == 3
    seconds = costs.median_seconds(lambda: calls.append(1), costs.ENCODE_RUNS)
    assert len(calls) == 3 and abs(seconds - 1.1) < 1e-9
