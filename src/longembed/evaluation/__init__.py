"""Scoring retrieval: metrics, the BM25 baseline, the embedding cache, and the benchmark runner.

``evaluate_model`` runs the LongEmbed benchmark (``runner``); ``CachedEncoder`` wraps any encoder
with the on-disk embedding cache (``cached_encoder``); ``sweep_temperature`` chooses a TempScale tau
on one task and scores it on the others (``sweep``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: see longembed.lazy)
_EXPORTS = {
    "BM25Model": "longembed.evaluation.bm25",
    "CachedEncoder": "longembed.evaluation.cached_encoder",
    "evaluate": "longembed.evaluation.metrics",
    "evaluate_scores": "longembed.evaluation.metrics",
    "rank": "longembed.evaluation.metrics",
    "evaluate_model": "longembed.evaluation.runner",
    "sweep_temperature": "longembed.evaluation.sweep",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from longembed.evaluation.bm25 import BM25Model
    from longembed.evaluation.cached_encoder import CachedEncoder
    from longembed.evaluation.metrics import evaluate, evaluate_scores, rank
    from longembed.evaluation.runner import evaluate_model
    from longembed.evaluation.sweep import sweep_temperature

__all__ = [
    "BM25Model",
    "CachedEncoder",
    "evaluate",
    "evaluate_model",
    "evaluate_scores",
    "rank",
    "sweep_temperature",
]
