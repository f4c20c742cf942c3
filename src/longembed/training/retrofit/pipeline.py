"""``retrofit_alibi``: plan the run, compute the teacher's targets, train the student, write its folder."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from transformers import AutoTokenizer, BertConfig, TrainerCallback, TrainingArguments
from transformers.trainer_callback import ProgressCallback

from longembed.encoder_protocol import retrieval_prompts
from longembed.errors import UserError
from longembed.loading import ModelSource, resolve_device, resolve_model
from longembed.models.jina_bert import JinaBertModel
from longembed.training.config import RETROFIT_POSITIONS
from longembed.training.contrastive import require_training_extra
from longembed.training.data import SOURCES, pairs_digest, training_pairs
from longembed.training.retrofit.config import RetrofitConfig
from longembed.training.retrofit.data import BatchPlan, retrofit_texts, tokenized_plan
from longembed.training.retrofit.fidelity import short_text_fidelity
from longembed.training.retrofit.folder import write_student_folder
from longembed.training.retrofit.pairs import PairInputs, PairRow, plan_pair_batches
from longembed.training.retrofit.student import build_student, load_teacher, teacher_config, teacher_window
from longembed.training.retrofit.targets import (
    TeacherTargets,
    targets_key,
    teacher_identity,
    teacher_targets,
    token_states_bytes,
)
from longembed.training.retrofit.trainer import (
    LOSS_PARTS,
    DistillationCollator,
    DistillationTrainer,
    LossProgressBar,
)
from longembed.training.runs import (
    CHECKPOINTS,
    TrainingSummary,
    check_unfinished_run,
    checkpoint_step,
    finish_run,
    prepare_output,
    resume_point,
    run_trainer,
    shared_trainer_arguments,
)

try:  # the ``training`` extra; without it ``require_training_extra`` says what to install
    from datasets import Dataset
except ImportError:  # pragma: no cover - exercised only without the extra
    Dataset = None  # type: ignore[assignment,misc]

RECORD_FILE = "longembed_retrofit.json"
#: The teacher's targets, under the checkpoints unless a cache folder is given (removed with them at the end).
TARGETS_DIR = "teacher-targets"
FORMAT_VERSION = 1


@dataclass
class RetrofitSummary(TrainingSummary):
    """A finished retrofit's training: the shared summary (``losses`` is the loss curve, every
    ``logging_steps``), the loss's parts at the same steps (``pairs_losses`` with pairs), tokens trained
    on, and the teacher's time."""

    pooled_losses: list[tuple[int, float]] = field(default_factory=list)
    token_losses: list[tuple[int, float]] = field(default_factory=list)
    pairs_losses: list[tuple[int, float]] = field(default_factory=list)
    tokens: int = 0
    tokens_per_second: float = 0.0
    teacher_seconds: float = 0.0


@dataclass
class RetrofitResult:
    """The retrofitted model's folder, what its training did, and the record written beside it."""

    folder: Path
    summary: RetrofitSummary
    record: dict[str, Any]


@dataclass
class _Plan:
    """What a run is, decided before any model runs: teacher, lengths, batches, and the run's identity."""

    source: ModelSource
    teacher_config: BertConfig
    training_length: int
    tokenizer: Any
    batches: BatchPlan
    used: list[np.ndarray]
    pair_batches: list[list[PairRow]] | None
    data: dict[str, Any]
    identity: dict[str, Any]


