"""``longembed.results.hubness``: the first-ranked summary against a naive count, the hub rule at its
boundaries, and the record's round trip through results.json's codec."""

from __future__ import annotations

import random

import pytest
from scipy import stats as scipy_stats

from longembed.results import HUB_RULE, FirstRanked, first_ranked_summary
from longembed.results.hubness import HUB_FACTOR, HUB_MIN_QUERIES, HUB_MIN_SHARE, skewness


def naive_summary(first: dict[str, str], qrels: dict[str, dict[str, int]],
                  twins: dict[str, set[str]] | None = None) -> tuple:
    """The same numbers by plain loops over the judged queries, twins named by their smallest id."""
    judged = [q for q in first if q in qrels]
    name = {d: min(twins[d]) if twins else d for d in first.values()}
    tally: dict[str, int] = {}
    for q in judged:
        tally[name[first[q]]] = tally.get(name[first[q]], 0) + 1
    best = sorted(tally.items(), key=lambda item: (-item[1], item[0]))[0]
    members = next(twins[d] for d in first.values() if name[d] == best[0]) if twins else {best[0]}
    asked = set()
    for q in judged:
        asked |= {d for d, rel in qrels[q].items() if rel > 0}
    relevant_for = sum(1 for q in judged if any(qrels[q].get(m, 0) > 0 for m in members))
    return len(judged), len(tally), len(asked), best[0], best[1], relevant_for, len(members) - 1 if twins else None


def summary_tuple(stats: FirstRanked) -> tuple:
    return (stats.queries, stats.distinct, stats.distinct_relevant, stats.top_document, stats.top_count,
            stats.top_relevant_for, stats.top_twins)


def random_case(seed: int) -> tuple[dict[str, str], dict[str, dict[str, int]], list[str]]:
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(rng.randint(3, 30))]
    qrels = {f"q{j}": {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, rng.randint(1, 3))} for j in range(40)}
    first = {q: rng.choice(docs[:8]) for q in qrels if rng.random() < 0.9}  # some queries ranked nothing
    first["not-judged"] = docs[0]  # a ranked query without judgements does not count
    return first, qrels, docs


@pytest.mark.parametrize("seed", range(5))
def test_the_summary_equals_a_naive_count(seed: int) -> None:
    first, qrels, _ = random_case(seed)
    stats = first_ranked_summary(first, qrels)
    assert summary_tuple(stats) == naive_summary(first, qrels)
    assert stats.top_share == pytest.approx(stats.top_count / stats.queries)


@pytest.mark.parametrize("seed", range(5))
def test_twins_count_as_one_document(seed: int) -> None:
    first, qrels, docs = random_case(seed)
    rng = random.Random(100 + seed)
    blocks = [set(docs[i:i + 3]) for i in range(0, len(docs), 3)]  # consecutive ids share a vector
    twins = {d: next(b for b in blocks if d in b) for d in docs}
    rng.shuffle(docs)
    stats = first_ranked_summary(first, qrels, twins)
    assert summary_tuple(stats) == naive_summary(first, qrels, twins)
    alone = first_ranked_summary(first, qrels, {d: {d} for d in docs})
    assert summary_tuple(alone)[:6] == summary_tuple(first_ranked_summary(first, qrels))[:6] and alone.top_twins == 0


@pytest.mark.parametrize("seed", range(5))
def test_n1_skewness_equals_scipy_over_every_document(seed: int) -> None:
    """N1 (queries ranking a document first) over all documents, zeros included, twins as one vector;
    and the same of the queries asking for each: scipy.stats.skew (biased) on counts made by hand."""
    first, qrels, docs = random_case(seed)
    judged = [q for q in first if q in qrels]
    alone = first_ranked_summary(first, qrels, documents=docs)
    n1 = [sum(first[q] == d for q in judged) for d in docs]
    asked = [sum(qrels[q].get(d, 0) > 0 for q in judged) for d in docs]
    assert alone.skewness == pytest.approx(scipy_stats.skew(n1), abs=1e-3)
    assert alone.asked_skewness == pytest.approx(scipy_stats.skew(asked), abs=1e-3)
    pairs = {d: {docs[i - i % 2], docs[min(i - i % 2 + 1, len(docs) - 1)]} for i, d in enumerate(docs)}
    merged = first_ranked_summary(first, qrels, pairs)
    vectors = sorted({min(g) for g in pairs.values()})
    n1_pairs = [sum(first[q] in pairs[v] for q in judged) for v in vectors]
    asked_pairs = [sum(any(qrels[q].get(d, 0) > 0 for d in pairs[v]) for q in judged) for v in vectors]
    assert merged.skewness == pytest.approx(scipy_stats.skew(n1_pairs), abs=1e-3)
    assert merged.asked_skewness == pytest.approx(scipy_stats.skew(asked_pairs), abs=1e-3)
    assert first_ranked_summary(first, qrels).skewness is None  # documents unknown: not computed


def test_skewness_of_perfect_retrieval_is_the_asked_one_and_a_hub_is_far_above() -> None:
    docs = [f"d{i:03d}" for i in range(400)]
    qrels = {f"q{j}": {docs[2 * j]: 1} for j in range(200)}  # passkey's shape: 2 documents per query
    perfect = first_ranked_summary({q: next(iter(r)) for q, r in qrels.items()}, qrels, documents=docs)
    assert perfect.skewness == perfect.asked_skewness == 0.0
    hubbed = first_ranked_summary({q: docs[1] if j < 96 else next(iter(qrels[q]))
                                   for j, q in enumerate(qrels)}, qrels, documents=docs)
    assert hubbed.skewness > 15 and hubbed.is_hub
    expected = scipy_stats.skew([96] + [1] * 104 + [0] * 295)  # d001 96 times, 104 asked documents once
    assert hubbed.describe().endswith(f"N1 skewness {expected:.1f} (perfect retrieval: 0.0)")
    assert skewness([3, 3, 3]) == 0.0 and skewness([0, 0, 1]) == pytest.approx(scipy_stats.skew([0, 0, 1]))


def test_a_hub_spread_over_twins_is_found() -> None:
    """Ten identical documents each ranked first a few times: no one of them is a hub, their vector is."""
    first = {f"q{i}": f"d{i % 10}" for i in range(40)}
    qrels = {f"q{i}": {f"x{i}": 1} for i in range(40)}
    assert not first_ranked_summary(first, qrels).is_hub  # 4 queries each
    stats = first_ranked_summary(first, qrels, {f"d{i}": {f"d{j}" for j in range(10)} for i in range(10)})
    assert (stats.top_document, stats.top_count, stats.top_twins, stats.distinct) == ("d0", 40, 9, 1)
    assert stats.is_hub and "or one of its 9 twins" in stats.describe()


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
