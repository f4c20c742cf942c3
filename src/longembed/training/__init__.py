"""Training: LongEmbed's position tuning and the contrastive trainer it shares with the JinaBERT recipe.

``tune_positions`` (``longembed tune``) extends an APE model with PI or RP and trains only the new
position rows; ``train_contrastive`` is the one contrastive trainer (sentence-transformers'); the
benchmark-safe training data is in ``training.data``; ``train_jina`` (``longembed train jina``) runs the
Jina v2 recipe: MLM pre-training (``mlm.py``), then pairs and hard negatives (``jina.py``).  Needs the
``training`` extra.
"""

from longembed.training.contrastive import (
    ContrastiveConfig,
    TrainingSummary,
    info_nce_loss,
    train_contrastive,
)
from longembed.training.data import TrainingPair, mlm_documents, read_pairs_jsonl, training_pairs
from longembed.training.jina import JinaRecipeConfig, train_jina
from longembed.training.mlm import mlm_accuracy_by_length, train_mlm
from longembed.training.tune import TuningResult, default_tuning_config, tune_positions

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