def retrofit_alibi(
    model: str | Path,
    output_dir: str | Path,
    *,
    data_dir: str | Path | None = None,
    text_file: str | Path | None = None,
    pairs_file: str | Path | None = None,
    positions: str = "alibi",
    config: RetrofitConfig | None = None,
    cache_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    callbacks: Sequence[TrainerCallback] = (),
    evaluate: bool = True,
    **options: Any,
) -> RetrofitResult:
    """Retrofit bidirectional ALiBi onto the BERT ``model`` by distillation; write the student to ``output_dir``.

        >>> retrofit_alibi("all-MiniLM-L6-v2", "minilm-alibi", data_dir="../shared/data",
        ...                max_steps=2000, batch_size=16)
        >>> load_encoder("minilm-alibi", method="native").encode([a_long_text])

    ``options`` are :class:`RetrofitConfig` fields (``max_steps``, ``batch_size``, ``max_seq_length``,
    ``min_seq_length``, ``learning_rate``, ``warmup_steps``, ``weight_decay``, ``token_weight``, ``slope_scale``, ``save_steps``,
    ``logging_steps``, ``seed``, ``precision``, ``device``), over ``config`` (default: ``RetrofitConfig()``).
    Text: ``text_file`` (jsonl with ``text``, or one text per line), else the benchmark-safe text under
    ``data_dir``.  With ``pairs_weight > 0`` a contrastive term on training pairs is mixed in
    (``retrofit.pairs``): ``pairs_file`` (jsonl: query, positive, negatives), else SQuAD and the unused
    HotpotQA under ``data_dir``.  The teacher's targets are cached under ``cache_dir`` (kept, shared by runs) or, by
    default, beside the checkpoints (removed with them when the run finishes).

    Checkpoints go to ``OUTPUT/checkpoints`` every ``save_steps``; after a kill, ``resume=True`` continues
    the same run (same model, text and options, else a ValueError) and ends with the weights of an
    uninterrupted run.  Without it, an unfinished run's checkpoints are an error (``overwrite=True``
    starts again); a finished folder is never replaced unless ``overwrite=True``.  ``callbacks`` are extra
    transformers ``TrainerCallback``s.  With ``evaluate`` and text from ``data_dir``, the short-text fidelity
    on the held-out SQuAD articles is scored at the end and recorded (``record["fidelity"]``).
    """
    require_training_extra()
    if positions not in RETROFIT_POSITIONS:
        raise UserError(f"positions must be one of {RETROFIT_POSITIONS}, got {positions!r}")
    config = (config or RetrofitConfig()).with_overrides(**options)
    device = resolve_device(config.device)
    if config.precision == "fp16" and device.type != "cuda":
        raise UserError("precision fp16 needs a CUDA device; use fp32 or bf16 on the CPU")
    output = Path(output_dir)
    source = resolve_model(model)
    bert_config = teacher_config(source)
    checkpoint_dir = output / CHECKPOINTS
    teacher_folders = [p for p in (source.folder, source.transformer_path) if p is not None]
    prepare_output(output, overwrite, teacher_folders, RECORD_FILE, "a finished retrofit")
    check_unfinished_run(checkpoint_dir, resume, overwrite, "retrofit")
    plan = _plan(source, bert_config, config, data_dir, text_file, pairs_file, positions)
    resume_from = resume_point(checkpoint_dir, plan.identity) if resume else None

    teacher = load_teacher(source)
    start = time.perf_counter()
    targets_root = Path(cache_dir) if cache_dir is not None else checkpoint_dir / TARGETS_DIR
    folder = targets_root / targets_key(plan.identity["teacher"], plan.identity["plan_sha256"])
    manifest = {"teacher": source.name, "teacher_files": plan.identity["teacher"], **plan.data}
    targets, computed = teacher_targets(
        teacher, plan.used, folder, config.token_weight > 0, device, manifest, show_progress
    )
    teacher_seconds = time.perf_counter() - start
    student = build_student(teacher, plan.training_length, config.slope_scale)
    del teacher

    summary = _train(student, plan, targets, checkpoint_dir, config, resume_from, show_progress, callbacks)
    summary.teacher_seconds = round(teacher_seconds, 1)
    write_student_folder(student, plan.tokenizer, source, output)
    record = {
        "format_version": FORMAT_VERSION,
        "teacher": {"name": source.name, "files": plan.identity["teacher"], "window": teacher_window(bert_config)},
        "positions": positions,
        "training_length": plan.training_length,
        "config": config.to_dict(),
        "data": plan.data,
        "targets": {
            "folder": str(folder) if cache_dir is not None else None,
            "token_states": targets.token_states,
            "computed_batches": computed,
            "token_states_bytes": token_states_bytes(plan.used, bert_config.hidden_size) if targets.token_states else 0,
        },
        "summary": summary.to_dict(),
    }
    fidelity = None
    if evaluate and plan.data["held_out_titles"]:
        def fidelity() -> dict[str, Any]:
            return short_text_fidelity(output, model, data_dir, plan.data["held_out_titles"], str(device))
    curves = {name: getattr(summary, name) for name in ("losses", "pooled_losses", "token_losses", "pairs_losses")}
    finish_run(output, RECORD_FILE, record, fidelity, curves, f"retrofit of {source.name}: {summary.steps} steps",
               checkpoint_dir)
    return RetrofitResult(output, summary, record)



