"""``longembed collapse``: measure length collapse of an encoder on real text.

For every temperature (TempScale tau) and every length bucket this embeds the bucket's texts
and records the paper's diagnostics: the mean pairwise cosine similarity (Figure 1c), the
spread and norms of the embeddings, and sigma_a of the last layer's attention (Figure 7).
Results go to ``OUTPUT/collapse.json`` (a :class:`~longembed.results.CollapseResults`, marked
complete only at the end) and one PNG per metric.

Lengths are reported as the number of tokens the model sees, special tokens included, so a
bucket of length 512 fills a 512-token window exactly.  The texts are cut to
``length - (number of special tokens)`` content tokens.  Lengths the encoder cannot take
whole (above its ``max_length``) are skipped and logged, never truncated silently.

Vectors and sigma_a values go through the embedding cache (:class:`CachedEncoder`), so a killed
run resumes where it stopped and a rerun with another set of temperatures recomputes only what is
new.  One encoder serves every temperature (tau is a per-call setting).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longembed.collapse.buckets import Bucket, build_length_buckets, build_short_buckets
from longembed.collapse.choices import (
    DEFAULT_LENGTHS,
    DEFAULT_SHORT_EDGES,
    DEFAULT_SIGMA_A_TEXTS,
    DEFAULT_TEXTS_PER_BUCKET,
)
from longembed.collapse.corpus import SOURCES, load_long_documents
from longembed.collapse.metrics import embedding_statistics
from longembed.collapse.plots import plot_collapse
from longembed.collapse.sigma import attention_sigma_a
from longembed.collapse.spectral import SIGMA_A_METHOD
from longembed.config import check_temperature
from longembed.encoder import load_encoder
from longembed.evaluation.cached_encoder import CachedEncoder
from longembed.evaluation.estimate import fit_cost_model, format_duration, measure_cost_model
from longembed.evaluation.provenance import library_versions
from longembed.inputs import special_token_layout
from longembed.results import COLLAPSE_FILE, BucketStats, CollapseResults, json_safe

__all__ = ["DEFAULT_LENGTHS", "DEFAULT_SHORT_EDGES", "run_collapse"]

log = logging.getLogger(__name__)

SIGMA_A_LAYER = -1
SIGMA_A_ITERS = 30


def check_arguments(
    temperatures: Sequence[float],
    lengths: Sequence[int],
    short_edges: Sequence[int] | None,
    texts_per_bucket: int,
    sigma_a_texts: int | None,
    batch_size: int,
    sources: Sequence[str],
) -> list[float]:
    """Every argument checked before any data or model loads; returns the temperatures as floats."""
    if not temperatures:
        raise ValueError("give at least one temperature")
    taus = [check_temperature(t) for t in temperatures]
    if len(set(taus)) != len(taus):
        raise ValueError(f"repeated temperature in {taus}")
    if not lengths and not short_edges:
        raise ValueError("give at least one length (or short edges)")
    bad = [n for n in lengths if isinstance(n, bool) or not isinstance(n, int) or n < 1]
    if bad:
        raise ValueError(f"lengths must be positive token counts, got {bad}")
    if short_edges and (len(short_edges) < 2 or any(b <= a for a, b in zip(short_edges, short_edges[1:], strict=False))
                        or min(short_edges) < 0):
        raise ValueError(f"short edges must be at least two increasing token counts >= 0, got {list(short_edges)}")
    if texts_per_bucket < 2:
        raise ValueError("texts_per_bucket must be >= 2 (pairwise statistics need two texts)")
    if sigma_a_texts is not None and sigma_a_texts < 1:
        raise ValueError("sigma_a_texts must be >= 1 (or None for all texts)")
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or not sources:
        raise ValueError(f"sources must be some of {list(SOURCES)}, got {list(sources)}")
    return taus


def _bucket_stats(bucket: Bucket, overhead: int) -> BucketStats:
    """A bucket's description before measurement: kind, length in model tokens, counts."""
    if bucket.kind == "prefix":
        return BucketStats(kind="prefix", length=bucket.length + overhead, n_texts=len(bucket.texts),
                           n_documents=len(set(bucket.doc_ids)), content_tokens=bucket.length)
    mean_content = float(np.mean(bucket.token_lengths)) if bucket.token_lengths else float("nan")
    return BucketStats(kind="span", length=mean_content + overhead, n_texts=len(bucket.texts),
                       n_documents=len(set(bucket.doc_ids)), content_token_range=[bucket.length, bucket.upper],
                       mean_content_tokens=mean_content)


