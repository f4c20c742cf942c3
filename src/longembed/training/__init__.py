"""Training: LongEmbed's position tuning and the contrastive trainer it shares with the JinaBERT recipe.

``tune_positions`` (``longembed tune``) extends an APE model with PI or RP and trains only the new
position rows; ``train_contrastive`` is the one contrastive trainer (sentence-transformers'); the
benchmark-safe training data is in ``training.data``; ``train_jina`` (``longembed train jina``) runs the
Jina v2 recipe: MLM pre-training (``mlm/``), then pairs and hard negatives (``jina/``); ``retrofit_alibi``
(``longembed retrofit``) turns a BERT into a JinaBERT with ALiBi by distillation (``retrofit/``); what
every run shares (checkpoints, resuming, the summary) is in ``runs``.  Needs the
``training`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.training.config import ContrastiveConfig, default_tuning_config
    from longembed.training.contrastive import info_nce_loss, train_contrastive
    from longembed.training.data import TrainingPair, mlm_documents, read_pairs_jsonl, training_pairs
    from longembed.training.jina import JinaRecipeConfig, train_jina
    from longembed.training.mlm import mlm_accuracy_by_length, train_mlm
    from longembed.training.retrofit import RetrofitConfig, RetrofitResult, retrofit_alibi
    from longembed.training.runs import TrainingSummary
    from longembed.training.tune import TuningResult, tune_positions

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
