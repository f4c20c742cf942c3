"""The retrofit's training loop: transformers' Trainer with the distillation loss, over the planned batches.

The Trainer brings what every longembed run has (``training.runs``): AdamW with a linear schedule,
checkpoints with the optimizer, scheduler and RNG states, resuming at the exact batch (the planned
batches are read in order, ``train_sampling_strategy="sequential"``, so a resumed run sees what an
uninterrupted one would), bf16/fp16 autocast, and a progress bar, which shows the loss here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import Trainer
from transformers.trainer_callback import ProgressCallback

from longembed.errors import UserError
from longembed.training.retrofit.pairs import PairInputs, contrastive_loss
from longembed.training.retrofit.targets import TeacherTargets
from longembed.training.runs import AtomicCheckpoints

#: The terms of the loss, logged beside it (``pairs_loss`` only with pairs).
LOSS_PARTS = ("pooled_loss", "token_loss", "pairs_loss")


def mean_pool(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The mean of each row's token states over its real tokens (attention_mask 1), as the teacher pools."""
    mask = attention_mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


def distillation_loss(
    student_states: torch.Tensor,
    attention_mask: torch.Tensor,
    teacher_pooled: torch.Tensor,
    teacher_states: torch.Tensor | None,
    token_weight: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(loss, its parts): mean over texts of 1 - cos(student's pooled vector, teacher's), plus
    ``token_weight`` x the mean squared error of the last-layer token states over real tokens and
    dimensions.  Computed in float32 whatever the autocast precision."""
    states = student_states.float()
    pooled = mean_pool(states, attention_mask)
    pooled_loss = (1 - torch.nn.functional.cosine_similarity(pooled, teacher_pooled.float(), dim=-1)).mean()
    parts = {"pooled_loss": pooled_loss}
    loss = pooled_loss
    if token_weight > 0:
        if teacher_states is None:
            raise UserError("token_weight > 0 needs the teacher's token states")
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        squared = ((states - teacher_states.float()) ** 2 * mask).sum()
        token_loss = squared / (mask.sum() * states.shape[-1]).clamp(min=1)
        parts["token_loss"] = token_loss
        loss = loss + token_weight * token_loss
    return loss, parts


@dataclass
class DistillationCollator:
    """Rows of the planned batches (``input_ids``, ``batch``, ``row``) -> the model's inputs and the teacher's
    targets, read from the cache: ``input_ids``, ``attention_mask``, ``teacher_pooled`` and, when the
    loss uses them, ``teacher_states``; with ``pairs``, the planned batch's pair batch too (``pair_*``).
    Rows of unequal length (never in a plan) are right-padded."""

    targets: TeacherTargets
    pad_token_id: int
    pairs: PairInputs | None = None

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        loaded: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        for f in features:
            if f["batch"] not in loaded:
                loaded[f["batch"]] = self.targets.read(f["batch"])
        n = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), n), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(features), n), dtype=torch.long)
        pooled = []
        states = None
        for i, f in enumerate(features):
            length = len(f["input_ids"])
            ids[i, :length] = torch.as_tensor(f["input_ids"])
            mask[i, :length] = 1
            batch_pooled, batch_states = loaded[f["batch"]]
            pooled.append(torch.from_numpy(batch_pooled[f["row"]]))
            if batch_states is not None:
                if states is None:
                    states = torch.zeros((len(features), n, batch_states.shape[-1]))
                states[i, :length] = torch.from_numpy(batch_states[f["row"]])
        inputs = {"input_ids": ids, "attention_mask": mask, "teacher_pooled": torch.stack(pooled)}
        if states is not None:
            inputs["teacher_states"] = states
        if self.pairs is not None:
            (batch,) = {f["batch"] for f in features}  # a step is one planned batch
            inputs.update(self.pairs(batch))
        return inputs


class DistillationTrainer(AtomicCheckpoints, Trainer):
    """transformers' Trainer whose loss is :func:`distillation_loss`, plus ``pairs_weight`` x
    :func:`~longembed.training.retrofit.pairs.contrastive_loss` when the batch carries pairs; the parts
    are logged beside the loss.  Checkpoints are atomic (:class:`~longembed.training.runs.AtomicCheckpoints`)."""

    def __init__(
        self, *args: Any, token_weight: float, pairs_weight: float = 0.0, pairs_temperature: float = 0.05,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.token_weight = token_weight
        self.pairs_weight = pairs_weight
        self.pairs_temperature = pairs_temperature
        self._part_sums: dict[str, float] = {}
        self._part_count = 0

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        loss, parts = distillation_loss(
            outputs.last_hidden_state,
            inputs["attention_mask"],
            inputs["teacher_pooled"],
            inputs.get("teacher_states"),
            self.token_weight,
        )
        if self.pairs_weight > 0 and "pair_query_input_ids" in inputs:
            queries, documents = (_pair_vectors(model, inputs, role) for role in ("query", "document"))
            parts["pairs_loss"] = contrastive_loss(queries, documents, self.pairs_temperature)
            loss = loss + self.pairs_weight * parts["pairs_loss"]
        if model.training:
            for name, value in parts.items():
                self._part_sums[name] = self._part_sums.get(name, 0.0) + float(value.detach())
            self._part_count += 1
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the mean of each loss part since the last log to a log that has the loss."""
        if "loss" in logs and self._part_count:
            logs.update({name: total / self._part_count for name, total in self._part_sums.items()})
            self._part_sums, self._part_count = {}, 0
        super().log(logs, start_time)


def _pair_vectors(model: torch.nn.Module, inputs: dict[str, Any], role: str) -> torch.Tensor:
    """The student's mean-pooled vectors of the pair batch's queries or documents (``role``)."""
    mask = inputs[f"pair_{role}_attention_mask"]
    states = model(input_ids=inputs[f"pair_{role}_input_ids"], attention_mask=mask).last_hidden_state
    return mean_pool(states.float(), mask)


class LossProgressBar(ProgressCallback):
    """transformers' progress bar, with the last logged loss on the bar itself."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().on_log(args, state, control, logs=logs, **kwargs)
        if self.training_bar is not None and logs and "loss" in logs:
            self.training_bar.set_postfix(loss=f"{logs['loss']:.4g}")
