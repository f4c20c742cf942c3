"""Chunk boundaries as character spans: by tokens, by sentences, or given by the user.

A chunking is written as a short string or given as spans:

* ``"tokens:256"``: consecutive chunks of 256 tokens of the text (tokenized alone: no prompt, no
  special tokens); ``"tokens:256:32"``: the same with 32 tokens of overlap between neighbours.
* ``"sentences:4"``: four consecutive sentences per chunk (:func:`sentence_spans`).
* a list with one list of ``(start, end)`` character spans per text: the user's own chunks.

Whatever the chunking, the result is a list of ``(start, end)`` character spans per text (Python
slice convention: ``text[start:end]`` is the chunk), so late and naive chunking, and any tokenizer,
see the same chunks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longembed.errors import UserError, UserTypeError

Span = tuple[int, int]


@dataclass(frozen=True)
class TokenChunking:
    """Chunks of ``size`` tokens, neighbours sharing ``overlap`` tokens."""

    size: int
    overlap: int = 0

    def __str__(self) -> str:
        return f"tokens:{self.size}" + (f":{self.overlap}" if self.overlap else "")


@dataclass(frozen=True)
class SentenceChunking:
    """Chunks of ``n`` consecutive sentences."""

    n: int

    def __str__(self) -> str:
        return f"sentences:{self.n}"


Chunking = TokenChunking | SentenceChunking


def parse_chunking(spec: str | Chunking) -> Chunking:
    """``"tokens:SIZE[:OVERLAP]"`` or ``"sentences:N"`` -> a chunking; a clear error for anything else."""
    if isinstance(spec, TokenChunking | SentenceChunking):
        return spec
    if not isinstance(spec, str):
        raise UserTypeError(f"chunking must be a string such as 'tokens:256' or a list of spans per text, got {spec!r}")
    kind, _, rest = spec.strip().partition(":")
    numbers = rest.split(":") if rest else []
    try:
        values = [int(n) for n in numbers]
    except ValueError:
        values = []
    if kind == "tokens" and len(values) in (1, 2) and len(values) == len(numbers):
        size, overlap = values[0], values[1] if len(values) == 2 else 0
        if size < 1 or not 0 <= overlap < size:
            raise UserError(f"chunking {spec!r}: need size >= 1 and 0 <= overlap < size")
        return TokenChunking(size, overlap)
    if kind == "sentences" and len(values) == 1 and len(numbers) == 1:
        if values[0] < 1:
            raise UserError(f"chunking {spec!r}: need at least one sentence per chunk")
        return SentenceChunking(values[0])
    raise UserError(
        f"unknown chunking {spec!r}; use 'tokens:SIZE', 'tokens:SIZE:OVERLAP', 'sentences:N' "
        "or a list of (start, end) character spans per text"
    )


#: The overlap an overlapping chunking gets when only its size is given (advise's naive-chunks-overlap):
#: an eighth of the chunk, 32 tokens of 256.
DEFAULT_OVERLAP_FRACTION = 8


def chunk_overlap(spec: str | Chunking) -> int:
    """Tokens neighbouring chunks share under ``spec`` (0 for sentence chunks)."""
    rule = parse_chunking(spec)
    return rule.overlap if isinstance(rule, TokenChunking) else 0


def overlapping(spec: str | Chunking) -> str:
    """``spec`` with neighbours sharing tokens: itself if they already do, else ``tokens:SIZE:SIZE/8``;
    a UserError for a chunking that cannot overlap (sentences, chunks under 8 tokens)."""
    rule = parse_chunking(spec)
    if not isinstance(rule, TokenChunking) or rule.size < DEFAULT_OVERLAP_FRACTION:
        raise UserError(f"chunking {str(rule)!r} cannot overlap: overlapping chunks are token chunks of at least "
                        f"{DEFAULT_OVERLAP_FRACTION} tokens (tokens:SIZE:OVERLAP)")
    return str(rule if rule.overlap else TokenChunking(rule.size, rule.size // DEFAULT_OVERLAP_FRACTION))


def token_chunk_spans(offsets: Sequence[Span], size: int, overlap: int = 0) -> list[Span]:
    """Character spans of chunks of ``size`` tokens (``overlap`` shared with the next), given each
    token's (start, end) character offsets in the text.  The last chunk ends with the last token."""
    if size < 1 or not 0 <= overlap < size:
        raise UserError(f"need size >= 1 and 0 <= overlap < size, got {size}, {overlap}")
    spans: list[Span] = []
    stride = size - overlap
    for start in range(0, len(offsets), stride):
        stop = min(start + size, len(offsets))
        spans.append((offsets[start][0], offsets[stop - 1][1]))
        if stop == len(offsets):
            break
    return spans


