"""Stage I's training loop: transformers' Trainer with the loss of eq. (2) over the masked tokens only.

AdamW (beta1 0.9, beta2 0.98, eps 1e-6, weight decay 0.01), learning rate linear from 0 to eta over
the warm-up steps, then linearly to 0; checkpoints every ``save_steps`` in ``OUTPUT/checkpoints``, and
a killed run resumes from the last one (the masks, the data order and the RNG states are restored, so
a resumed run ends with the weights of an uninterrupted one); fp16/bf16 where the device has them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from longembed.errors import UserError
from longembed.loading import resolve_device
from longembed.training.contrastive import require_training_extra
from longembed.training.masking import IGNORE_INDEX
from longembed.training.mlm.config import MLMConfig
from longembed.training.mlm.data import mlm_collator, tokenize_documents
from longembed.training.runs import (
    CHECKPOINTS,
    AtomicCheckpoints,
    TrainingSummary,
    resume_point,
    run_trainer,
    shared_trainer_arguments,
)


@dataclass
class MLMSummary(TrainingSummary):
    """A finished MLM run: the contrastive summary's fields plus tokens (non-padding) and tokens/s."""

    tokens: int = 0
    tokens_per_second: float = 0.0


def train_mlm(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    output_dir: Path | str,
    config: MLMConfig,
    run_identity: dict[str, Any] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> MLMSummary:
    """Pre-train ``model`` in place on ``texts``; checkpoints in ``output_dir/checkpoints``, resumed after a kill.

    ``run_identity`` (model, data, ...) is stored with the checkpoints; resuming another run's
    checkpoints raises a ValueError instead of silently mixing two trainings.  ``callbacks`` are
    extra transformers ``TrainerCallback``s (progress reporting, early stops).
    """
    require_training_extra()
    if config.precision == "fp16" and not _cuda_requested(config.device):
        raise UserError("precision fp16 needs a CUDA device; use fp32 or bf16 on the CPU")
    output_dir = Path(output_dir)
    checkpoint_dir = output_dir / CHECKPOINTS
    identity = {"config": config.to_dict(), **(run_identity or {})}
    resume = resume_point(checkpoint_dir, identity)
    dataset = tokenize_documents(texts, tokenizer, config.training_length)
    args = TrainingArguments(
        **shared_trainer_arguments(config, checkpoint_dir),
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        adam_beta1=config.adam_beta1,
        adam_beta2=config.adam_beta2,
        adam_epsilon=config.adam_epsilon,
        max_grad_norm=config.max_grad_norm,
        max_steps=config.max_steps,
        use_cpu=not _cuda_requested(config.device),
        remove_unused_columns=False,  # the collator needs special_tokens_mask and offset_mapping
        include_num_input_tokens_seen="non_padding",
    )
    trainer = MaskedTokensTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=mlm_collator(tokenizer, config),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    tokens_before = _checkpoint_tokens(resume)  # read first: training may delete that checkpoint
    examples_per_step = config.batch_size * config.gradient_accumulation_steps
    run = run_trainer(trainer, checkpoint_dir, identity, resume, examples_per_step)
    tokens = int(trainer.state.num_input_tokens_seen) - tokens_before
    return MLMSummary(
        **vars(run.summary),
        tokens=tokens,
        tokens_per_second=round(tokens / run.seconds, 1) if run.seconds > 0 else 0.0,
    )


class MaskedTokensTrainer(AtomicCheckpoints, Trainer):
    """transformers' Trainer whose MLM loss runs the head only at the masked tokens.

    The loss is the one of eq. (2), the cross entropy over every masked token of the (accumulated)
    batch, as the models' own ``labels`` loss computes it; but the decoder (hidden x vocabulary, most
    of a small model's compute) runs on the masked ~30% of the tokens instead of all of them.  Works for
    any model with ``base_model`` and an MLM head ``cls`` (JinaBERT and BERT).  A model wrapped for
    distributed training runs its full forward instead, so the wrapper's gradient hooks see the call.
    Checkpoints are atomic (:class:`~longembed.training.runs.AtomicCheckpoints`).
    """

    loss_is_scaled_for_ga = True  # divided by the masked tokens of the whole accumulated batch

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model_accepts_loss_kwargs = True  # so the Trainer counts num_items_in_batch

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        labels = inputs["labels"]
        encoder_inputs = {k: v for k, v in inputs.items() if k != "labels"}
        chosen = labels != IGNORE_INDEX
        unwrapped = self.accelerator.unwrap_model(model)
        if unwrapped is model and hasattr(model, "cls"):
            hidden = model.base_model(**encoder_inputs).last_hidden_state
            logits = model.cls(hidden[chosen])
            outputs = None
        else:
            outputs = model(**encoder_inputs)
            logits = outputs.logits[chosen]
        loss = torch.nn.functional.cross_entropy(logits.float(), labels[chosen], reduction="sum")
        count = num_items_in_batch if num_items_in_batch is not None else chosen.sum()
        loss = loss / torch.as_tensor(count, device=loss.device).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes  # num_items_in_batch counted every device's tokens
        return (loss, outputs) if return_outputs else loss


def _cuda_requested(device: str | None) -> bool:
    if device is None:
        return torch.cuda.is_available()
    return resolve_device(device).type == "cuda"


def _checkpoint_tokens(path: str | None) -> int:
    """Tokens seen up to a checkpoint (from its trainer_state.json), 0 for a fresh run."""
    if path is None:
        return 0
    state = Path(path) / "trainer_state.json"
    return int(json.loads(state.read_text()).get("num_input_tokens_seen", 0)) if state.is_file() else 0
