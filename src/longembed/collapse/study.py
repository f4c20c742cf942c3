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

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from longembed.collapse.buckets import Bucket, build_length_buckets, build_short_buckets
from longembed.collapse.corpus import SOURCES, load_long_documents
from longembed.collapse.defaults import (
    DEFAULT_LENGTHS,
    DEFAULT_SHORT_EDGES,
)
from longembed.collapse.metrics import embedding_statistics
from longembed.collapse.plots import plot_collapse
from longembed.collapse.sigma import attention_sigma_a
from longembed.collapse.spec import CollapseSpec
from longembed.collapse.spectral import SIGMA_A_METHOD
from longembed.config import check_temperature
from longembed.encoder import load_encoder
from longembed.errors import UserError, UserTypeError
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.encoders import EncoderFactory
from longembed.evaluation.estimate import fit_cost_model, format_duration, measure_cost_model
from longembed.evaluation.provenance import library_versions
from longembed.evaluation.runner import cached_encoder
from longembed.evaluation.spec import EvalSpec
from longembed.inputs import special_token_layout
from longembed.results import COLLAPSE_FILE, BucketStats, CollapseResults
from longembed.results.files import json_safe

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
        raise UserError("give at least one temperature")
    taus = [check_temperature(t) for t in temperatures]
    if len(set(taus)) != len(taus):
        raise UserError(f"repeated temperature in {taus}")
    if not lengths and not short_edges:
        raise UserError("give at least one length (or short edges)")
    bad = [n for n in lengths if isinstance(n, bool) or not isinstance(n, int) or n < 1]
    if bad:
        raise UserError(f"lengths must be positive token counts, got {bad}")
    if short_edges and (len(short_edges) < 2 or any(b <= a for a, b in zip(short_edges, short_edges[1:], strict=False))
                        or min(short_edges) < 0):
        raise UserError(f"short edges must be at least two increasing token counts >= 0, got {list(short_edges)}")
    if texts_per_bucket < 2:
        raise UserError("texts_per_bucket must be >= 2 (pairwise statistics need two texts)")
    if sigma_a_texts is not None and sigma_a_texts < 1:
        raise UserError("sigma_a_texts must be >= 1 (or None for all texts)")
    if batch_size < 1:
        raise UserError("batch_size must be >= 1")
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or not sources:
        raise UserError(f"sources must be some of {list(SOURCES)}, got {list(sources)}")
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
        embed_model = measure_cost_model(encoder, batch_size, max(to_embed + to_sigma))
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
    spec: CollapseSpec | None = None,
    *,
    method: str = "truncate",
    max_length: int | None = None,
    device: str | None = None,
    encoder_factory: Callable[..., Any] | None = None,
    **options: Any,
) -> CollapseResults:
    """Measure length collapse and write ``output_dir/collapse.json`` plus PNG plots.

    Why: the length-collapse paper shows that embeddings of longer texts crowd together
    (higher mean pairwise cosine) because attention filters out more high-frequency signal
    (smaller sigma_a); this measures both on real documents for any encoder, extension method
    and TempScale temperature, with the same documents at every length.

    Args:
        model: model folder or name, passed to ``load_encoder``.
        spec: a :class:`~longembed.collapse.spec.CollapseSpec`; its fields may also be given as
            keyword arguments (which replace the spec's):
        method, max_length, device: the context-window extension method, its target length, the device.
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
        **options: the spec's fields, and more ``load_encoder`` options (e.g. ``scale="per_document"``).
    """
    started = time.perf_counter()
    given = {name: options.pop(name) for name in list(options) if name in SPEC_FIELDS}
    spec = CollapseSpec(**given) if spec is None else dataclasses.replace(spec, **given)
    factory = EncoderFactory(model, method, max_length, device, options, encoder_factory or load_encoder)
    plan = plan_collapse(spec, factory)
    result = CollapseResults(config=_collapse_config(plan))
    out_file = Path(spec.output_dir) / COLLAPSE_FILE
    for tau in plan.taus:
        entries: list[BucketStats] = []
        result.temperatures[str(tau)] = entries
        for bucket in plan.buckets:
            entries.append(plan.measurer.measure(bucket, plan.overhead, tau))
            result.save(out_file)  # partial results of long runs are kept (complete is still False)
    result.config["elapsed_seconds"] = round(time.perf_counter() - started, 1)
    metrics = ["mean_pairwise_cosine", "spread", "mean_norm"] + (["sigma_a"] if spec.with_sigma_a else [])
    result.config["plots"] = [p.name for p in plot_collapse(result, Path(spec.output_dir), metrics)]
    result.complete = True
    result.save(out_file)
    return result


SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(CollapseSpec))


@dataclass
class CollapsePlan:
    """What a collapse run measures, decided before the first vector: the encoder, the documents, the
    lengths kept and skipped, the buckets, and the estimate."""

    spec: CollapseSpec
    factory: EncoderFactory
    taus: list[float]
    cached: CachedEncoder
    measurer: _Measurer
    documents: list[Any]
    per_source: dict[str, int]
    overhead: int
    kept: list[int] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    buckets: list[Bucket] = field(default_factory=list)
    selected_ids: list[str] = field(default_factory=list)
    n_qualified: int | None = None
    edges: list[int] = field(default_factory=list)
    estimate: dict[str, Any] = field(default_factory=dict)


def plan_collapse(spec: CollapseSpec, factory: EncoderFactory) -> CollapsePlan:
    """Check the arguments (before any model or data loads), build the cached encoder, load the
    documents, choose the lengths, build the buckets and print the estimate."""
    if spec.data_dir is None or spec.output_dir is None:
        raise UserTypeError("run_collapse needs data_dir and output_dir")
    taus = check_arguments(spec.temperatures, spec.lengths, spec.short_edges, spec.texts_per_bucket,
                           spec.sigma_a_texts, spec.batch_size, spec.sources)
    if "temperature" in factory.options:
        raise UserError("pass TempScale taus as temperatures=[...], not as an encoder option")
    cached = cached_encoder(factory(), EvalSpec(cache_dir=spec.cache_dir, use_cache=spec.use_cache,
                                                batch_size=spec.batch_size, show_progress=spec.show_progress_bar,
                                                log=spec.say))
    documents = load_long_documents(spec.data_dir, spec.sources)
    per_source = {s: sum(d.source == s for d in documents) for s in dict.fromkeys(spec.sources)}
    log.info("loaded %d documents %s from %s", len(documents), per_source, spec.data_dir)
    plan = CollapsePlan(spec, factory, taus, cached, _Measurer(cached, spec.with_sigma_a, spec.sigma_a_texts),
                        documents, per_source, sum(special_token_layout(cached.tokenizer)))
    _choose_lengths(plan)
    _build_buckets(plan)
    plan.estimate = plan.measurer.estimate(plan.buckets, plan.overhead, taus, spec.batch_size)
    (spec.say or (lambda _message: None))(
        f"collapse: {len(plan.buckets)} buckets x {len(taus)} temperature(s): {plan.estimate['texts_to_embed']} "
        f"texts to embed, {plan.estimate['sigma_a_to_compute']} sigma_a to compute (the rest cached); estimated "
        f"{format_duration(plan.estimate['seconds'])} (timed warm-up on this machine; rough)"
    )
    return plan


def _choose_lengths(plan: CollapsePlan) -> None:
    """Keep the lengths the encoder takes whole; skip (and log) the others."""
    capacity, method = plan.cached.max_length, plan.factory.method
    for length in dict.fromkeys(int(x) for x in plan.spec.lengths):
        if length <= plan.overhead:
            reason = f"shorter than the {plan.overhead} special tokens"
        elif capacity is not None and length > capacity:
            reason = f"above the encoder's max_length {capacity} (method {method!r})"
        else:
            plan.kept.append(length)
            continue
        log.warning("skipping length %d: %s", length, reason)
        plan.skipped.append({"length": length, "reason": reason})


