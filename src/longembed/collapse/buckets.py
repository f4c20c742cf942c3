"""Length buckets of real text, built in a controlled way.

Two kinds of buckets:

* **prefix buckets** (:func:`build_length_buckets`): the *same* documents, each cut to every
  requested length.  Each document gets one start position (a sentence or paragraph start,
  drawn with the seed, or the beginning) and every length takes the first ``L`` tokens from
  there, so the texts of length 256 are prefixes of those of length 512, and so on.  Only
  documents with enough tokens for the longest length are used, so every bucket holds the
  same documents and the only thing that changes between buckets is the length.
* **span buckets** (:func:`build_short_buckets`): the paper's short intervals
  ``[0,100) ... [400,500)``: sentence/paragraph-aligned spans of the same documents whose
  token count falls in each interval.

Lengths are counted in *content* tokens: the tokenizer's tokens without special tokens
(``longembed.inputs.tokenize`` with no special-token layout).  Every text is re-tokenized after
cutting and kept only if its count is exactly the requested one (prefix buckets) or inside the
interval (spans).  Cuts are made at the character offsets of the tokenizer (a fast tokenizer is
required).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from longembed.errors import UserError, UserTypeError
from longembed.inputs import tokenize

from .corpus import Document

__all__ = [
    "Bucket",
    "build_length_buckets",
    "build_short_buckets",
    "count_tokens",
    "cut_to_tokens",
    "segment_starts",
]

log = logging.getLogger(__name__)

# How far (in tokens) around the n-th token to look for a cut that re-tokenizes to exactly n.
_SEARCH_WINDOW = 8

# A segment starts after sentence-final punctuation (plus closing quotes/brackets) followed by
# whitespace, or after a blank line (paragraph break).  Line wraps inside a paragraph are not
# boundaries (the essays are hard-wrapped mid-sentence).
_BOUNDARY = re.compile(r"(?:(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|\n[ \t\r]*\n\s*)(?=\S)")


@dataclass
class Bucket:
    """A set of texts of (almost) one length.

    ``length`` is the requested number of content tokens for a prefix bucket, and the lower
    edge for a span bucket (whose upper edge, exclusive, is ``upper``).  ``token_lengths``
    are the exact content-token counts of ``texts``; ``n_available`` is how many documents
    qualified (prefix buckets: long enough for the longest length; span buckets: documents
    the spans were drawn from).
    """

    length: int
    texts: list[str]
    doc_ids: list[str]
    token_lengths: list[int] = field(default_factory=list)
    kind: Literal["prefix", "span"] = "prefix"
    upper: int | None = None
    n_available: int = 0

    def summary(self) -> dict[str, Any]:
        """Counts for result files (no texts)."""
        return {
            "kind": self.kind,
            "length": self.length,
            "upper": self.upper,
            "n_texts": len(self.texts),
            "n_available": self.n_available,
            "n_documents": len(set(self.doc_ids)),
        }


def _require_fast(tokenizer: Any) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise UserTypeError(
            "cutting by token needs a fast (Rust) tokenizer with offset mappings; "
            f"got {type(tokenizer).__name__}"
        )


def count_tokens(text: str, tokenizer: Any) -> int:
    """Number of content tokens of ``text`` (no special tokens)."""
    return tokenize([text], tokenizer)[0].n_tokens


def _offsets(text: str, tokenizer: Any) -> tuple[list[int], list[int]]:
    """Start and (running-max) end character offsets of the content tokens of ``text``."""
    return _offsets_many([text], tokenizer)[0]


def _offsets_many(texts: Sequence[str], tokenizer: Any, chunk: int = 16) -> list[tuple[list[int], list[int]]]:
    """:func:`_offsets` for many texts, tokenized in batches (the Rust tokenizer runs a batch in
    parallel)."""
    _require_fast(tokenizer)
    out = []
    for i in range(0, len(texts), chunk):
        for tokens in tokenize(texts[i : i + chunk], tokenizer):
            offsets = tokens.offsets or []
            starts = [s for s, _ in offsets]
            ends = list(itertools.accumulate((e for _, e in offsets), max))
            out.append((starts, ends))
    return out


def _exact_cut(
    text: str, tokenizer: Any, ends: list[int], first: int, start_char: int, n: int
) -> tuple[str, int] | None:
    """Cut ``text[start_char:end]`` so that it re-tokenizes to exactly ``n`` tokens.

    ``first`` is the index of the first token at or after ``start_char``.  Tries the end of
    the n-th token, then steps back and forth (n-1, n+1, n-2, ...) in case a cut inside a
    word re-tokenizes differently.  Returns ``(text, n_tokens_to_the_end_char)`` or None.
    """
    tried: set[int] = set()
    for delta in [0] + [d for k in range(1, _SEARCH_WINDOW + 1) for d in (-k, k)]:
        last = first + n - 1 + delta
        if last < first or last >= len(ends):
            continue
        end = ends[last]
        if end in tried or end <= start_char:
            continue
        tried.add(end)
        candidate = text[start_char:end]
        if count_tokens(candidate, tokenizer) == n:
            return candidate, last + 1
    return None


def cut_to_tokens(text: str, tokenizer: Any, n_tokens: int) -> str | None:
    """The prefix of ``text`` that re-tokenizes to exactly ``n_tokens`` content tokens.

    Why: length buckets must hold texts of exactly the requested length in the model's own
    tokens, and decoding token ids back to text is lossy (casing, accents, spacing).  The cut
    is made at the tokenizer's character offsets; if cutting inside a word changes how the
    prefix re-tokenizes, a neighbouring token boundary is used instead.

    Returns:
        The prefix, or None if the text has fewer than ``n_tokens`` tokens (or, very rarely, no
        cut near the n-th token re-tokenizes to exactly ``n_tokens``).
    """
    if n_tokens < 1:
        raise UserError("n_tokens must be >= 1")
    starts, ends = _offsets(text, tokenizer)
    if len(starts) < n_tokens:
        return None
    if len(starts) == n_tokens:
        return text
    cut = _exact_cut(text, tokenizer, ends, 0, 0, n_tokens)
    return None if cut is None else cut[0]


def segment_starts(text: str) -> list[int]:
    """Character positions where a sentence or paragraph starts (always includes the first
    non-space character)."""
    first = len(text) - len(text.lstrip())
    out = [first] if first < len(text) else []
    out.extend(m.end() for m in _BOUNDARY.finditer(text) if m.end() > first)
    return out


def _interleave_sources(docs: Sequence[Document], rng: random.Random) -> list[Document]:
    """Shuffle each source's documents and interleave the sources round-robin, so that any
    prefix of the result mixes the sources as evenly as their counts allow."""
    by_source: dict[str, list[Document]] = {}
    for d in docs:
        by_source.setdefault(d.source, []).append(d)
    queues = []
    for source in sorted(by_source):
        items = list(by_source[source])
        rng.shuffle(items)
        queues.append(items)
    out: list[Document] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def build_length_buckets(
    documents: Sequence[Document],
    tokenizer: Any,
    lengths: Sequence[int],
    max_texts_per_bucket: int,
    seed: int = 0,
    *,
    start: Literal["random", "beginning"] = "random",
) -> list[Bucket]:
    """The same documents cut to every requested length (in content tokens).

    Why: comparing buckets of different documents mixes the effect of length with that of
    content.  Here bucket ``L`` holds, for each selected document, its first ``L`` tokens from
    a fixed start, so only the length changes.

    Args:
        documents: candidate long documents.
        tokenizer: a fast Hugging Face tokenizer (the model's).
        lengths: content-token lengths, e.g. ``(126, 254, 510)``.
        max_texts_per_bucket: how many documents to use (fewer if fewer qualify).
        seed: selects the documents (each source shuffled, then sources interleaved) and the
            start positions.
        start: ``"random"`` (default): each document starts at a seeded random sentence or
            paragraph start that leaves enough tokens for the longest length (this avoids the
            shared headers of e.g. Gutenberg stories at every length); ``"beginning"``: at the
            start of the document.

    Returns:
        One bucket per length, in the order of ``lengths``, all with the same documents in the
        same order.  ``n_available`` = how many documents had enough tokens.
    """
    _check_bucket_options(lengths, max_texts_per_bucket, start)
    longest = max(lengths)
    need = longest + _SEARCH_WINDOW  # room to step forward when searching for an exact cut
    qualified = _documents_with_tokens(documents, tokenizer, need, seed)
    chosen: list[tuple[Document, dict[int, str]]] = []
    for doc, starts, ends in qualified:
        if len(chosen) >= max_texts_per_bucket:
            break
        start_char = _start_character(doc, starts, need, seed) if start == "random" else 0
        cuts = _prefix_cuts(doc, tokenizer, starts, ends, start_char, lengths)
        if cuts is not None:
            chosen.append((doc, cuts))
    if len(chosen) < max_texts_per_bucket:
        log.warning(
            "only %d documents qualify for %d tokens (%d requested per bucket)",
            len(chosen),
            longest,
            max_texts_per_bucket,
        )
    return [
        Bucket(
            length=length,
            texts=[cuts[length] for _, cuts in chosen],
            doc_ids=[doc.doc_id for doc, _ in chosen],
            token_lengths=[length] * len(chosen),
            kind="prefix",
            n_available=len(qualified),
        )
        for length in lengths
    ]


def _check_bucket_options(lengths: Sequence[int], max_texts_per_bucket: int, start: str) -> None:
    if not lengths:
        raise UserError("no lengths given")
    if min(lengths) < 1:
        raise UserError("lengths must be >= 1")
    if max_texts_per_bucket < 1:
        raise UserError("max_texts_per_bucket must be >= 1")
    if start not in ("random", "beginning"):
        raise UserError(f"unknown start {start!r}: use 'random' or 'beginning'")


def _documents_with_tokens(
    documents: Sequence[Document], tokenizer: Any, need: int, seed: int
) -> list[tuple[Document, list[int], list[int]]]:
    """The documents of at least ``need`` content tokens with their token start/end offsets, in the
    seeded order (each source shuffled, then sources interleaved)."""
    order = _interleave_sources(documents, random.Random(seed))
    candidates = [d for d in order if len(d.text) >= need]  # a token covers at least one character
    offsets = _offsets_many([d.text for d in candidates], tokenizer)
    qualified = [
        (doc, starts, ends) for doc, (starts, ends) in zip(candidates, offsets, strict=True) if len(starts) >= need
    ]
    log.info(
        "%d of %d documents have >= %d content tokens (longest length %d)",
        len(qualified),
        len(documents),
        need,
        need - _SEARCH_WINDOW,
    )
    return qualified


def _start_character(doc: Document, starts: list[int], need: int, seed: int) -> int:
    """A seeded random sentence or paragraph start of ``doc`` that leaves ``need`` tokens after it."""
    options = [s for s in segment_starts(doc.text) if len(starts) - bisect.bisect_left(starts, s) >= need]
    return random.Random(f"{seed}:{doc.doc_id}").choice(options) if options else 0


def _prefix_cuts(
    doc: Document, tokenizer: Any, starts: list[int], ends: list[int], start_char: int, lengths: Sequence[int]
) -> dict[int, str] | None:
    """``doc``'s text from ``start_char`` cut to exactly each length in tokens, or None (logged)
    when some length has no exact cut."""
    first = bisect.bisect_left(starts, start_char)
    cuts: dict[int, str] = {}
    for length in dict.fromkeys(lengths):
        cut = _exact_cut(doc.text, tokenizer, ends, first, start_char, length)
        if cut is None:
            log.warning("no exact %d-token cut of %s; document skipped", length, doc.doc_id)
            return None
        cuts[length] = cut[0]
    return cuts


def _draw_span(
    doc: Document,
    bounds: list[int],
    starts: list[int],
    ends: list[int],
    lo: int,
    hi: int,
    rng: random.Random,
    tokenizer: Any,
    taken: set[tuple[str, int, int]],
    attempts: int = 12,
) -> tuple[str, int, int, int] | None:
    """One sentence-aligned span of ``doc`` whose token count is in ``[lo, hi)``, or None."""
    text = doc.text
    for _ in range(attempts):
        i = rng.randrange(len(bounds))
        s = bounds[i]
        target = rng.randrange(lo, hi)
        first = bisect.bisect_left(starts, s)
        best: tuple[int, int] | None = None  # (|count - target|, end)
        for b in [*bounds[i + 1 :], len(text)]:
            e = b
            while e > s and text[e - 1].isspace():  # end the span before the whitespace
                e -= 1
            count = bisect.bisect_right(ends, e) - first  # tokens inside [s, e)
            if count >= hi:
                break
            if count >= lo and (best is None or abs(count - target) < best[0]):
                best = (abs(count - target), e)
        if best is None or (doc.doc_id, s, best[1]) in taken:
            continue
        span = text[s : best[1]]
        exact = count_tokens(span, tokenizer)
        if lo <= exact < hi and span.strip():
            return span, exact, s, best[1]
    return None


def build_short_buckets(
    documents: Sequence[Document],
    tokenizer: Any,
    edges: Sequence[int] = (0, 100, 200, 300, 400, 500),
    per_bucket: int = 64,
    seed: int = 0,
) -> list[Bucket]:
    """The paper's short intervals: sentence/paragraph-aligned spans of the given documents
    whose content-token count falls in ``[edges[i], edges[i+1])``.

    Why: the paper's Figure 1c and Figure 7 bin texts by length below 500 tokens; drawing the
    spans from the same long documents as the prefix buckets keeps the content comparable.

    Each span starts at a sentence or paragraph start and ends at a sentence or paragraph end;
    its target length is drawn uniformly in the interval (at least 1 token).  Documents are
    visited round-robin (sources interleaved, seeded), so a bucket draws from as many
    documents as possible; spans are distinct within a bucket.

    Returns:
        One span bucket per interval (``length`` = lower edge, ``upper`` = upper edge).
    """
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise UserError(f"edges must be increasing with at least two values, got {list(edges)}")
    if per_bucket < 1:
        raise UserError("per_bucket must be >= 1")
    rng = random.Random(seed)
    order = _interleave_sources(documents, rng)
    with_bounds = [(doc, segment_starts(doc.text)) for doc in order]
    with_bounds = [(doc, bounds) for doc, bounds in with_bounds if bounds]
    offsets = _offsets_many([doc.text for doc, _ in with_bounds], tokenizer)
    prepared = [
        (doc, bounds, starts, ends)
        for (doc, bounds), (starts, ends) in zip(with_bounds, offsets, strict=True)
    ]
    buckets = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        lo_eff = max(lo, 1)
        texts: list[str] = []
        doc_ids: list[str] = []
        counts: list[int] = []
        taken: set[tuple[str, int, int]] = set()
        failures = 0
        # visit documents round-robin until the bucket is full or no document yields a new span
        while len(texts) < per_bucket and prepared and failures < len(prepared):
            failures = 0
            for doc, bounds, starts, ends in prepared:
                if len(texts) >= per_bucket:
                    break
                got = _draw_span(doc, bounds, starts, ends, lo_eff, hi, rng, tokenizer, taken)
                if got is None:
                    failures += 1
                    continue
                span, exact, s, e = got
                taken.add((doc.doc_id, s, e))
                texts.append(span)
                doc_ids.append(doc.doc_id)
                counts.append(exact)
        if len(texts) < per_bucket:
            log.warning("span bucket [%d, %d): only %d of %d texts found", lo, hi, len(texts), per_bucket)
        buckets.append(
            Bucket(
                length=lo,
                texts=texts,
                doc_ids=doc_ids,
                token_lengths=counts,
                kind="span",
                upper=hi,
                n_available=len(prepared),
            )
        )
    return buckets
