"""What ``GET /search/index`` tells the search page: the index's facts plus how it makes its vectors
(one per document, or chunks of N tokens, their overlap, late or naive), so the page's panel describes
the index's real strategy instead of only the encoder's window.
"""

from __future__ import annotations

from typing import Any

from longembed.chunking.spans import TokenChunking, parse_chunking
from longembed.retrieval.strategy import Strategy


def vector_facts(strategy: Strategy) -> dict[str, Any] | None:
    """How ``strategy`` embeds a document, as JSON: ``{"granularity": "document"}``, or for chunks
    ``{"granularity": "chunks", "unit": "tokens"|"sentences", "size": N, "overlap": M, "late": bool}``;
    None for BM25 alone (no vectors)."""
    if strategy.lexical_only:
        return None
    if not strategy.chunked:
        return {"granularity": "document"}
    rule = parse_chunking(strategy.chunking)
    if isinstance(rule, TokenChunking):
        return {"granularity": "chunks", "unit": "tokens", "size": rule.size, "overlap": rule.overlap,
                "late": strategy.late}
    return {"granularity": "chunks", "unit": "sentences", "size": rule.n, "overlap": 0, "late": strategy.late}


def served_facts(index: Any) -> dict[str, Any]:
    """``index.facts()`` with ``vectors`` (:func:`vector_facts` of ``index.strategy``) added."""
    return {**index.facts(), "vectors": vector_facts(index.strategy)}
