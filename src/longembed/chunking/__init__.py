"""Chunks of long texts: boundaries (``spans``), token states with offsets and windows (``tokens``),
and late chunking's pooling (``late``).  ``LongContextEncoder.encode_chunks`` puts them together."""

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use: parsing a chunking rule (``spans``) needs no torch
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

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
