"""Length collapse: measure how embeddings of longer texts crowd together, and sigma_a.

Building blocks (see each module): ``spectral`` (sigma_a of attention matrices, dense and
blockwise), ``sigma`` (sigma_a of an encoder on real texts, through its attention-observer hook),
``corpus`` (long real documents), ``buckets`` (texts cut to exact token lengths), ``metrics``
(pairwise cosine, spread, norms), ``plots``, and ``run`` (``longembed collapse``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: see longembed.lazy)
_EXPORTS = {
    "Bucket": "longembed.collapse.buckets",
    "build_length_buckets": "longembed.collapse.buckets",
    "build_short_buckets": "longembed.collapse.buckets",
    "count_tokens": "longembed.collapse.buckets",
    "cut_to_tokens": "longembed.collapse.buckets",
    "SOURCES": "longembed.collapse.corpus",
    "Document": "longembed.collapse.corpus",
    "load_long_documents": "longembed.collapse.corpus",
    "embedding_statistics": "longembed.collapse.metrics",
    "plot_collapse": "longembed.collapse.plots",
    "run_collapse": "longembed.collapse.run",
    "attention_sigma_a": "longembed.collapse.sigma",
    "SIGMA_A_METHOD": "longembed.collapse.spectral",
    "sigma_a_blockwise": "longembed.collapse.spectral",
    "sigma_a_dense": "longembed.collapse.spectral",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from longembed.collapse.buckets import (
        Bucket,
        build_length_buckets,
        build_short_buckets,
        count_tokens,
        cut_to_tokens,
    )
    from longembed.collapse.corpus import SOURCES, Document, load_long_documents
    from longembed.collapse.metrics import embedding_statistics
    from longembed.collapse.plots import plot_collapse
    from longembed.collapse.run import run_collapse
    from longembed.collapse.sigma import attention_sigma_a
    from longembed.collapse.spectral import SIGMA_A_METHOD, sigma_a_blockwise, sigma_a_dense

__all__ = [
    "Bucket",
    "Document",
    "SIGMA_A_METHOD",
    "SOURCES",
    "attention_sigma_a",
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
