"""Training: LongEmbed's position tuning and the contrastive trainer it shares with the JinaBERT recipe.

``tune_positions`` (``longembed tune``) extends an APE model with PI or RP and trains only the new
position rows; ``train_contrastive`` is the one contrastive trainer (sentence-transformers'); the
benchmark-safe training data is in ``training.data``; ``train_jina`` (``longembed train jina``) runs the
Jina v2 recipe: MLM pre-training (``mlm/``), then pairs and hard negatives (``jina/``); what every run
shares (checkpoints, resuming, the summary) is in ``runs``.  Needs the
``training`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: see longembed.lazy)
_EXPORTS = {
    "ContrastiveConfig": "longembed.training.config",
    "TrainingSummary": "longembed.training.runs",
    "info_nce_loss": "longembed.training.contrastive",
    "train_contrastive": "longembed.training.contrastive",
    "TrainingPair": "longembed.training.data",
    "mlm_documents": "longembed.training.data",
    "read_pairs_jsonl": "longembed.training.data",
    "training_pairs": "longembed.training.data",
    "JinaRecipeConfig": "longembed.training.jina",
    "train_jina": "longembed.training.jina",
    "mlm_accuracy_by_length": "longembed.training.mlm",
    "train_mlm": "longembed.training.mlm",
    "TuningResult": "longembed.training.tune",
    "default_tuning_config": "longembed.training.config",
    "tune_positions": "longembed.training.tune",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from longembed.training.config import ContrastiveConfig, default_tuning_config
    from longembed.training.contrastive import info_nce_loss, train_contrastive
    from longembed.training.data import TrainingPair, mlm_documents, read_pairs_jsonl, training_pairs
    from longembed.training.jina import JinaRecipeConfig, train_jina
    from longembed.training.mlm import mlm_accuracy_by_length, train_mlm
    from longembed.training.runs import TrainingSummary
    from longembed.training.tune import TuningResult, tune_positions

__all__ = [
    "ContrastiveConfig",
    "JinaRecipeConfig",
    "TrainingPair",
    "TrainingSummary",
    "TuningResult",
    "default_tuning_config",
    "info_nce_loss",
    "mlm_accuracy_by_length",
    "mlm_documents",
    "read_pairs_jsonl",
    "train_contrastive",
    "train_jina",
    "train_mlm",
    "training_pairs",
    "tune_positions",
]
