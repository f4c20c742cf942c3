"""``longembed.results.hubs``: the first-ranked summary against a naive count, the hub rule at its
boundaries, and the record's round trip through results.json's codec."""

from __future__ import annotations

import random

import pytest

from longembed.results import HUB_RULE, FirstRanked, first_ranked_summary
from longembed.results.hubs import HUB_FACTOR, HUB_MIN_QUERIES, HUB_MIN_SHARE


def naive_summary(first: dict[str, str], qrels: dict[str, dict[str, int]]) -> tuple:
    """The same numbers by plain loops over the judged queries."""
    judged = [q for q in first if q in qrels]
    tally: dict[str, int] = {}
    for q in judged:
        tally[first[q]] = tally.get(first[q], 0) + 1
    best = sorted(tally.items(), key=lambda item: (-item[1], item[0]))[0]
    asked = set()
    for q in judged:
        asked |= {d for d, rel in qrels[q].items() if rel > 0}
    relevant_for = sum(1 for q in judged if qrels[q].get(best[0], 0) > 0)
    return len(judged), len(tally), len(asked), best[0], best[1], relevant_for


@pytest.mark.parametrize("seed", range(5))
def test_the_summary_equals_a_naive_count(seed: int) -> None:
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(rng.randint(3, 30))]
    qrels = {f"q{j}": {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, rng.randint(1, 3))} for j in range(40)}
    first = {q: rng.choice(docs[:5]) for q in qrels if rng.random() < 0.9}  # some queries ranked nothing
    first["not-judged"] = "d00"  # a ranked query without judgements does not count
    stats = first_ranked_summary(first, qrels)
    got = (stats.queries, stats.distinct, stats.distinct_relevant, stats.top_document, stats.top_count,
           stats.top_relevant_for)
    assert got == naive_summary(first, qrels)
    assert stats.top_share == pytest.approx(stats.top_count / stats.queries)


def test_ties_go_to_the_smallest_document_id() -> None:
    stats = first_ranked_summary({"q1": "b", "q2": "a", "q3": "c", "q4": "b", "q5": "a"},
                                 {f"q{i}": {"a": 1} for i in range(1, 6)})
    assert (stats.top_document, stats.top_count, stats.top_relevant_for) == ("a", 2, 5)


def test_no_judged_query_gives_no_summary() -> None:
    assert first_ranked_summary({"q1": "a"}, {"q2": {"a": 1}}) is None


def stats(queries: int, top_count: int, relevant_for: int) -> FirstRanked:
    return FirstRanked(queries=queries, distinct=queries - top_count + 1, distinct_relevant=queries,
                       top_document="d", top_count=top_count, top_relevant_for=relevant_for)


def test_the_hub_rule_at_its_boundaries() -> None:
    assert (HUB_MIN_QUERIES, HUB_MIN_SHARE, HUB_FACTOR) == (5, 0.10, 3)  # the numbers HUB_RULE states
    assert "5 queries" in HUB_RULE and "10%" in HUB_RULE and "3x" in HUB_RULE
    assert stats(200, 96, 1).is_hub  # the retrofit's 2k passkey document
    assert stats(50, 5, 1).is_hub  # exactly 5 queries, exactly 10%
    assert not stats(50, 4, 1).is_hub  # fewer than 5 queries
    assert not stats(60, 5, 1).is_hub  # 5 queries but under 10%
    assert stats(100, 30, 10).is_hub and not stats(100, 29, 10).is_hub  # 3x the queries that ask for it
    assert not stats(1000, 90, 40).is_hub  # a document many queries rightly ask for (a QMSum meeting)
    assert stats(10, 10, 0).is_hub  # asked for by none: counted as one


def test_the_record_round_trips_and_describes_itself() -> None:
    record = stats(200, 96, 1)
    assert FirstRanked.from_dict(record.to_dict()) == record
    assert record.describe() == ("d is ranked first for 96 of 200 queries (relevant to 1); 105 distinct "
                                 "documents ranked first, 200 asked for")
