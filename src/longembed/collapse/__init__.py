"""Length collapse: measure how embeddings of longer texts crowd together, and sigma_a.

Building blocks (see each module): ``spectral`` (sigma_a of attention matrices, dense and
blockwise), ``corpus`` (long real documents), ``buckets`` (texts cut to exact token lengths),
``metrics`` (pairwise cosine, spread, norms), ``plots``, and ``run`` (``longembed collapse``).
``run_collapse`` and ``plot_collapse`` are imported lazily (they pull in matplotlib).
"""

from __future__ import annotations

from typing import Any

from .buckets import Bucket, build_length_buckets, build_short_buckets, count_tokens, cut_to_tokens
from .corpus import SOURCES, Document, load_long_documents
from .metrics import embedding_statistics
from .spectral import SIGMA_A_METHOD, sigma_a_blockwise, sigma_a_dense

__all__ = [
    "SIGMA_A_METHOD",
    "SOURCES",
    "Bucket",
    "Document",
    "build_length_buckets",
    "build_short_buckets",
    "count_tokens",
    "cut_to_tokens",
    "embedding_statistics",
    "load_long_documents",
    "plot_collapse",
    "run_collapse",
    "sigma_a_blockwise",
    "sigma_a_dense",
]


def __getattr__(name: str) -> Any:
    if name == "run_collapse":
        from .run import run_collapse

        return run_collapse
    if name == "plot_collapse":
        from .plots import plot_collapse

        return plot_collapse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
