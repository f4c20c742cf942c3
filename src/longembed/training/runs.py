"""What every longembed training run shares: checkpoints and resuming, the Trainer arguments, the summary.

Position tuning, the contrastive stages and MLM pre-training all checkpoint into ``OUTPUT/checkpoints``
beside a record of the run (``run_config.json``), resume only a run with the same record, set
transformers' ``TrainingArguments`` alike (:func:`shared_trainer_arguments`) and report a
:class:`TrainingSummary` (:func:`run_trainer`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers.trainer_utils import get_last_checkpoint

from longembed.export import refuse_overlap

CHECKPOINTS = "checkpoints"
RUN_CONFIG_FILE = "run_config.json"


@dataclass
class TrainingSummary:
    """What a finished run did and cost (written beside the model)."""

    steps: int
    examples: int
    seconds: float
    examples_per_second: float
    final_loss: float | None
    resumed_from: str | None
    losses: list[tuple[int, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class FinishedRun:
    """A trainer's run: its summary and its wall time unrounded (for rates a subclass adds)."""

    summary: TrainingSummary
    seconds: float


def run_trainer(
    trainer: Any, checkpoint_dir: Path, identity: dict[str, Any], resume: str | None, examples_per_step: int
) -> FinishedRun:
    """Record ``identity`` beside the checkpoints, train (from ``resume`` if set) and summarise the run.

    ``examples_per_step`` is the examples of one optimizer step (batch x gradient accumulation): the
    summary counts only the steps this call ran, not those of the checkpoint it resumed from.
    """
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    (checkpoint_dir / RUN_CONFIG_FILE).write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - start
    losses = [(int(e["step"]), float(e["loss"])) for e in trainer.state.log_history if "loss" in e]
    steps_run = result.global_step - (checkpoint_step(resume) if resume else 0)
    examples = steps_run * examples_per_step
    summary = TrainingSummary(
        steps=result.global_step,
        examples=examples,
        seconds=round(seconds, 1),
        examples_per_second=round(examples / seconds, 2) if seconds > 0 else 0.0,
        final_loss=losses[-1][1] if losses else None,
        resumed_from=resume,
        losses=losses,
    )
    return FinishedRun(summary, seconds)


def shared_trainer_arguments(config: Any, checkpoint_dir: Path) -> dict[str, Any]:
    """The transformers ``TrainingArguments`` every longembed trainer sets alike (contrastive and MLM):
    batch, learning rate, linear schedule with warm-up, weight decay, checkpoints (the last two kept),
    logging, seeds, mixed precision, progress bar on and no experiment trackers."""
    return dict(
        output_dir=str(checkpoint_dir),
        per_device_train_batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
        lr_scheduler_type="linear",
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=2,
        logging_steps=config.logging_steps,
        seed=config.seed,
        data_seed=config.seed,
        bf16=config.precision == "bf16",
        fp16=config.precision == "fp16",
        report_to="none",
        disable_tqdm=False,
    )


def resume_point(checkpoint_dir: Path, identity: dict[str, Any]) -> str | None:
    """The last checkpoint of the same run, None for a fresh run; a ValueError for another run's."""
    if not checkpoint_dir.is_dir():
        return None
    last = get_last_checkpoint(str(checkpoint_dir))
    if last is None:
        return None
    record = checkpoint_dir / RUN_CONFIG_FILE
    previous = json.loads(record.read_text()) if record.is_file() else None
    if previous != json.loads(json.dumps(identity)):
        raise ValueError(
            f"{checkpoint_dir} holds checkpoints of a different run; resume it with the same options, "
            "or write to another --output"
        )
    return last


def checkpoint_step(path: str) -> int:
    """The global step of a checkpoint folder (``checkpoint-<step>``)."""
    return int(Path(path).name.rsplit("-", 1)[-1])


def prepare_output(output: Path, overwrite: bool, inputs: Sequence[Path], record_file: str, finished: str) -> None:
    """A finished run (``output`` holds ``record_file``) is never overwritten by accident, nor any of
    ``inputs`` (the models it starts from) ever; an unfinished one (only checkpoints) resumes.

    ``finished`` names what a finished folder holds in the error ("a finished stage").
    """
    refuse_overlap(output, list(inputs))
    if (output / record_file).is_file():
        if not overwrite:
            raise FileExistsError(f"{output} holds {finished}; pass overwrite=True (--overwrite) to retrain")
        shutil.rmtree(output)
    elif output.exists() and any(p.name != CHECKPOINTS for p in output.iterdir()):
        raise FileExistsError(f"{output} exists and holds other files; choose an empty or new --output")
