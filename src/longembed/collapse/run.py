"""``longembed collapse``: measure length collapse of an encoder on real text.

For every temperature (TempScale tau) and every length bucket this embeds the bucket's texts
and records the paper's diagnostics: the mean pairwise cosine similarity (Figure 1c), the
spread and norms of the embeddings, and sigma_a of the last layer's attention (Figure 7).
Results go to ``OUTPUT/collapse.json`` and one PNG per metric.

Lengths are reported as the number of tokens the model sees, special tokens included, so a
bucket of length 512 fills a 512-token window exactly.  The texts are cut to
``length - (number of special tokens)`` content tokens.  Lengths the encoder cannot take
whole (above its ``max_length``) are skipped and logged, never truncated silently.
"""

from __future__ import annotations

import inspect
import json
import logging
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longembed.evaluation.runner import json_safe

from .buckets import Bucket, build_length_buckets, build_short_buckets
from .corpus import SOURCES, load_long_documents
from .metrics import embedding_statistics
from .plots import plot_collapse
from .spectral import SIGMA_A_METHOD

__all__ = ["DEFAULT_LENGTHS", "DEFAULT_SHORT_EDGES", "run_collapse"]

log = logging.getLogger(__name__)

DEFAULT_LENGTHS: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096)
DEFAULT_SHORT_EDGES: tuple[int, ...] = (0, 100, 200, 300, 400, 500)
RESULT_FILE = "collapse.json"


def _special_token_count(tokenizer: Any) -> int:
    """How many tokens the tokenizer adds around the content of one text."""
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    return len(with_special) - len(plain)


def _capacity(encoder: Any, max_length: int | None, tokenizer: Any) -> int | None:
    """The most tokens (special tokens included) the encoder takes without truncating."""
    for value in (
        getattr(encoder, "max_length", None),
        max_length,
        getattr(tokenizer, "model_max_length", None),
    ):
        if isinstance(value, int) and 0 < value < 1_000_000:
            return value
    return None


