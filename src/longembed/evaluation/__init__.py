"""Scoring retrieval: metrics, the BM25 baseline, the embedding cache, and the benchmark runner.

``evaluate_model`` runs the LongEmbed benchmark (``runner``); ``CachedEncoder`` wraps any encoder
with the on-disk embedding cache (``cache``); ``sweep_temperature`` chooses a TempScale tau
on one task and scores it on the others (``sweep_runner``); ``retrieval_metrics`` computes nDCG, MRR,
recall and accuracy@1 of a ranking (``metrics``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.evaluation.cache import CachedEncoder
    from longembed.evaluation.metrics import evaluate_scores, rank, retrieval_metrics
    from longembed.evaluation.runner import evaluate_model
    from longembed.evaluation.sweep_runner import sweep_temperature
    from longembed.retrieval.bm25 import BM25Model

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