def _build_buckets(plan: CollapsePlan) -> None:
    """The prefix buckets of the kept lengths, then the short buckets (spans of the same documents)."""
    spec, tokenizer, overhead, capacity = plan.spec, plan.cached.tokenizer, plan.overhead, plan.cached.max_length
    if plan.kept:
        prefix = build_length_buckets(plan.documents, tokenizer, [x - overhead for x in plan.kept],
                                      spec.texts_per_bucket, spec.seed)
        plan.buckets.extend(prefix)
        plan.selected_ids = list(prefix[0].doc_ids)
        plan.n_qualified = prefix[0].n_available
        if not plan.selected_ids:
            log.warning("no document is long enough for %d tokens: no prefix bucket", max(plan.kept))
    selected = set(plan.selected_ids)
    span_docs = [d for d in plan.documents if d.doc_id in selected] if selected else plan.documents
    usable = [int(e) for e in (spec.short_edges or [])]
    while len(usable) >= 2 and capacity is not None and usable[-1] - 1 + overhead > capacity:
        plan.skipped.append({"short_interval": [usable[-2], usable[-1]],
                             "reason": f"above the encoder's max_length {capacity}"})
        log.warning("skipping short interval [%d, %d): above max_length %d", usable[-2], usable[-1], capacity)
        usable.pop()
    if len(usable) >= 2:
        plan.buckets.extend(build_short_buckets(span_docs, tokenizer, usable, spec.texts_per_bucket, spec.seed))
    plan.edges = usable if len(usable) >= 2 else []
    if not any(b.texts for b in plan.buckets):
        raise UserError(
            f"nothing to measure: no bucket has texts (lengths {list(spec.lengths)} with max_length {capacity}; "
            f"skipped: {plan.skipped})"
        )


def _collapse_config(plan: CollapsePlan) -> dict[str, Any]:
    """What collapse.json records of the run (its ``config``)."""
    spec, factory, cached = plan.spec, plan.factory, plan.cached
    return {
        "model": str(factory.model),
        "method": factory.method,
        "max_length": factory.max_length,
        "encoder_max_length": cached.max_length,
        "original_length": cached.original_length,
        "special_tokens_per_text": plan.overhead,
        "length_unit": "tokens seen by the model incl. special tokens (content = length - special tokens)",
        "lengths_requested": [int(x) for x in spec.lengths],
        "lengths": plan.kept,
        "short_edges_content_tokens": plan.edges,
        "skipped": plan.skipped,
        "temperatures": plan.taus,
        "data_dir": str(spec.data_dir),
        "sources": list(dict.fromkeys(spec.sources)),
        "documents_per_source": plan.per_source,
        "n_documents": len(plan.documents),
        "n_documents_long_enough": plan.n_qualified,
        "selected_documents": plan.selected_ids,
        "document_start": "seeded random sentence/paragraph start, same for every length",
        "texts_per_bucket": spec.texts_per_bucket,
        "sigma_a_texts_per_bucket": (
            (spec.sigma_a_texts if spec.sigma_a_texts is not None else "all") if spec.with_sigma_a else 0
        ),
        "batch_size": spec.batch_size,
        "seed": spec.seed,
        "encoder_options": json_safe(dict(factory.options)),
        "encoder": repr(cached.encoder),
        "embeddings": "pooled, before L2 normalization (normalize_embeddings=False)",
        "sigma_a_method": (
            "mean over texts of longembed.collapse.attention_sigma_a (last layer, mean over heads; "
            f"for pcw the mean over windows). {SIGMA_A_METHOD}"
            if spec.with_sigma_a
            else None
        ),
        "cache_dir": None if cached.cache is None else str(cached.cache.root),
        "estimate": plan.estimate,
        "versions": library_versions(),
    }