def _shard(bucket: Bucket) -> str:
    return f"collapse/{bucket.kind}-{bucket.length}" + (f"-{bucket.upper}" if bucket.upper is not None else "")


class _Measurer:
    """Measures buckets through the cache: raw vectors and sigma_a per text."""

    def __init__(self, cached: CachedEncoder, with_sigma_a: bool, sigma_a_texts: int | None):
        self.cached = cached
        self.with_sigma_a = with_sigma_a
        self.sigma_a_texts = sigma_a_texts
        self.quantity = f"sigma_a(layer={SIGMA_A_LAYER}, iters={SIGMA_A_ITERS})"

    def sigma_texts(self, bucket: Bucket) -> list[str]:
        return bucket.texts if self.sigma_a_texts is None else bucket.texts[: self.sigma_a_texts]

    def sigma_a(self, texts: list[str], tau: float, shard: str) -> np.ndarray:
        encoder = self.cached.encoder

        def compute(chunk: list[str]) -> np.ndarray:
            return attention_sigma_a(encoder, chunk, layer=SIGMA_A_LAYER, iters=SIGMA_A_ITERS,
                                     temperature=tau).reshape(-1, 1)

        namespace = self.cached.namespace("", tau, normalize=False, quantity=self.quantity)
        result = self.cached.compute(texts, compute, shard=shard, namespace=namespace, desc=f"{shard} sigma_a")
        return result.vectors[:, 0].astype(np.float64)

    def measure(self, bucket: Bucket, overhead: int, tau: float) -> BucketStats:
        entry = _bucket_stats(bucket, overhead)
        if not bucket.texts:
            return entry
        started = time.perf_counter()
        raw = self.cached.encode(bucket.texts, shard=_shard(bucket), temperature=tau, normalize_embeddings=False,
                                 desc=f"tau={tau:g} {_shard(bucket)}").vectors
        entry.encode_seconds = round(time.perf_counter() - started, 3)
        stats = embedding_statistics(raw)
        stats.pop("n")
        for name, value in stats.items():
            setattr(entry, name, value)
        if self.with_sigma_a:
            started = time.perf_counter()
            texts = self.sigma_texts(bucket)
            sig = self.sigma_a(texts, tau, _shard(bucket))
            entry.sigma_a_n_texts = len(texts)
            entry.sigma_a_seconds = round(time.perf_counter() - started, 3)
            entry.sigma_a, entry.sigma_a_std = float(sig.mean()), float(sig.std())
            entry.sigma_a_min, entry.sigma_a_max = float(sig.min()), float(sig.max())
        return entry

    def estimate(self, buckets: list[Bucket], overhead: int, taus: list[float], batch_size: int) -> dict[str, Any]:
        """Seconds for what is not cached yet: a timed warm-up of encode (and sigma_a) on this machine."""
        encoder = self.cached.encoder
        to_embed: list[int] = []
        to_sigma: list[int] = []
        for tau in taus:
            for bucket in buckets:
                n = round(_bucket_stats(bucket, overhead).length)
                _, missing = self.cached.missing(bucket.texts, _shard(bucket), "", tau, normalize=False)
                to_embed += [n] * len(missing)
                if self.with_sigma_a:
                    _, missing = self.cached.missing(self.sigma_texts(bucket), _shard(bucket), "", tau,
                                                     normalize=False, quantity=self.quantity)
                    to_sigma += [n] * len(missing)
        estimate: dict[str, Any] = {"texts_to_embed": len(to_embed), "sigma_a_to_compute": len(to_sigma)}
        if not to_embed and not to_sigma:
            estimate["seconds"] = 0.0
            return estimate
        embed_model = measure_cost_model(encoder, batch_size)
        seconds = sum(embed_model.seconds(n) for n in to_embed)
        if to_sigma:
            # time sigma_a on two texts at the shortest and at the longest length; they go through the
            # cache, so the timed work is part of the run, not extra
            prefix = [b for b in buckets if b.kind == "prefix" and b.texts] or [b for b in buckets if b.texts]
            shortest, longest = min(prefix, key=lambda b: b.length), max(prefix, key=lambda b: b.length)
            points = []
            for bucket in [shortest] if shortest is longest else [shortest, longest]:
                n = round(_bucket_stats(bucket, overhead).length)
                _, missing = self.cached.missing(self.sigma_texts(bucket)[:2], _shard(bucket), "", taus[0],
                                                 normalize=False, quantity=self.quantity)
                if missing:
                    began = time.perf_counter()
                    self.sigma_a(missing, taus[0], _shard(bucket))
                    points.append((n, (time.perf_counter() - began) / len(missing)))
                    for _ in missing:  # done now
                        to_sigma.remove(n)
            if len(points) == 2 and points[1][0] > points[0][0]:
                sigma_model = fit_cost_model(*points[0], *points[1], [])
                seconds += sum(sigma_model.seconds(n) for n in to_sigma)
            elif points:
                seconds += points[0][1] * len(to_sigma)
        estimate["seconds"] = round(seconds, 1)
        return estimate


