"""Chunks of long texts: boundaries (``spans``), token states with offsets and windows (``tokens``),
and late chunking's pooling (``late``).  ``LongContextEncoder.encode_chunks`` puts them together."""

from longembed.chunking.late import chunk_token_indices, late_chunk_vectors
from longembed.chunking.spans import (
    Chunking,
    SentenceChunking,
    TokenChunking,
    check_spans,
    parse_chunking,
    sentence_chunk_spans,
    sentence_spans,
    token_chunk_spans,
)
from longembed.chunking.tokens import TokenEmbeddings, Window, plan_windows

__all__ = [
    "Chunking",
    "SentenceChunking",
    "TokenChunking",
    "TokenEmbeddings",
    "Window",
    "check_spans",
    "chunk_token_indices",
    "late_chunk_vectors",
    "parse_chunking",
    "plan_windows",
    "sentence_chunk_spans",
    "sentence_spans",
    "token_chunk_spans",
]