def _versions() -> dict[str, str]:
    import torch
    import transformers

    import longembed

    return {
        "longembed": getattr(longembed, "__version__", "?"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def _sigma_a(encoder: Any, texts: list[str], batch_size: int, show_progress_bar: bool) -> np.ndarray:
    """Per-text sigma_a from the encoder, passing only the keyword arguments it accepts."""
    method = encoder.attention_sigma_a
    params = inspect.signature(method).parameters
    kwargs: dict[str, Any] = {}
    if "batch_size" in params:
        kwargs["batch_size"] = batch_size
    if "show_progress_bar" in params:
        kwargs["show_progress_bar"] = show_progress_bar
    values = np.asarray(method(texts, **kwargs), dtype=np.float64).reshape(-1)
    if values.shape[0] != len(texts):
        raise ValueError(f"attention_sigma_a returned {values.shape[0]} values for {len(texts)} texts")
    return values


def _measure(
    encoder: Any,
    bucket: Bucket,
    overhead: int,
    batch_size: int,
    show_progress_bar: bool,
    with_sigma_a: bool,
    sigma_a_texts: int | None = None,
) -> dict[str, Any]:
    """All metrics of one bucket under one encoder."""
    entry: dict[str, Any] = {"kind": bucket.kind}
    if bucket.kind == "prefix":
        entry["length"] = bucket.length + overhead
        entry["content_tokens"] = bucket.length
    else:
        mean_content = float(np.mean(bucket.token_lengths)) if bucket.token_lengths else float("nan")
        entry["length"] = mean_content + overhead
        entry["content_token_range"] = [bucket.length, bucket.upper]
        entry["mean_content_tokens"] = mean_content
    entry["n_texts"] = len(bucket.texts)
    entry["n_documents"] = len(set(bucket.doc_ids))
    if not bucket.texts:
        return entry
    started = time.perf_counter()
    raw = encoder.encode(
        bucket.texts, batch_size=batch_size, normalize_embeddings=False, show_progress_bar=show_progress_bar
    )
    entry["encode_seconds"] = round(time.perf_counter() - started, 3)
    entry.update(embedding_statistics(np.asarray(raw)))
    entry.pop("n", None)
    if with_sigma_a:
        started = time.perf_counter()
        texts = bucket.texts if sigma_a_texts is None else bucket.texts[:sigma_a_texts]
        sig = _sigma_a(encoder, texts, batch_size, show_progress_bar)
        entry["sigma_a_n_texts"] = len(texts)
        entry["sigma_a_seconds"] = round(time.perf_counter() - started, 3)
        entry.update(
            sigma_a=float(sig.mean()),
            sigma_a_std=float(sig.std()),
            sigma_a_min=float(sig.min()),
            sigma_a_max=float(sig.max()),
        )
    return entry


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
    texts_per_bucket: int = 64,
    batch_size: int = 8,
    seed: int = 0,
    show_progress_bar: bool = True,
    sources: Sequence[str] = SOURCES,
    with_sigma_a: bool = True,
    sigma_a_texts: int | None = None,
    encoder_factory: Callable[..., Any] | None = None,
    **encoder_options: Any,
) -> dict[str, Any]:
    """Measure length collapse and write ``output_dir/collapse.json`` plus PNG plots.

    Why: the length-collapse paper shows that embeddings of longer texts crowd together
    (higher mean pairwise cosine) because attention filters out more high-frequency signal
    (smaller sigma_a); this measures both on real documents for any encoder, extension method
    and TempScale temperature, with the same documents at every length.

    Args:
        model: model folder or name, passed to ``load_encoder``.
        method, max_length: the context-window extension method and its target length.
        temperatures: TempScale taus; one encoder is loaded per temperature.
        data_dir: folder in the shared data layout (essays, SQuALITY, QMSum).
        output_dir: where ``collapse.json`` and ``collapse_<metric>.png`` go.
        lengths: bucket lengths in tokens seen by the model (special tokens included); the
            texts are the same documents cut to each length.  Lengths above the encoder's
            ``max_length`` are skipped (logged, listed under ``config.skipped_lengths``).
        short_edges: the paper's short intervals in content tokens (spans of the same
            documents), or None / empty for none.
        texts_per_bucket: texts per bucket (documents for the prefix buckets).
        batch_size, show_progress_bar: passed to the encoder.
        seed: document selection, start positions and spans.
        sources: which document sources to use.
        with_sigma_a: also measure sigma_a (the slow part at long lengths).
        sigma_a_texts: measure sigma_a on only the first this many texts of each bucket
            (None: all); the embedding statistics always use all texts.
        encoder_factory: replaces ``longembed.load_encoder`` (tests); called as
            ``factory(model, method=..., max_length=..., temperature=tau, **encoder_options)``.
        **encoder_options: more ``load_encoder`` options (e.g. ``scale="per_document"``).

    Returns:
        The result dict that was written to ``collapse.json``.
    """
    if not temperatures:
        raise ValueError("give at least one temperature")
    if sigma_a_texts is not None and sigma_a_texts < 1:
        raise ValueError("sigma_a_texts must be >= 1 (or None for all texts)")
    if texts_per_bucket < 2:
        raise ValueError("texts_per_bucket must be >= 2 (pairwise statistics need two texts)")
    temperatures = [float(t) for t in temperatures]
    if len(set(temperatures)) != len(temperatures):
        raise ValueError(f"repeated temperature in {temperatures}")
    if encoder_factory is None:
        from longembed import load_encoder as encoder_factory
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    documents = load_long_documents(data_dir, sources)
    per_source = {s: sum(d.source == s for d in documents) for s in dict.fromkeys(sources)}
    log.info("loaded %d documents %s from %s", len(documents), per_source, data_dir)

    def load(tau: float) -> Any:
        return encoder_factory(
            model, method=method, max_length=max_length, temperature=tau, **encoder_options
        )

    encoder = load(temperatures[0])
    tokenizer = encoder.tokenizer
    overhead = _special_token_count(tokenizer)
    capacity = _capacity(encoder, max_length, tokenizer)
    if capacity is None:
        log.warning("could not determine the encoder's max_length: no length is skipped")

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
        prefix = build_length_buckets(
            documents, tokenizer, [x - overhead for x in kept], texts_per_bucket, seed
        )
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
            skipped.append(
                {
                    "short_interval": [usable[-2], usable[-1]],
                    "reason": f"above the encoder's max_length {capacity}",
                }
            )
            log.warning(
                "skipping short interval [%d, %d): above max_length %d", usable[-2], usable[-1], capacity
            )
            usable.pop()
        if len(usable) >= 2:
            buckets.extend(build_short_buckets(span_docs, tokenizer, usable, texts_per_bucket, seed))
        edges = usable if len(usable) >= 2 else []

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
        "temperatures": temperatures,
        "data_dir": str(data_dir),
        "sources": list(dict.fromkeys(sources)),
        "documents_per_source": per_source,
        "n_documents": len(documents),
        "n_documents_long_enough": n_qualified,
        "selected_documents": selected_ids,
        "document_start": "seeded random sentence/paragraph start, same for every length",
        "texts_per_bucket": texts_per_bucket,
        "sigma_a_texts_per_bucket": sigma_a_texts if with_sigma_a else 0,
        "batch_size": batch_size,
        "seed": seed,
        "encoder_options": json_safe(encoder_options),
        "encoder": repr(encoder),
        "embeddings": "pooled, before L2 normalization (normalize_embeddings=False)",
        "sigma_a_method": (
            "mean over texts of the encoder's attention_sigma_a (last layer, mean over heads; "
            f"for pcw the mean over windows). {SIGMA_A_METHOD}"
            if with_sigma_a
            else None
        ),
        "versions": _versions(),
    }
    result: dict[str, Any] = {"config": config, "temperatures": {}}
    out_file = output_dir / RESULT_FILE

    def save() -> None:
        out_file.write_text(json.dumps(json_safe(result), indent=2) + "\n", encoding="utf-8")

    for index, tau in enumerate(temperatures):
        if index > 0:
            del encoder
            encoder = load(tau)
        entries = []
        result["temperatures"][str(tau)] = {"buckets": entries}
        for bucket in buckets:
            what = (
                f"length {bucket.length + overhead}"
                if bucket.kind == "prefix"
                else f"short spans [{bucket.length}, {bucket.upper}) content tokens"
            )
            log.info("tau=%g: %s (%d texts)", tau, what, len(bucket.texts))
            entries.append(
                _measure(
                    encoder, bucket, overhead, batch_size, show_progress_bar, with_sigma_a, sigma_a_texts
                )
            )
            save()  # keep partial results of long runs
    config["elapsed_seconds"] = round(time.perf_counter() - started, 1)
    metrics = ["mean_pairwise_cosine", "spread", "mean_norm"] + (["sigma_a"] if with_sigma_a else [])
    config["plots"] = [p.name for p in plot_collapse(json_safe(result), output_dir, metrics)]
    save()
    return json_safe(result)
