"""``GET /search/index``'s ``vectors``: how an index makes its vectors, for the search page's panel."""

from __future__ import annotations

from search_fakes import FakeSearchIndex
from search_support import DOCUMENTS

from longembed.retrieval.strategy import Strategy
from longembed.serving.index_facts import served_facts, vector_facts

MODEL = "all-MiniLM-L6-v2"


def test_each_granularity_is_described_as_built() -> None:
    assert vector_facts(Strategy("bm25")) is None
    assert vector_facts(Strategy(MODEL, "truncate")) == {"granularity": "document"}
    naive = Strategy(MODEL, granularity="chunks", chunking="tokens:256", late=False)
    assert vector_facts(naive) == {"granularity": "chunks", "unit": "tokens", "size": 256, "overlap": 0, "late": False}
    overlap = Strategy(MODEL, granularity="chunks", chunking="tokens:128:16", late=False, fuse="bm25")
    assert vector_facts(overlap) == {"granularity": "chunks", "unit": "tokens", "size": 128, "overlap": 16,
                                     "late": False}
    late = Strategy(MODEL, "pi", 4096, granularity="chunks", chunking="sentences:3", late=True)
    assert vector_facts(late) == {"granularity": "chunks", "unit": "sentences", "size": 3, "overlap": 0, "late": True}


def test_the_served_facts_are_the_index_facts_plus_its_vectors() -> None:
    """(The route itself, on a real index: test_search_route.py's test_search_route_equals_the_search_command.)"""
    index = FakeSearchIndex(DOCUMENTS)
    assert served_facts(index) == {**index.facts(), "vectors": {"granularity": "chunks", "unit": "tokens",
                                                                "size": 256, "overlap": 0, "late": True}}
