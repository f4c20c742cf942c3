"""Length collapse: measure how embeddings of longer texts crowd together, and sigma_a.

Building blocks (see each module): ``spectral`` (sigma_a of attention matrices, dense and
blockwise), ``sigma`` (sigma_a of an encoder on real texts, through its attention-observer hook),
``corpus`` (long real documents), ``buckets`` (texts cut to exact token lengths), ``metrics``
(pairwise cosine, spread, norms), ``plots``, ``defaults`` (lengths and sample sizes), and ``study``
(``longembed collapse``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

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
    from longembed.collapse.sigma import attention_sigma_a
    from longembed.collapse.spectral import SIGMA_A_METHOD, sigma_a_blockwise, sigma_a_dense
    from longembed.collapse.study import run_collapse

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
