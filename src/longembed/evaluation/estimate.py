"""How long a run will take, printed before it starts: counts, cache hits and seconds from a warm-up.

Seconds come from a cost model t(n) = c + a n + b n^2 per sequence of n tokens, fitted on two timed
measurements on this machine with this encoder (:func:`measure_cost_model`), the longer one at the
longest sequence the run will encode, each the fastest of two repeats.  Rough by design: it ignores
padding, and other work on the machine can still slow the run after the warm-up; it says so.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from longembed.chunking.spans import Chunking, TokenChunking, parse_chunking
from longembed.encoder_protocol import Encoder
from longembed.evaluation.cache import CachedEncoder
from longembed.results import Estimate, SideEstimate, UnitEstimate
from longembed.tasks.base import WORDS_PER_TOKEN


@dataclass
class CostModel:
    """Seconds for one sequence of n tokens: c + a n + b n^2 (rough)."""

    a: float
    b: float
    c: float = 0.0
    samples: list[dict[str, float]] = field(default_factory=list)

    def seconds(self, n: float) -> float:
        return self.c + self.a * n + self.b * n * n

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "c": self.c, "warmup": self.samples}


def fit_cost_model(n1: int, t1: float, n2: int, t2: float, samples: list[dict[str, float]]) -> CostModel:
    """The model through two points (n1, t1), (n2, t2) with n1 < n2: a n + b n^2 (attention grows
    with n^2), or c + a n when the short input costs more per token (per-sequence overhead)."""
    b = (t2 / n2 - t1 / n1) / (n2 - n1)
    a = t1 / n1 - b * n1
    if b < 0:
        slope = max((t2 - t1) / (n2 - n1), 0.0)
        return CostModel(slope, 0.0, max(t1 - slope * n1, 0.0), samples)
    if a < 0:
        a, b = 0.0, t2 / (n2 * n2)
    return CostModel(a, b, 0.0, samples)


#: The shortest sequence the warm-up times (a run of shorter texts is timed at this length).
MIN_TIMED_TOKENS = 16
#: Times each warm-up measurement is taken; the fastest counts (other work on the machine only slows).
REPEATS = 2


def measure_cost_model(encoder: Encoder, batch_size: int, longest: int | None = None) -> CostModel:
    """Time a warm-up on this machine and fit seconds per sequence.

    Two batched measurements, as the encoder batches real inputs, each the fastest of :data:`REPEATS`:
    min(batch_size, 8) inputs of n1 = min(512, Lt, ``longest``) tokens, and n2 = ``longest`` tokens (the longest
    sequence the run will encode; default 2048), cut at Lt (at Lo for pcw, whose sequences are windows
    of at most Lo tokens): 2 inputs up to 2048 tokens, 1 above.  Measuring at the longest length, not
    extrapolating the n^2 term to it, is what keeps the estimate of a long run honest.  A first untimed
    call takes the one-off costs (thread pools, lazy initialisation) out of the fit.  Costs about
    2 x (8 t(512) + t(n2)): ~12 s for MiniLM at 4k, ~30 s for nomic at 4k on 2 CPU cores.
    """
    cap, original = encoder.max_length, encoder.original_length
    long_cap = original if encoder.method == "pcw" else cap
    n1 = min(512, cap) if longest is None else min(512, cap, max(longest, MIN_TIMED_TOKENS))  # no longer than the run's
    n2 = min(long_cap, 2048 if longest is None else longest)
    k1, k2 = max(1, min(batch_size, 8)), 2 if n2 <= 2048 else 1

    def timed(texts: list[str]) -> float:
        fastest = math.inf
        for _ in range(REPEATS):
            began = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
            fastest = min(fastest, (time.perf_counter() - began) / len(texts))
        return fastest

    encoder.encode([filler_text(min(64, cap))], batch_size=1, normalize_embeddings=True, show_progress_bar=False)
    t1 = timed([filler_text(n1)] * k1)
    samples = [{"tokens": n1, "batch": k1, "seconds_per_sequence": t1}]
    if n2 <= n1 * 1.5:
        return CostModel(t1 / n1, 0.0, 0.0, samples)
    t2 = timed([filler_text(n2)] * k2)
    samples.append({"tokens": n2, "batch": k2, "seconds_per_sequence": t2})
    return fit_cost_model(n1, t1, n2, t2, samples)


def longest_sequence(token_counts: Iterable[int], encoder: Encoder, chunking: str | None = None,
                     late: bool = False) -> int:
    """The longest sequence the encoder will run for texts of ``token_counts`` tokens: a whole text cut at
    Lt, a naive chunk (at most Lo), or a late-chunking window (the encoder's window); 0 for none."""
    longest = max(token_counts, default=0)
    if chunking is not None and not late:
        rule = parse_chunking(chunking)
        size = rule.size if isinstance(rule, TokenChunking) else rule.n * TOKENS_PER_SENTENCE
        return min(longest, size + 2, encoder.original_length)
    cap = encoder.window_length if late else encoder.max_length  # type: ignore[attr-defined]
    return min(longest, cap)


def filler_text(n_tokens: int) -> str:
    """A text of about ``n_tokens`` tokens (special tokens included) for timing."""
    return " ".join(["hello"] * max(n_tokens - 2, 1))


def document_seconds(n_tokens: int, encoder: Encoder, model: CostModel) -> float:
    """Estimated seconds for one input of ``n_tokens``: truncated to Lt; pcw splits into Lo windows."""
    n = min(n_tokens, encoder.max_length)
    if encoder.method == "pcw" and n > encoder.original_length:
        windows = math.ceil(n / encoder.original_length)
        return windows * model.seconds(n / windows)
    return model.seconds(n)


#: Tokens a sentence is taken to have, for the estimate of sentence chunks.
TOKENS_PER_SENTENCE = 32


def naive_chunk_count(n_tokens: float, rule: Chunking) -> int:
    """Chunks of a text of ``n_tokens`` tokens: overlapping token chunks step by SIZE - OVERLAP
    (:func:`~longembed.chunking.spans.token_chunk_spans`); sentence chunks by an estimated size."""
    if isinstance(rule, TokenChunking):
        return max(1, math.ceil((n_tokens - rule.overlap) / (rule.size - rule.overlap)))
    return max(1, math.ceil(n_tokens / (rule.n * TOKENS_PER_SENTENCE)))


def text_seconds(n_tokens: float, encoder: Encoder, model: CostModel, chunking: str | None = None,
                 late: bool = False) -> float:
    """Estimated seconds for a text of ``n_tokens`` as the run encodes it: one input
    (:func:`document_seconds`); naive chunks (``chunking`` given, not ``late``): every chunk alone, at
    most Lo; late chunks: one pass, as windows of the encoder's window when longer (neighbours share an
    eighth, as :mod:`longembed.chunking.late` runs them)."""
    if chunking is None and not late:
        return document_seconds(round(n_tokens), encoder, model)
    if not late:
        rule = parse_chunking(chunking)
        size = rule.size if isinstance(rule, TokenChunking) else rule.n * TOKENS_PER_SENTENCE
        return naive_chunk_count(n_tokens, rule) * model.seconds(min(size + 2, encoder.original_length))
    window = encoder.window_length  # type: ignore[attr-defined]
    if n_tokens <= window:
        return model.seconds(n_tokens)
    return math.ceil(n_tokens / (window - window // 8)) * model.seconds(window)


@dataclass
class SideToEncode:
    """One side of one unit for the estimate: its texts, shard, prompt and tau (and, for chunk
    vectors, the cache quantity and keys they are stored under, and how they are chunked: ``chunking``
    for naive chunks, ``late`` for late chunks)."""

    texts: list[str]
    shard: str
    prompt: str = ""
    temperature: float | None = None
    quantity: str = "embedding"
    keys: list[str] | None = None
    chunking: str | None = None
    late: bool = False


def estimate_cost(
    units: Sequence[tuple[str, SideToEncode, SideToEncode]],
    encoder: CachedEncoder | None,
    batch_size: int,
    measure: bool,
    log: Callable[[str], None],
) -> Estimate:
    """Documents, queries, tokens and cache hits per unit, and estimated seconds; printed and returned.

    ``units`` are (label, documents, queries).  Tokens are counted only for texts not in the cache (a
    warm rerun tokenizes nothing).  Seconds come from :func:`measure_cost_model`, skipped when there
    is nothing to encode or ``measure`` is False.  BM25 (``encoder`` None): tokens = words / 0.75 and
    no time estimate (indexing takes seconds).
    """
    rows, to_time = count_units(units, encoder)
    model = None
    timed = timed_encoder(encoder)
    if timed is not None and measure and any(r.documents.to_encode + r.queries.to_encode for r in rows):
        longest = max(
            longest_sequence(tokens, timed, side.chunking, side.late)
            for sides, side_tokens in to_time
            for side, tokens in zip(sides, side_tokens, strict=True)
        )
        model = measure_cost_model(timed, batch_size, longest)
    total = None
    if model is not None and timed is not None:
        total = 0.0
        for row, (sides, tokens) in zip(rows, to_time, strict=True):
            seconds = sum(text_seconds(n, timed, model, side.chunking, side.late)
                          for side, side_tokens in zip(sides, tokens, strict=True) for n in side_tokens)
            row.seconds = round(seconds, 1)
            total += seconds
    estimate = _summary(rows, model, encoder is None, total)
    log(format_estimate(estimate))
    return estimate


def count_units(
    units: Sequence[tuple[str, SideToEncode, SideToEncode]], encoder: CachedEncoder | None
) -> tuple[list[UnitEstimate], list[tuple[tuple[SideToEncode, ...], list[list[int]]]]]:
    """Per unit: its counts and cache hits, and (its sides, the token counts of each side's texts still
    to encode)."""
    rows: list[UnitEstimate] = []
    to_time: list[tuple[tuple[SideToEncode, ...], list[list[int]]]] = []
    for label, documents, queries in units:
        sides = []
        unit_tokens: list[list[int]] = []
        for side in (documents, queries):
            if encoder is None:
                tokens = [round(len(t.split()) / WORDS_PER_TOKEN) for t in side.texts]
                n_cached, n_missing = 0, len(side.texts)
            else:
                n_cached, missing = encoder.missing(
                    side.texts, side.shard, side.prompt, side.temperature, quantity=side.quantity, keys=side.keys
                )
                tokens = encoder.count_tokens(missing, side.prompt) if missing else []
                n_missing = len(missing)
                unit_tokens.append(tokens)
            read = tokens_read(tokens, None if encoder is None else encoder.max_length, side)
            sides.append(SideEstimate(len(side.texts), n_cached, n_missing, sum(read), max(tokens, default=0)))
        rows.append(UnitEstimate(label, sides[0], sides[1]))
        to_time.append(((documents, queries), unit_tokens))
    return rows, to_time


def tokens_read(token_counts: Sequence[int], max_length: int | None, side: SideToEncode) -> list[int]:
    """The tokens the encoder reads of each text: a whole-text input stops at Lt (``max_length``: Lo
    for truncate, which reads only a document's first Lo tokens); chunks, naive or late, read every
    token.  BM25, or an encoder whose Lt is unknown (``max_length`` None), reads them all."""
    if max_length is None or side.chunking is not None or side.late:
        return list(token_counts)
    return [min(n, max_length) for n in token_counts]


def timed_encoder(encoder: CachedEncoder | None) -> Encoder | None:
    """The encoder whose warm-up :func:`measure_cost_model` times: one that declares its method, Lt and
    Lo (a ``LongContextEncoder``); None for BM25 and for an encoder longembed did not build (counts and
    cache hits are still reported, seconds are not estimated)."""
    if encoder is None:
        return None
    inner = encoder.encoder
    known = all(getattr(inner, name, None) is not None for name in ("method", "max_length", "original_length"))
    return inner if known else None


def _summary(rows: list[UnitEstimate], model: CostModel | None, bm25: bool, seconds: float | None) -> Estimate:
    """The estimate's totals and how its seconds were obtained."""
    return Estimate(
        method=(
            "seconds per sequence t(n) = c + a n + b n^2 fitted on a batched warm-up on this machine (at 512 "
            "tokens and at the longest sequence, fastest of two); inputs "
            "truncated to max_length, pcw counted as windows of Lo, naive chunks one sequence each, late chunks "
            "windows of the encoder's window; padding ignored (rough)"
            if model is not None
            else ("BM25: no encoding" if bm25 else "not measured")
        ),
        cost_model=None if model is None else model.to_dict(),
        units=rows,
        documents=sum(r.documents.count for r in rows),
        documents_cached=sum(r.documents.cached for r in rows),
        queries=sum(r.queries.count for r in rows),
        queries_cached=sum(r.queries.cached for r in rows),
        tokens_to_encode=sum(r.documents.tokens + r.queries.tokens for r in rows),
        seconds=None if seconds is None else round(seconds, 1),
    )


def format_estimate(estimate: Estimate) -> str:
    """The estimate as a small text table."""
    lines = [
        f"{'unit':<16}{'docs':>6}{'cached':>8}{'doc tokens to encode':>22}{'max':>8}"
        f"{'queries':>9}{'cached':>8}{'est. s':>9}"
    ]
    for row in estimate.units:
        d, q = row.documents, row.queries
        seconds = "-" if row.seconds is None else f"{row.seconds:.0f}"
        lines.append(
            f"{row.unit:<16}{d.count:>6}{d.cached:>8}{d.tokens:>22,}{d.max_tokens:>8}"
            f"{q.count:>9}{q.cached:>8}{seconds:>9}"
        )
    when = "" if estimate.seconds is None else f"; estimated {format_duration(estimate.seconds)}"
    lines.append(
        f"total: {estimate.documents} documents ({estimate.documents_cached} cached), "
        f"{estimate.queries} queries ({estimate.queries_cached} cached), "
        f"{estimate.tokens_to_encode:,} tokens to encode{when} ({estimate.method})"
    )
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    """12 s, 3.5 min, 1.2 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
