"""The dtype an index is built in: ``auto`` follows an existing index's, else the device's choice, and bfloat16
only once a seeded sample of the user's own documents, embedded both ways, stays within cosine 0.999 of float32.

The dtype is recorded in the index (``dtype`` in its metadata); a query encoder opened for it runs the same.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from longembed.config import DTYPE_AUTO
from longembed.encoder import LongContextEncoder
from longembed.precision import Precision, min_cosine, resolve_dtype
from longembed.retrieval.strategy import Strategy
from longembed.search.embedding import DocumentEmbedder
from longembed.search.sources import Document
from longembed.search.strategy_encoder import load_strategy_encoder, recorded_dtype

#: documents of the user's embedded in both precisions before a build runs in bfloat16
SAMPLE_DOCUMENTS = 32
#: characters of the sample in all (about 8k tokens), shared evenly by its documents, each cut to its share:
#: the float32 half of the check is work the build throws away (32 whole essays took 73 s of a 174 s build,
#: benchmarks/RESULTS.md, "Index build ... on a CPU with AMX"); a few documents are read longer
SAMPLE_CHARS = 32_768
SAMPLE_SEED = 0
#: the least cosine, over every vector of the sample, between bfloat16's vector and float32's
MIN_COSINE = 0.999


@dataclass(frozen=True)
class PrecisionCheck:
    """The dtype a build runs in, why (one line), and the sample comparison when there was one."""

    dtype: str
    reason: str
    min_cosine: float | None = None
    vectors: int = 0  # vectors compared (0: no comparison)

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "reason": self.reason, "min_cosine": self.min_cosine, "vectors": self.vectors}


def requested_dtype(strategy: Strategy) -> str:
    """The strategy's ``dtype`` option (float32 when it has none: eval's default)."""
    return str(strategy.encoder_options.get("dtype", "float32"))


def with_dtype(strategy: Strategy, dtype: str) -> Strategy:
    """``strategy`` running in ``dtype``, spelled one way: float32, the default, is no option at all (an index
    built before the dtype was recorded has the same config as one built in float32 now)."""
    options = {key: value for key, value in strategy.encoder_options.items() if key != "dtype"}
    if dtype != "float32":
        options["dtype"] = dtype
    return replace(strategy, encoder_options=options)


def sample_documents(documents: Sequence[Document], size: int = SAMPLE_DOCUMENTS, seed: int = SAMPLE_SEED,
                     chars: int = SAMPLE_CHARS) -> list[Document]:
    """``size`` of ``documents`` drawn with ``seed`` (all of them when fewer), in their order, each cut to its
    first ``chars // size`` characters (its share of the sample), so the check costs the same on any corpus."""
    everything = range(len(documents))
    chosen = everything if len(documents) <= size else sorted(random.Random(seed).sample(everything, size))
    share = max(chars // max(len(chosen), 1), 1)
    return [replace(documents[i], text=documents[i].text[:share]) for i in chosen]


def build_encoder(strategy: Strategy, documents: Sequence[Document], device: str | None,
                  recorded: Mapping[str, Any] | None, batch_size: int = 16
                  ) -> tuple[Strategy, LongContextEncoder, PrecisionCheck]:
    """(the strategy with its dtype decided, its encoder, why that dtype) for a build of ``documents``.

    An explicit dtype is kept (a different one than an existing index's is refused by the build); ``auto``
    follows ``recorded`` (the existing index's metadata, None for a new index), else
    :func:`~longembed.precision.resolve_dtype`, and a bfloat16 choice must pass :func:`compare_on_sample`."""
    requested = requested_dtype(strategy)
    if requested != DTYPE_AUTO:
        chosen = with_dtype(strategy, requested)
        return chosen, load_strategy_encoder(chosen, device), PrecisionCheck(requested, f"{requested} (asked for)")
    if recorded is not None:
        dtype = recorded_dtype(recorded)
        chosen = with_dtype(strategy, dtype)
        return chosen, load_strategy_encoder(chosen, device), PrecisionCheck(dtype, f"{dtype} (auto: the index's own)")
    choice = resolve_dtype(DTYPE_AUTO, device, strategy.encoder_options.get("quantization"))
    if choice.dtype == "float32":
        chosen = with_dtype(strategy, "float32")
        return chosen, load_strategy_encoder(chosen, device), PrecisionCheck("float32", choice.reason)
    return compare_on_sample(strategy, documents, device, choice, batch_size)


def compare_on_sample(strategy: Strategy, documents: Sequence[Document], device: str | None, choice: Precision,
                      batch_size: int = 16) -> tuple[Strategy, LongContextEncoder, PrecisionCheck]:
    """Embed :func:`sample_documents` as the build embeds them in ``choice.dtype`` and in float32: the
    reduced encoder when every vector is within :data:`MIN_COSINE` of float32's, else the float32 one."""
    reduced_strategy = with_dtype(strategy, choice.dtype)
    reduced = load_strategy_encoder(reduced_strategy, device)
    sample = sample_documents(documents)
    if not sample:
        return reduced_strategy, reduced, PrecisionCheck(choice.dtype, f"{choice.reason}; no document to check it on")
    full_strategy = with_dtype(strategy, "float32")
    full = load_strategy_encoder(full_strategy, device)
    low = DocumentEmbedder(reduced_strategy, reduced, batch_size).rows(sample).vectors
    high = DocumentEmbedder(full_strategy, full, batch_size).rows(sample).vectors
    assert low is not None and high is not None  # a dense strategy's rows have vectors
    agreement = min_cosine(high, low)
    measured = (f"{len(high)} vectors of {len(sample)} of your documents (at most {SAMPLE_CHARS // len(sample):,} "
                f"characters of each), least cosine to float32 {agreement:.5f}")
    if agreement >= MIN_COSINE:
        return reduced_strategy, reduced, PrecisionCheck(choice.dtype, f"{choice.reason}; checked: {measured}",
                                                         agreement, len(high))
    return full_strategy, full, PrecisionCheck(
        "float32", f"float32: {choice.dtype} was checked and fell below cosine {MIN_COSINE} of float32 ({measured}), "
                   "so this build runs in float32", agreement, len(high))