# A sentence ends after . ! ? (possibly repeated, possibly closed by quotes or brackets) followed by
# whitespace, or at a line break: meeting transcripts, lists and headings end lines without a period.
SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f]+[\"'\u201d\u2019)\]]*(?=\s)|\n")


def sentence_spans(text: str) -> list[Span]:
    """Character spans of the sentences of ``text``, each without its surrounding whitespace.

    A rule-based splitter (no model, no download): a sentence ends at . ! ? or an ellipsis followed by
    whitespace, or at a line break.  Abbreviations ("e.g. this") do split; chunks of several sentences
    make that harmless for retrieval.
    """
    return spans_between(text, SENTENCE_END)


def spans_between(text: str, ends: re.Pattern[str]) -> list[Span]:
    """The spans of ``text`` between the matches of ``ends``, each without its surrounding whitespace (an
    empty one left out): a match that starts with a line break ends its span before itself, any other
    (terminal punctuation) after itself.  The sentences here and the passage pieces of
    :mod:`longembed.retrieval.passages` differ only in their ``ends``."""
    spans: list[Span] = []
    start = 0
    for match in ends.finditer(text):
        end = match.start() if match.group().startswith("\n") else match.end()
        _append_stripped(text, start, end, spans)
        start = match.end()
    _append_stripped(text, start, len(text), spans)
    return spans


def _append_stripped(text: str, start: int, end: int, spans: list[Span]) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        first = start + (len(piece) - len(piece.lstrip()))
        spans.append((first, first + len(stripped)))


def sentence_chunk_spans(text: str, n: int) -> list[Span]:
    """Character spans of chunks of ``n`` consecutive sentences (the last may have fewer)."""
    if n < 1:
        raise UserError(f"need at least one sentence per chunk, got {n}")
    sentences = sentence_spans(text)
    return [(sentences[i][0], sentences[min(i + n, len(sentences)) - 1][1]) for i in range(0, len(sentences), n)]


def check_spans(text: str, spans: Any, where: str) -> list[Span]:
    """``spans`` as a list of (start, end) int pairs inside ``text`` holding some non-space character,
    else a ValueError naming ``where`` and the bad span."""
    if isinstance(spans, str) or not isinstance(spans, Sequence):
        raise UserTypeError(f"{where}: expected a list of (start, end) character spans, got {type(spans).__name__}")
    if not spans:
        raise UserError(f"{where}: no spans: give at least one (start, end) span per text")
    out: list[Span] = []
    for j, span in enumerate(spans):
        if (
            isinstance(span, str)
            or not isinstance(span, Sequence)
            or len(span) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in span)
        ):
            raise UserTypeError(f"{where}, span {j}: expected a (start, end) pair of ints, got {span!r}")
        start, end = int(span[0]), int(span[1])
        if not 0 <= start < end <= len(text):
            raise UserError(f"{where}, span {j} = {span!r}: need 0 <= start < end <= {len(text)} (the text's length)")
        if not text[start:end].strip():
            raise UserError(f"{where}, span {j} = {span!r} holds only whitespace: no token to embed")
        out.append((start, end))
    return out