def run_collapse(
    model: str,
    *,
    method: str = "truncate",
    max_length: int | None = None,
    temperatures: Sequence[float] = (1.0,),
    data_dir: str | Path,
    output_dir: str | Path,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    short_edges: Sequence[int] | None = DEFAULT_SHORT_EDGES,
    texts_per_bucket: int = DEFAULT_TEXTS_PER_BUCKET,
    batch_size: int = 8,
    seed: int = 0,
    show_progress_bar: bool = True,
    sources: Sequence[str] = SOURCES,
    with_sigma_a: bool = True,
    sigma_a_texts: int | None = DEFAULT_SIGMA_A_TEXTS,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    device: str | None = None,
    encoder_factory: Callable[..., Any] | None = None,
    say: Callable[[str], None] | None = print,
    **encoder_options: Any,
) -> CollapseResults:
    """Measure length collapse and write ``output_dir/collapse.json`` plus PNG plots.

    Why: the length-collapse paper shows that embeddings of longer texts crowd together
    (higher mean pairwise cosine) because attention filters out more high-frequency signal
    (smaller sigma_a); this measures both on real documents for any encoder, extension method
    and TempScale temperature, with the same documents at every length.

    Args:
        model: model folder or name, passed to ``load_encoder``.
        method, max_length: the context-window extension method and its target length.
        temperatures: TempScale taus; one line per tau (one encoder for all: tau is per call).
        data_dir: folder in the shared data layout (essays, SQuALITY, QMSum).
        output_dir: where ``collapse.json`` and ``collapse_<metric>.png`` go.
        lengths: bucket lengths in tokens seen by the model (special tokens included); the
            texts are the same documents cut to each length.  Lengths above the encoder's
            ``max_length`` are skipped (logged, listed under ``config.skipped``).
        short_edges: the paper's short intervals in content tokens (spans of the same
            documents), or None / empty for none.
        texts_per_bucket: texts per bucket (documents for the prefix buckets).
        batch_size, show_progress_bar: passed to the encoder.
        seed: document selection, start positions and spans.
        sources: which document sources to use.
        with_sigma_a: also measure sigma_a (the slow part at long lengths).
        sigma_a_texts: measure sigma_a on only the first this many texts of each bucket
            (None: all); the embedding statistics always use all texts.
        cache_dir, use_cache: the embedding cache (vectors and sigma_a values are cached).
        encoder_factory: replaces ``longembed.load_encoder`` (tests).
        say: where the estimate and progress lines go (None: silent).
        **encoder_options: more ``load_encoder`` options (e.g. ``scale="per_document"``).
    """
    taus = check_arguments(temperatures, lengths, short_edges, texts_per_bucket, sigma_a_texts, batch_size,
                           sources)
    say = say or (lambda _message: None)
    if "temperature" in encoder_options:
        raise ValueError("pass TempScale taus as temperatures=[...], not as an encoder option")
    output_dir = Path(output_dir)
    started = time.perf_counter()
    factory = encoder_factory or load_encoder
    encoder = factory(model, method=method, max_length=max_length, device=device, **encoder_options)
    cached = CachedEncoder(encoder, cache_dir, use_cache=use_cache, batch_size=batch_size,
                           show_progress=show_progress_bar, log=say)
    measurer = _Measurer(cached, with_sigma_a, sigma_a_texts)

    documents = load_long_documents(data_dir, sources)
    per_source = {s: sum(d.source == s for d in documents) for s in dict.fromkeys(sources)}
    log.info("loaded %d documents %s from %s", len(documents), per_source, data_dir)
    tokenizer = encoder.tokenizer
    overhead = sum(special_token_layout(tokenizer))
    capacity = getattr(encoder, "max_length", None)

    skipped: list[dict[str, Any]] = []
    kept: list[int] = []
    for length in dict.fromkeys(int(x) for x in lengths):
        if length <= overhead:
            reason = f"shorter than the {overhead} special tokens"
        elif capacity is not None and length > capacity:
            reason = f"above the encoder's max_length {capacity} (method {method!r})"
        else:
            kept.append(length)
            continue
        log.warning("skipping length %d: %s", length, reason)
        skipped.append({"length": length, "reason": reason})

    buckets: list[Bucket] = []
    selected_ids: list[str] = []
    n_qualified = None
    if kept:
        prefix = build_length_buckets(documents, tokenizer, [x - overhead for x in kept], texts_per_bucket, seed)
        buckets.extend(prefix)
        selected_ids = list(prefix[0].doc_ids)
        n_qualified = prefix[0].n_available
        if not selected_ids:
            log.warning("no document is long enough for %d tokens: no prefix bucket", max(kept))
    span_docs = [d for d in documents if d.doc_id in set(selected_ids)] if selected_ids else documents
    edges = [int(e) for e in (short_edges or [])]
    if edges:
        usable = list(edges)
        while len(usable) >= 2 and capacity is not None and usable[-1] - 1 + overhead > capacity:
            skipped.append({"short_interval": [usable[-2], usable[-1]], "reason": f"above the encoder's max_length {capacity}"})
            log.warning("skipping short interval [%d, %d): above max_length %d", usable[-2], usable[-1], capacity)
            usable.pop()
        if len(usable) >= 2:
            buckets.extend(build_short_buckets(span_docs, tokenizer, usable, texts_per_bucket, seed))
        edges = usable if len(usable) >= 2 else []
    if not any(b.texts for b in buckets):
        raise ValueError(
            f"nothing to measure: no bucket has texts (lengths {list(lengths)} with max_length {capacity}; "
            f"skipped: {skipped})"
        )

    estimate = measurer.estimate(buckets, overhead, taus, batch_size)
    say(
        f"collapse: {len(buckets)} buckets x {len(taus)} temperature(s): {estimate['texts_to_embed']} texts to "
        f"embed, {estimate['sigma_a_to_compute']} sigma_a to compute (the rest cached); estimated "
        f"{format_duration(estimate['seconds'])} (timed warm-up on this machine; rough)"
    )

    config: dict[str, Any] = {
        "model": str(model),
        "method": method,
        "max_length": max_length,
        "encoder_max_length": capacity,
        "original_length": getattr(encoder, "original_length", None),
        "special_tokens_per_text": overhead,
        "length_unit": "tokens seen by the model incl. special tokens (content = length - special tokens)",
        "lengths_requested": [int(x) for x in lengths],
        "lengths": kept,
        "short_edges_content_tokens": edges,
        "skipped": skipped,
        "temperatures": taus,
        "data_dir": str(data_dir),
        "sources": list(dict.fromkeys(sources)),
        "documents_per_source": per_source,
        "n_documents": len(documents),
        "n_documents_long_enough": n_qualified,
        "selected_documents": selected_ids,
        "document_start": "seeded random sentence/paragraph start, same for every length",
        "texts_per_bucket": texts_per_bucket,
        "sigma_a_texts_per_bucket": (sigma_a_texts if sigma_a_texts is not None else "all") if with_sigma_a else 0,
        "batch_size": batch_size,
        "seed": seed,
        "encoder_options": json_safe(encoder_options),
        "encoder": repr(encoder),
        "embeddings": "pooled, before L2 normalization (normalize_embeddings=False)",
        "sigma_a_method": (
            "mean over texts of longembed.collapse.attention_sigma_a (last layer, mean over heads; "
            f"for pcw the mean over windows). {SIGMA_A_METHOD}"
            if with_sigma_a
            else None
        ),
        "cache_dir": None if cached.cache is None else str(cached.cache.root),
        "estimate": estimate,
        "versions": library_versions(),
    }
    result = CollapseResults(config=config)
    out_file = output_dir / COLLAPSE_FILE
    for tau in taus:
        entries: list[BucketStats] = []
        result.temperatures[str(tau)] = entries
        for bucket in buckets:
            entries.append(measurer.measure(bucket, overhead, tau))
            result.save(out_file)  # partial results of long runs are kept (complete is still False)
    config["elapsed_seconds"] = round(time.perf_counter() - started, 1)
    metrics = ["mean_pairwise_cosine", "spread", "mean_norm"] + (["sigma_a"] if with_sigma_a else [])
    config["plots"] = [p.name for p in plot_collapse(result, output_dir, metrics)]
    result.complete = True
    result.save(out_file)
    return result

