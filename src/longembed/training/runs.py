"""What every longembed training run shares: checkpoints and resuming, the Trainer arguments, the summary.

Position tuning, the contrastive stages and MLM pre-training all checkpoint into ``OUTPUT/checkpoints``
beside a record of the run (``run_config.json``), resume only a run with the same record, set
transformers' ``TrainingArguments`` alike (:func:`shared_trainer_arguments`) and report a
:class:`TrainingSummary` (:func:`run_trainer`).

Checkpoints are atomic (:class:`AtomicCheckpoints`, mixed into every longembed trainer): each is written
whole into ``checkpoints/.incomplete/`` and renamed to ``checkpoints/checkpoint-<step>`` only once
complete, so a run killed while saving leaves the previous checkpoints as they were.  Resuming
(:func:`resume_point`) takes the newest *complete* checkpoint; one that is not (written by an older
longembed, or damaged by hand) is skipped with a log line that names it and what it lacks.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

from longembed.durable import durable_replace_folder
from longembed.errors import OutputExistsError, UserError
from longembed.export import refuse_overlap
from longembed.permissions import weights_follow_umask
from longembed.results.files import write_json
from longembed.training.loss_curve import CURVE_FILE, plot_loss_curve
from longembed.weight_files import check_weight_files

logger = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
RUN_CONFIG_FILE = "run_config.json"
#: Where a checkpoint is written before it is renamed into place (inside the checkpoints folder).
STAGING_DIR = ".incomplete"
TRAINER_STATE_FILE = "trainer_state.json"
#: What transformers' Trainer writes into every checkpoint besides the weights and needs to resume exactly.
RESUME_FILES = (TRAINER_STATE_FILE, "optimizer.pt", "scheduler.pt", "rng_state.pth")
#: The model's weights in a checkpoint, any one of them (transformers' and sentence-transformers' layouts).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


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
    """The newest complete checkpoint of the same run, None for a fresh run; a ValueError for another run's.

    An incomplete checkpoint (:func:`incomplete_reason`) is skipped with one warning naming the folder and
    what it lacks, and the one before it is taken (none: the run starts afresh).
    """
    folders = checkpoint_folders(checkpoint_dir)
    if not folders:
        return None
    record = checkpoint_dir / RUN_CONFIG_FILE
    previous = json.loads(record.read_text()) if record.is_file() else None
    if previous != json.loads(json.dumps(identity)):
        raise UserError(
            f"{checkpoint_dir} holds checkpoints of a different run; resume it with the same options, "
            "or write to another --output"
        )
    for folder in reversed(folders):
        reason = incomplete_reason(folder)
        if reason is None:
            return str(folder)
        earlier = "the previous one" if folder != folders[0] else "none left: starting afresh"
        logger.warning("skipping the incomplete checkpoint %s (%s); resuming from %s", folder, reason, earlier)
    return None


def checkpoint_folders(checkpoint_dir: Path) -> list[Path]:
    """The ``checkpoint-<step>`` folders of ``checkpoint_dir``, oldest step first ([] when there is none)."""
    if not checkpoint_dir.is_dir():
        return []
    folders = [p for p in checkpoint_dir.iterdir() if p.is_dir() and _step_of(p.name) is not None]
    return sorted(folders, key=lambda p: _step_of(p.name))


def incomplete_reason(folder: Path) -> str | None:
    """Why ``folder`` cannot be resumed from (a file it lacks, an unreadable state or weight file), or None."""
    missing = [name for name in RESUME_FILES if not (folder / name).is_file()]
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        missing.append("model weights (" + " or ".join(WEIGHT_FILES[::2]) + ")")
    if missing:
        return "no " + ", no ".join(missing)
    try:
        json.loads((folder / TRAINER_STATE_FILE).read_text())
        check_weight_files(folder)
    except ValueError as exc:
        return f"unreadable: {exc}"
    return None


def checkpoint_step(path: str) -> int:
    """The global step of a checkpoint folder (``checkpoint-<step>``)."""
    return int(Path(path).name.rsplit("-", 1)[-1])


def _step_of(name: str) -> int | None:
    prefix = f"{PREFIX_CHECKPOINT_DIR}-"
    digits = name[len(prefix) :]
    return int(digits) if name.startswith(prefix) and digits.isdigit() else None


class AtomicCheckpoints:
    """A transformers ``Trainer`` mixin (put it first in the bases) whose checkpoints appear whole or not at all.

    transformers writes a checkpoint file by file straight into ``checkpoint-<step>``: a run killed in the
    middle leaves a folder that looks like a checkpoint but cannot be resumed from.  Here the Trainer's
    own ``_save_checkpoint`` writes into ``<output_dir>/.incomplete/``, and the finished folder is renamed
    into place (one ``rename``, atomic on one filesystem; durable too: its files and folders are fsynced
    before, the folder and its parent after, as PostgreSQL's ``durable_rename`` does,
    :mod:`longembed.durable`); only then are old checkpoints deleted, keeping the newest
    ``save_total_limit``, so a power loss never leaves fewer complete checkpoints than before.  The weight files are also given the mode ordinary files get
    (:func:`~longembed.permissions.weights_follow_umask`).
    """

    _staging_checkpoint = False

    def _get_output_dir(self, trial: Any) -> str:
        run_dir = super()._get_output_dir(trial)  # type: ignore[misc]
        return os.path.join(run_dir, STAGING_DIR) if self._staging_checkpoint else run_dir

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        run_dir = Path(self._get_output_dir(trial))
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"  # type: ignore[attr-defined]
        staging = run_dir / STAGING_DIR
        if self.args.should_save:  # type: ignore[attr-defined]  # the saving process only (distributed runs)
            shutil.rmtree(staging, ignore_errors=True)  # what a killed save left
        self._staging_checkpoint = True
        try:
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
        finally:
            self._staging_checkpoint = False
        written = staging / name
        if not self.args.should_save or not written.is_dir():  # type: ignore[attr-defined]
            return
        weights_follow_umask(written)
        final = run_dir / name
        if final.exists():  # an incomplete folder of the same step, left by an older longembed
            shutil.rmtree(final)
        durable_replace_folder(written, final)  # flushed before and after, as PostgreSQL renames: only
        shutil.rmtree(staging, ignore_errors=True)  # then may older checkpoints go
        keep_newest_checkpoints(run_dir, self.args.save_total_limit)  # type: ignore[attr-defined]


def keep_newest_checkpoints(run_dir: Path, limit: int | None) -> None:
    """Delete every checkpoint folder of ``run_dir`` but the newest ``limit`` complete ones (None: keep all)."""
    if not limit or limit < 1:
        return
    folders = checkpoint_folders(run_dir)
    complete = [f for f in folders if incomplete_reason(f) is None]
    keep = set(complete[-limit:])
    for folder in folders:
        if folder not in keep:
            shutil.rmtree(folder, ignore_errors=True)


def prepare_output(output: Path, overwrite: bool, inputs: Sequence[Path], record_file: str, finished: str) -> None:
    """A finished run (``output`` holds ``record_file``) is never overwritten by accident, nor any of
    ``inputs`` (the models it starts from) ever; an unfinished one (only checkpoints) resumes.

    ``finished`` names what a finished folder holds in the error ("a finished stage").
    """
    refuse_overlap(output, list(inputs))
    if (output / record_file).is_file():
        if not overwrite:
            raise OutputExistsError(f"{output} holds {finished}; pass overwrite=True (--overwrite) to retrain")
        shutil.rmtree(output)
    elif output.exists() and any(p.name != CHECKPOINTS for p in output.iterdir()):
        raise OutputExistsError(f"{output} exists and holds other files; choose an empty or new --output")


def check_unfinished_run(checkpoint_dir: Path, resume: bool, overwrite: bool, what: str) -> None:
    """An unfinished run's checkpoints continue only when asked (``resume``), or are removed (``overwrite``);
    otherwise an :class:`~longembed.errors.OutputExistsError` names ``what`` ran there ("retrofit")."""
    if resume or not checkpoint_dir.is_dir() or get_last_checkpoint(str(checkpoint_dir)) is None:
        return
    if not overwrite:
        raise OutputExistsError(
            f"{checkpoint_dir} holds the checkpoints of an unfinished {what}; pass resume=True (--resume) to "
            "continue it, or overwrite=True (--overwrite) to start again"
        )
    shutil.rmtree(checkpoint_dir)


def finish_run(
    output: Path, record_file: str, record: dict[str, Any], fidelity: Callable[[], dict[str, Any]] | None,
    curves: dict[str, Any], title: str, checkpoint_dir: Path,
) -> dict[str, Any]:
    """The end of a distillation run: write its record (before the short-text check, so a failing check
    loses nothing), add ``fidelity()``'s check to it, plot the loss ``curves`` beside it, and only then remove
    the checkpoints.  Returns the record."""
    write_json(output / record_file, record)
    if fidelity is not None:
        record["fidelity"] = fidelity()
        write_json(output / record_file, record)
    plot_loss_curve(curves, output / CURVE_FILE, title)
    shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return record
