"""Contrastive training of an embedding model, on sentence-transformers' trainer: the project's one trainer.

Position tuning (LongEmbed, Appendix B) and JinaBERT's stages II and III (Jina v2, section 5) both
train through :func:`train_contrastive`.  The loss is sentence-transformers'
``MultipleNegativesRankingLoss`` (:func:`info_nce_loss`), with s the cosine similarity and tau the
temperature (``scale = 1 / tau``).  For a batch of k rows (q_i, p_i, n_{i,1..m}):

- ``symmetric=False`` (E5, LongEmbed's tuning): mean over i of
  -ln( e^{s(q_i,p_i)/tau} / sum_j [ e^{s(q_i,p_j)/tau} + sum_l e^{s(q_i,n_{j,l})/tau} ] ),
  in-batch positives and every row's hard negatives in the denominator.
- ``symmetric=True`` (Jina v2): that term plus the passage-to-query term
  -ln( e^{s(p_i,q_i)/tau} / sum_j e^{s(p_i,q_j)/tau} ), each direction with its own softmax
  (``partition_mode="per_direction"``).  With no hard negatives this is equation (3) + (4); with
  them, equation (5).  sentence-transformers averages the two directions where the paper adds
  them: the loss is half the paper's, which only rescales the gradient (Adam is invariant to it).

``tests/training/test_training.py`` checks the loss against a naive loop over these formulas.

sentence-transformers, ``datasets`` and ``accelerate`` are the ``training`` extra; without them this
module imports, and training raises an ImportError that says what to install.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from longembed.errors import MissingExtraError, UserError
from longembed.training.config import ContrastiveConfig
from longembed.training.data import TrainingPair
from longembed.training.runs import (
    CHECKPOINTS,
    AtomicCheckpoints,
    TrainingSummary,
    checkpoint_step,
    resume_point,
    run_trainer,
    shared_trainer_arguments,
)

try:  # the ``training`` extra
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    TRAINING_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    TRAINING_IMPORT_ERROR = exc
    SentenceTransformerDataCollator = SentenceTransformerTrainer = object  # type: ignore[assignment,misc]


class ContrastiveTrainer(AtomicCheckpoints, SentenceTransformerTrainer):  # type: ignore[misc,valid-type]
    """sentence-transformers' trainer with atomic checkpoints (:class:`~longembed.training.runs.AtomicCheckpoints`)."""


def require_training_extra() -> None:
    """Raise a clear ImportError when the ``training`` extra is missing."""
    if TRAINING_IMPORT_ERROR is not None:
        raise MissingExtraError(
            f"training needs sentence-transformers, datasets and accelerate ({TRAINING_IMPORT_ERROR}): "
            "pip install 'longembed[training]'"
        )


def info_nce_loss(model: SentenceTransformer, temperature: float, symmetric: bool) -> MultipleNegativesRankingLoss:
    """InfoNCE with in-batch and hard negatives (module docstring for the exact formula)."""
    require_training_extra()
    directions = ("query_to_doc", "doc_to_query") if symmetric else ("query_to_doc",)
    return MultipleNegativesRankingLoss(
        model, scale=1.0 / temperature, directions=directions, partition_mode="per_direction"
    )


def pairs_dataset(pairs: Sequence[TrainingPair], hard_negatives: int, seed: int = 0) -> Dataset:
    """Columns query, positive, negative_1..negative_m (m = ``hard_negatives``).

    A pair with fewer than m hard negatives is filled with random positives of other groups (random
    negatives, as LongEmbed's Appendix A does for NLI, which has one hard negative per example), never
    with its own positive (two groups may share a paragraph).
    """
    require_training_extra()
    if not pairs:
        raise UserError("no training pairs")
    rng = random.Random(f"longembed-negatives:{seed}")
    columns: dict[str, list[str]] = {"query": [], "positive": []}
    for j in range(hard_negatives):
        columns[f"negative_{j + 1}"] = []
    for pair in pairs:
        columns["query"].append(pair.query)
        columns["positive"].append(pair.positive)
        negatives = list(pair.negatives[:hard_negatives])
        while len(negatives) < hard_negatives:
            other = pairs[rng.randrange(len(pairs))]
            if other.group != pair.group and other.positive != pair.positive and other.positive not in negatives:
                negatives.append(other.positive)
        for j, text in enumerate(negatives):
            columns[f"negative_{j + 1}"].append(text)
    return Dataset.from_dict(columns)


#: (model, column prompts) -> a sentence-transformers data collator
CollatorFactory = Callable[[Any, dict[str, str]], Any]
#: model -> the loss module to train it with
LossFactory = Callable[[Any], torch.nn.Module]


def train_contrastive(
    model: SentenceTransformer,
    pairs: Sequence[TrainingPair],
    output_dir: Path | str,
    config: ContrastiveConfig,
    prompts: dict[str, str] | None = None,
    collator: CollatorFactory | None = None,
    run_identity: dict[str, Any] | None = None,
    loss: LossFactory | None = None,
) -> TrainingSummary:
    """Train ``model`` in place on ``pairs``; checkpoints in ``output_dir/checkpoints``, resumed after a kill.

    ``prompts`` maps the columns (query, positive, negative_j) to prefixes (e.g. E5's "query: ").
    ``collator`` builds the data collator from (model, prompts), e.g. PoSE's position ids.
    ``run_identity`` (method, model, data, ...) is stored with the checkpoints: a resumed run must
    be the same run, else a ValueError says so instead of silently mixing two trainings.
    ``loss`` builds another loss from the model (default: :func:`info_nce_loss` of the config).
    """
    require_training_extra()
    output_dir = Path(output_dir)
    checkpoint_dir = output_dir / CHECKPOINTS
    identity = {"config": config.to_dict(), **(run_identity or {})}
    resume = resume_point(checkpoint_dir, identity)
    if config.max_seq_length is not None:
        model.max_seq_length = config.max_seq_length
    dataset = pairs_dataset(pairs, config.hard_negatives, config.seed)
    column_prompts = _column_prompts(dataset.column_names, prompts or {})
    args = SentenceTransformerTrainingArguments(
        **shared_trainer_arguments(config, checkpoint_dir),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        use_cpu=config.device == "cpu" or (config.device is None and not torch.cuda.is_available()),
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        prompts=column_prompts or None,
        dataloader_drop_last=True,
    )
    data_collator = collator(model, column_prompts) if collator is not None else None
    if resume is not None and hasattr(data_collator, "skip_to"):  # draws that depend on the batch index (PoSE)
        data_collator.skip_to(checkpoint_step(resume))  # one batch per step: no gradient accumulation here
    trainer = ContrastiveTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        loss=loss(model) if loss is not None else info_nce_loss(model, config.temperature, config.symmetric),
        data_collator=data_collator,
    )
    return run_trainer(trainer, checkpoint_dir, identity, resume, config.batch_size).summary


def _column_prompts(columns: Sequence[str], prompts: dict[str, str]) -> dict[str, str]:
    """Prompts per dataset column: 'query' for the query column, 'document' for the others."""
    out = {}
    for column in columns:
        prompt = prompts.get("query" if column == "query" else "document", "")
        if prompt:
            out[column] = prompt
    return out
