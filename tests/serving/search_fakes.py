"""A small in-memory index with the API of ``longembed.search`` (SEARCH_CONTRACT.md), for the server's tests.

It ranks by word overlap (a stand-in "dense" system: the share of the query's words in a chunk, a
document's score its best chunk's) and by word counts (a stand-in "bm25"), fused by RRF (k = 60), and
answers in the contract's JSON shape.  The server must pass its answer through untouched; the real
index (``longembed.search``) is tested against ``longembed search --json`` in test_search_route.py.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longembed.retrieval.strategy import Strategy

CHUNK_CHARS = 200
CONTEXT_CHARS = 300
RRF_K = 60


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@dataclass
class FakeSearchResponse:
    query: str
    k: int
    index: dict[str, Any]
    results: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "k": self.k, "index": self.index, "results": self.results}


@dataclass
class FakeSearchIndex:
    """``documents``: id -> text (the id is also the source path).  ``gate``: when set, each search
    waits for it (to hold searches in flight); ``calls`` records each search's arguments.  With an
    ``encoder`` (any value: the index embeds its queries), each search asks ``embed_queries`` for its
    query's vector and records it in ``vectors`` (its ranking stays the word overlap)."""

    documents: dict[str, str]
    model: str = "all-MiniLM-L6-v2"
    method: str = "pi"
    max_length: int = 1024
    gate: threading.Event | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=lambda: {"query": "", "document": ""})
    encoder: Any = None
    embed_queries: Callable[[list[str]], np.ndarray] | None = None
    vectors: list[np.ndarray] = field(default_factory=list)

    @property
    def strategy(self) -> Strategy:
        """The strategy :meth:`facts` names: late chunks of the default 256 tokens fused with BM25."""
        return Strategy(self.model, self.method, self.max_length, granularity="chunks", late=True, fuse="bm25")

    def document_file(self, doc_id: str) -> None:
        """No document of this index has a file on disk."""
        return None

    def facts(self) -> dict[str, Any]:
        chunks = sum(len(self._chunks(text)) for text in self.documents.values())
        return {"documents": len(self.documents), "chunks": chunks, "model": self.model, "method": self.method,
                "max_length": self.max_length, "strategy": "late-chunks+bm25", "systems": ["dense", "bm25"],
                "fusion": {"method": "rrf", "k": RRF_K}, "built_at": "2026-11-27T04:10:00Z",
                "longembed_version": "0.1.0"}

    def search(self, query: str, k: int = 10, ids: list[str] | None = None,
               path_prefix: str | None = None, passages: str = "query") -> FakeSearchResponse:
        self.calls.append({"query": query, "k": k, "ids": ids, "path_prefix": path_prefix, "passages": passages})
        if self.encoder is not None:
            assert self.embed_queries is not None
            self.vectors.append(self.embed_queries([query]))
        if self.gate is not None:
            self.gate.wait(30)
        terms = set(_words(query))
        kept = {d: t for d, t in self.documents.items()
                if (ids is None or d in ids) and (path_prefix is None or d.startswith(path_prefix))}
        dense = {d: max((self._overlap(terms, text[a:b]), a, b) for a, b in self._chunks(text)) for d, text in kept.items()}
        bm25 = {d: float(sum(_words(text).count(t) for t in terms)) for d, text in kept.items()}
        dense_rank = self._ranks({d: s[0] for d, s in dense.items()})
        bm25_rank = self._ranks({d: s for d, s in bm25.items() if s > 0})
        fused = {d: 1 / (RRF_K + dense_rank[d]) + (1 / (RRF_K + bm25_rank[d]) if d in bm25_rank else 0.0) for d in kept}
        order = sorted(fused, key=lambda d: (-fused[d], d))[:k]
        results = [self._result(rank, d, fused[d], dense[d], dense_rank, bm25, bm25_rank)
                   for rank, d in enumerate(order, 1)]
        return FakeSearchResponse(query, k, self.facts(), results)

    def _result(self, rank, doc_id, score, best, dense_rank, bm25, bm25_rank) -> dict[str, Any]:
        text, (similarity, start, end) = self.documents[doc_id], best
        passage = {"text": text[start:end], "start": start, "end": end,
                   "before": text[max(0, start - CONTEXT_CHARS):start], "after": text[end:end + CONTEXT_CHARS]}
        systems = {"dense": {"rank": dense_rank[doc_id], "score": similarity},
                   "bm25": {"rank": bm25_rank.get(doc_id), "score": bm25[doc_id] if doc_id in bm25_rank else None}}
        return {"rank": rank, "id": doc_id, "score": score, "source": doc_id, "passage": passage, "systems": systems}

    @staticmethod
    def _chunks(text: str) -> list[tuple[int, int]]:
        return [(a, min(a + CHUNK_CHARS, len(text))) for a in range(0, max(len(text), 1), CHUNK_CHARS)]

    @staticmethod
    def _overlap(terms: set[str], text: str) -> float:
        return len(terms & set(_words(text))) / max(len(terms), 1)

    @staticmethod
    def _ranks(scores: dict[str, float]) -> dict[str, int]:
        return {d: i for i, d in enumerate(sorted(scores, key=lambda d: (-scores[d], d)), 1)}
