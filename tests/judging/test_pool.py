"""Pooling (longembed.judging.pool): the union of every strategy's top k, one result per document, in a
seeded order that tells no strategy, and a page payload with no strategy, rank or score in it."""

from __future__ import annotations

import json
import random

import pytest

from longembed.judging.pool import merge_rankings, pool_question


def ranked(doc_ids: list[str], tag: str) -> list[dict]:
    """A strategy's results as ``search --json`` gives them, each passage naming the strategy (a leak the
    pool must not pass on unless that passage is the one shown)."""
    return [{"rank": i, "id": d, "score": 1.0 / i, "source": f"/docs/{d}",
             "systems": {tag: {"rank": i, "score": 1.0 / i}},
             "passage": {"text": f"{d} as ranked {i}", "before": "", "after": "", "location": None, "page": None}}
            for i, d in enumerate(doc_ids, 1)]


RANKINGS = {"STRATEGY_ALPHA": ranked(["a", "b", "c", "d"], "STRATEGY_ALPHA"),
            "STRATEGY_BETA": ranked(["c", "e", "a", "f"], "STRATEGY_BETA")}


def test_the_pool_is_the_union_of_the_top_k_one_result_per_document():
    pooled = merge_rankings(RANKINGS, "q")
    assert sorted(r.doc_id for r in pooled) == ["a", "b", "c", "d", "e", "f"]
    by_doc = {r.doc_id: r for r in pooled}
    assert by_doc["c"].ranks == {"STRATEGY_ALPHA": 3, "STRATEGY_BETA": 1}
    assert by_doc["c"].passage["text"] == "c as ranked 1"  # the passage of its best rank
    assert by_doc["a"].passage["text"] == "a as ranked 1"  # a tie of ranks: the first strategy's


def test_pool_question_keeps_each_strategy_s_top_k_only():
    searchers = {name: (lambda q, k, results=results: results) for name, results in RANKINGS.items()}
    pooled = pool_question("q", searchers, depth=2)
    assert sorted(r.doc_id for r in pooled) == ["a", "b", "c", "e"]
    with pytest.raises(ValueError):
        pool_question("q", searchers, depth=0)


def test_the_order_is_seeded_by_seed_and_question_not_by_the_strategies_order():
    many = {"x": ranked([f"d{i:02d}" for i in range(20)], "x"), "y": ranked([f"d{i:02d}" for i in range(10, 30)], "y")}
    first = [r.doc_id for r in merge_rankings(many, "who?", seed=7)]
    again = [r.doc_id for r in merge_rankings(dict(reversed(list(many.items()))), "who?", seed=7)]
    assert first == again
    assert sorted(first) == [f"d{i:02d}" for i in range(30)]
    assert first != sorted(first)  # shuffled (a sorted outcome has probability 1/30!)
    assert [r.doc_id for r in merge_rankings(many, "who?", seed=8)] != first
    assert [r.doc_id for r in merge_rankings(many, "what?", seed=7)] != first
    expected = sorted(first)
    random.Random("7\nwho?").shuffle(expected)  # the documented rule, computed independently
    assert first == expected


def test_the_page_payload_names_no_strategy_rank_or_score():
    payload = json.dumps([r.to_page() for r in merge_rankings(RANKINGS, "q")])
    assert "STRATEGY_ALPHA" not in payload and "STRATEGY_BETA" not in payload
    for result in json.loads(payload):
        assert set(result) == {"doc_id", "source", "passage"}
        assert set(result["passage"]) == {"text", "before", "after", "location", "page"}
