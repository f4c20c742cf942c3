"""Passage hit@1 against a naive reference on a toy run."""

from __future__ import annotations

import pytest

from longembed.evaluation.passage_hits import passage_hit_interval, passage_hits


def naive_hit_rate(answers, ranking, shown) -> tuple[int, int]:
    hits = counted = 0
    for qid in answers:
        for doc_id in ranking[qid][:10]:
            if doc_id in answers[qid]:
                start, end = shown[(qid, doc_id)]
                counted += 1
                hits += any(max(start, a) < min(end, b) for a, b in answers[qid][doc_id])
                break
    return hits, counted


def test_hit_at_1_matches_a_naive_count() -> None:
    answers = {"q1": {"a": [(10, 20)]}, "q2": {"b": [(0, 5), (50, 60)]}, "q3": {"c": [(0, 5)]},
               "q4": {"a": [(30, 40)], "b": [(0, 3)]}}
    ranking = {"q1": ["x", "a"], "q2": ["b"], "q3": ["x"] * 10 + ["c"], "q4": ["b", "a"]}
    shown = {("q1", "a"): (15, 25), ("q2", "b"): (20, 50), ("q3", "c"): (0, 5), ("q4", "b"): (0, 3),
             ("q4", "a"): (30, 40)}
    hits = passage_hits(answers, ranking, lambda q, d: shown[(q, d)])
    assert hits == {"q1": 100.0, "q2": 0.0, "q4": 100.0}  # q3's answer is ranked 11th: not counted
    expected_hits, counted = naive_hit_rate(answers, ranking, shown)
    interval = passage_hit_interval(hits)
    assert interval.estimate == pytest.approx(100.0 * expected_hits / counted)
    assert interval.low <= interval.estimate <= interval.high
    assert passage_hit_interval({}) is None
