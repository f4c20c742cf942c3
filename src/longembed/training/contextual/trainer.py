"""The training loop of ``longembed train contextual``: transformers' Trainer, one planned step per batch.

The Trainer brings what every longembed run has (``training.runs``): AdamW with a linear schedule, atomic
checkpoints with the optimizer, scheduler and RNG states, resuming at the exact step (the dataset is the
step numbers, read in order), bf16 autocast, gradient checkpointing, and the progress bar with the loss.
A step runs each document once through the encoder's extension method (``ModelRunner.forward_states``,
with gradients), pools its chunks (late chunking), embeds the queries and the
distillation texts alone, and returns the loss of :mod:`.loss`; its parts are logged beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import Trainer

from longembed.encoder import LongContextEncoder
from longembed.pooling import pool
from longembed.training.contextual.batches import StepInputs
from longembed.training.contextual.loss import distill_loss, insent_loss
from longembed.training.runs import AtomicCheckpoints

#: The terms of the loss, logged beside it.
LOSS_PARTS = ("in_sequence_loss", "in_batch_loss", "distill_loss")


def late_chunk_tensors(states: torch.Tensor, chunk_tokens: Sequence[np.ndarray]) -> torch.Tensor:
    """(chunks, dim): the mean of each chunk's token states (one document's (n, dim) states)."""
    return torch.stack([states[torch.as_tensor(index)].mean(dim=0) for index in chunk_tokens])


def step_vectors(encoder: LongContextEncoder, step: StepInputs) -> tuple[list[torch.Tensor], torch.Tensor]:
    """(each document's late-chunk vectors, the queries' vectors) of one step, with gradients."""
    chunks = []
    for document in step.documents:  # one document per forward: memory of one long input at a time
        states, _ = encoder.runner.forward_states([document.ids])
        chunks.append(late_chunk_tensors(states[0], document.chunk_tokens))
    return chunks, alone_vectors(encoder, step.queries)


def alone_vectors(encoder: LongContextEncoder, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
    """Mean-pooled vectors of short token sequences, each embedded alone (one padded batch)."""
    states, mask = encoder.runner.forward_states(sequences)
    return pool(states, mask, "mean")


class ContextualTrainer(AtomicCheckpoints, Trainer):
    """transformers' Trainer whose loss is InSeNT over late chunks plus ``distill_weight`` x distillation."""

    def __init__(
        self, *args: Any, encoder: LongContextEncoder, steps: Sequence[StepInputs], targets: np.ndarray | None,
        temperature: float, in_sequence_weight: float, distill_weight: float, **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.encoder = encoder
        self.steps = steps
        self.targets = targets
        self.temperature = temperature
        self.in_sequence_weight = in_sequence_weight
        self.distill_weight = distill_weight
        self._part_sums: dict[str, float] = {}
        self._part_count = 0

    def compute_loss(
        self, model: torch.nn.Module, inputs: dict[str, Any], return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        (index,) = inputs["step"].tolist()
        step = self.steps[index]
        chunks, queries = step_vectors(self.encoder, step)
        loss, parts = insent_loss(queries, chunks, step.targets, self.temperature, self.in_sequence_weight)
        if self.distill_weight > 0 and self.targets is not None:
            student = alone_vectors(self.encoder, step.distill)
            teacher = torch.from_numpy(self.targets[step.distill_rows]).to(student.device)
            parts["distill_loss"] = distill_loss(student, teacher)
            loss = loss + self.distill_weight * parts["distill_loss"]
        if model.training:
            for name, value in parts.items():
                self._part_sums[name] = self._part_sums.get(name, 0.0) + float(value.detach())
            self._part_count += 1
        return (loss, {}) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the mean of each loss part since the last log to a log that has the loss."""
        if "loss" in logs and self._part_count:
            logs.update({name: total / self._part_count for name, total in self._part_sums.items()})
            self._part_sums, self._part_count = {}, 0
        super().log(logs, start_time)


def collate_steps(features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Dataset rows (``{"step": i}``) -> ``{"step": tensor([i])}``: the trainer looks the step up."""
    return {"step": torch.tensor([int(f["step"]) for f in features])}