def _plan(
    source: ModelSource,
    bert_config: BertConfig,
    config: RetrofitConfig,
    data_dir: str | Path | None,
    text_file: str | Path | None,
    pairs_file: str | Path | None,
    positions: str,
) -> _Plan:
    """Lo, the tokenized text cut into the planned batches, the ones this run uses (and their pair
    batches), and the run's identity."""
    window = teacher_window(bert_config)
    lo = config.max_seq_length or window
    if lo > window:
        raise UserError(f"max_seq_length {lo} is longer than the teacher's window of {window} tokens")
    if config.min_seq_length > lo:
        raise UserError(f"min_seq_length {config.min_seq_length} is longer than max_seq_length {lo}")
    tokenizer = AutoTokenizer.from_pretrained(str(source.transformer_path))
    texts, counts, held_out_titles = retrofit_texts(data_dir, text_file, config.held_out_articles, config.seed)
    batches = tokenized_plan(texts, tokenizer, config.batch_size, config.min_seq_length, lo, config.seed)
    used = batches.batches[: config.max_steps]
    data = {
        **counts,
        "stream_tokens": batches.stream_tokens,
        "planned_batches": len(batches.batches),
        "used_batches": len(used),
        "used_texts": sum(len(b) for b in used),
        "epochs": round(config.max_steps / len(used), 3),
        "held_out_titles": held_out_titles,
    }
    identity = {
        "config": config.to_dict(),
        "positions": positions,
        "teacher": teacher_identity(Path(source.transformer_path)),
        "plan_sha256": batches.digest(),
    }
    pair_batches = None
    if config.pairs_weight > 0:
        pair_batches, data["pairs"], identity["pairs_sha256"] = _pair_plan(
            config, len(used), data_dir, pairs_file, held_out_titles
        )
    return _Plan(source, bert_config, lo, tokenizer, batches, used, pair_batches, data, identity)


def _pair_plan(
    config: RetrofitConfig,
    count: int,
    data_dir: str | Path | None,
    pairs_file: str | Path | None,
    held_out_titles: list[str],
) -> tuple[list[list[PairRow]], dict[str, int], str]:
    """(one pair batch per planned batch, pair counts by source, the pairs' digest); no pair of a held-out
    SQuAD article is trained on."""
    if pairs_file is None and data_dir is None:
        raise UserError("pairs_weight > 0 needs training pairs: give data_dir (SQuAD, HotpotQA) or pairs_file")
    sources = training_pairs(data_dir, SOURCES, pairs_file, config.seed)
    held_groups = {f"squad:{title}" for title in held_out_titles}
    pairs = [pair for source in sources for pair in source.pairs if pair.group not in held_groups]
    batches = plan_pair_batches(pairs, config.pairs_batch_size, count, config.hard_negatives, config.seed)
    counts = {source.name: len(source.pairs) for source in sources}
    counts["held_out"] = sum(len(source.pairs) for source in sources) - len(pairs)
    return batches, counts, pairs_digest(pairs)


def _train(
    student: JinaBertModel,
    plan: _Plan,
    targets: TeacherTargets,
    checkpoint_dir: Path,
    config: RetrofitConfig,
    resume_from: str | None,
    show_progress: bool,
    callbacks: Sequence[TrainerCallback],
) -> RetrofitSummary:
    """Train ``student`` in place on the planned batches, in order (one batch a step, epochs repeating them)."""
    rows = [(b, r) for b, batch in enumerate(plan.used) for r in range(len(batch))]
    dataset = Dataset.from_dict(
        {
            "input_ids": [plan.used[b][r].tolist() for b, r in rows],
            "batch": [b for b, _ in rows],
            "row": [r for _, r in rows],
        }
    )
    arguments = {**shared_trainer_arguments(config, checkpoint_dir), "disable_tqdm": not show_progress}
    args = TrainingArguments(
        **arguments,
        max_steps=config.max_steps,
        use_cpu=resolve_device(config.device).type != "cuda",
        remove_unused_columns=False,  # the collator reads each row's batch and row
        train_sampling_strategy="sequential",  # the plan's order: each step is one planned batch
        logging_first_step=True,  # the loss at the start: the gap the position table leaves
    )
    trainer = DistillationTrainer(
        model=student,
        args=args,
        train_dataset=dataset,
        data_collator=DistillationCollator(targets, plan.tokenizer.pad_token_id or 0, _pair_inputs(plan)),
        callbacks=list(callbacks),
        token_weight=config.token_weight,
        pairs_weight=config.pairs_weight,
        pairs_temperature=config.pairs_temperature,
    )
    if show_progress:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(LossProgressBar)
    run = run_trainer(trainer, checkpoint_dir, plan.identity, resume_from, config.batch_size)
    first = checkpoint_step(resume_from) if resume_from else 0
    tokens = sum(int(plan.used[step % len(plan.used)].size) for step in range(first, run.summary.steps))
    logged = [e for e in trainer.state.log_history if "loss" in e]
    pooled, token, pairs = ([(int(e["step"]), float(e[name])) for e in logged if name in e] for name in LOSS_PARTS)
    return RetrofitSummary(
        **vars(run.summary),
        pooled_losses=pooled,
        token_losses=token,
        pairs_losses=pairs,
        tokens=tokens,
        tokens_per_second=round(tokens / run.seconds, 1) if run.seconds > 0 else 0.0,
    )


def _pair_inputs(plan: _Plan) -> PairInputs | None:
    """The pair batches as the student's inputs, with the teacher's prompts, cut at Lo; None without pairs."""
    if plan.pair_batches is None:
        return None
    return PairInputs(plan.pair_batches, plan.tokenizer, retrieval_prompts(plan.source.prompts), plan.training_length)
