"""``train_contextual``: plan the documents and steps, cache the original model's targets, train, write the folder."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainingArguments
from transformers.trainer_callback import ProgressCallback

from longembed.encoder import LongContextEncoder, load_encoder
from longembed.errors import UserError
from longembed.loading import CONTEXTUAL_RECORD_FILE, ModelSource, resolve_device, resolve_model
from longembed.training.contextual.batches import PlannedInputs, plan_inputs
from longembed.training.contextual.config import ContextualConfig
from longembed.training.contextual.data import (
    SEPARATOR,
    SOURCES,
    ContextDocument,
    documents_digest,
    pack_documents,
    plan_steps,
    raw_documents,
)
from longembed.training.contextual.folder import write_trained_folder
from longembed.training.contextual.targets import targets_bytes, targets_folder, teacher_targets
from longembed.training.contextual.trainer import LOSS_PARTS, ContextualTrainer, collate_steps
from longembed.training.contrastive import require_training_extra
from longembed.training.retrofit.fidelity import short_text_fidelity
from longembed.training.retrofit.targets import teacher_identity
from longembed.training.retrofit.trainer import LossProgressBar
from longembed.training.runs import (
    CHECKPOINTS,
    TrainingSummary,
    check_unfinished_run,
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

RECORD_FILE = CONTEXTUAL_RECORD_FILE
TARGETS_DIR = "distill-targets"
FORMAT_VERSION = 1


@dataclass
class ContextualSummary(TrainingSummary):
    """A finished run: the shared summary (``losses``: the loss curve) and the loss's parts at the same steps."""

    in_sequence_losses: list[tuple[int, float]] = field(default_factory=list)
    in_batch_losses: list[tuple[int, float]] = field(default_factory=list)
    distill_losses: list[tuple[int, float]] = field(default_factory=list)
    teacher_seconds: float = 0.0
    seconds_per_step: float = 0.0


@dataclass
class ContextualResult:
    folder: Path
    summary: ContextualSummary
    record: dict[str, Any]


@dataclass
class _Plan:
    documents: list[ContextDocument]
    inputs: PlannedInputs
    data: dict[str, Any]
    identity: dict[str, Any]


def train_contextual(
    model: str | Path,
    output_dir: str | Path,
    *,
    data_dir: str | Path,
    sources: Sequence[str] = SOURCES,
    config: ContextualConfig | None = None,
    cache_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    callbacks: Sequence[TrainerCallback] = (),
    evaluate: bool = True,
    **options: Any,
) -> ContextualResult:
    """Fine-tune ``model`` for late chunking (InSeNT) on benchmark-safe documents; write it to ``output_dir``.

        >>> train_contextual(PATH / "all-MiniLM-L6-v2", "minilm-contextual", data_dir="../shared/data",
        ...                  method="pi", max_length=4096, doc_tokens=2048, max_steps=150)
        >>> load_encoder("minilm-contextual").encode_chunks([a_long_text], "tokens:256", late=True)

    ``options`` are :class:`ContextualConfig` fields over ``config``.  Documents: SQuAD and the HotpotQA
    questions the benchmark does not use under ``data_dir`` (:mod:`.data`).  Checkpoints go to
    ``OUTPUT/checkpoints`` every ``save_steps``; ``resume=True`` continues a killed run (same options, else a
    ValueError) to the weights an uninterrupted run ends with.  The original model's targets for the
    distillation term are cached under ``cache_dir`` (kept) or beside the checkpoints (removed at the end).
    With ``evaluate``, the short-text check is scored at the end on the held-out SQuAD articles and recorded
    (``record["fidelity"]``: cosine to the original model's vectors, question -> paragraph nDCG@10 of both).
    """
    require_training_extra()
    if data_dir is None:
        raise UserError("no data_dir: contextual training reads SQuAD and HotpotQA from it (--data-dir)")
    config = (config or ContextualConfig()).with_overrides(**options)
    device = resolve_device(config.device)
    if config.precision == "fp16" and device.type != "cuda":
        raise UserError("precision fp16 needs a CUDA device; use fp32 or bf16 on the CPU")
    output = Path(output_dir)
    source = resolve_model(model)
    checkpoint_dir = output / CHECKPOINTS
    prepare_output(output, overwrite, [p for p in (source.folder, source.transformer_path) if p is not None],
                   RECORD_FILE, "a finished contextual training")
    check_unfinished_run(checkpoint_dir, resume, overwrite, "contextual training")
    encoder = load_encoder(model, method=config.method, max_length=config.max_length, device=str(device))
    plan = _plan(encoder, source, config, data_dir, sources)
    resume_from = resume_point(checkpoint_dir, plan.identity) if resume else None

    began = time.perf_counter()
    targets, computed, targets_dir = None, False, None
    if config.distill_weight > 0:
        teacher = load_encoder(model, method="truncate", device=str(device))
        root = Path(cache_dir) if cache_dir is not None else checkpoint_dir / TARGETS_DIR
        targets_dir = targets_folder(root, plan.identity["model_files"], plan.inputs)
        manifest = {"model": source.name, "model_files": plan.identity["model_files"]}
        targets, computed = teacher_targets(teacher, plan.inputs, targets_dir, manifest, show_progress)
        del teacher
    teacher_seconds = time.perf_counter() - began

    summary = _train(encoder, plan, targets, checkpoint_dir, config, resume_from, show_progress, callbacks)
    summary.teacher_seconds = round(teacher_seconds, 1)
    write_trained_folder(encoder.model, source, output)
    record = {
        "format_version": FORMAT_VERSION,
        "model": {"name": source.name, "files": plan.identity["model_files"]},
        "encoder": {"method": encoder.method, "max_length": encoder.max_length,
                    "original_length": encoder.original_length},
        "late_chunking": {"chunks": "a SQuAD paragraph or a HotpotQA passage", "separator": SEPARATOR,
                          "doc_tokens": config.doc_tokens},
        "config": config.to_dict(),
        "data": plan.data,
        "targets": {"folder": str(targets_dir) if cache_dir is not None else None, "computed": computed,
                    "bytes": targets_bytes(plan.inputs, encoder.embedding_dim) if targets is not None else 0},
        "summary": summary.to_dict(),
    }
    fidelity = None
    if evaluate and plan.data["held_out_titles"]:
        def fidelity() -> dict[str, Any]:
            return short_text_fidelity(output, model, data_dir, plan.data["held_out_titles"], str(device),
                                       student_method=None)
    curves = {name: getattr(summary, name) for name in ("losses", "in_sequence_losses", "in_batch_losses",
                                                        "distill_losses")}
    finish_run(output, RECORD_FILE, record, fidelity, curves,
               f"contextual training of {Path(source.name).name}: {summary.steps} steps", checkpoint_dir)
    return ContextualResult(output, summary, record)



def _plan(
    encoder: LongContextEncoder, source: ModelSource, config: ContextualConfig, data_dir: str | Path,
    sources: Sequence[str],
) -> _Plan:
    """The packed documents, the steps' token ids, the counts for the record and the run's identity."""
    if encoder.pooling != "mean":
        raise UserError(f"late chunking mean-pools token states, and this model pools with {encoder.pooling!r}")
    if config.doc_tokens > encoder.window_length:
        raise UserError(f"doc_tokens {config.doc_tokens} is longer than one model input here ({encoder.window_length} "
                         f"tokens, method {encoder.method!r}): raise max_length or lower doc_tokens")
    sample = encoder.runner.tokenize(["a"], encoder.retrieval_prompts()["document"])[0]
    reserved = sample.n_tokens - len(sample.body)
    raw, counts, held_out = raw_documents(data_dir, sources, config.held_out_articles, config.seed)
    flat = [chunk for doc in raw for chunk in doc.chunks]
    lengths = [len(ids) for ids in encoder.tokenizer(flat, add_special_tokens=False, verbose=False)["input_ids"]]
    sizes, k = [], 0
    for doc in raw:
        sizes.append(lengths[k : k + len(doc.chunks)])
        k += len(doc.chunks)
    documents, packing = pack_documents(raw, sizes, config.doc_tokens - reserved, encoder.original_length - reserved)
    steps = plan_steps(documents, config.max_steps, config.documents_per_step, config.queries_per_document, config.seed,
                       config.squad_share)
    inputs = plan_inputs(encoder, documents, steps, config.doc_tokens)
    used = {item.document for step in steps for item in step}
    data = {
        "sources": counts,
        "packing": packing,
        "documents": len(documents),
        "documents_by_source": {s: sum(1 for d in documents if d.group.startswith(s + ":")) for s in SOURCES},
        "queries": sum(len(d.queries) for d in documents),
        "used_documents": len(used),
        "used_by_source": {src: sum(1 for step in steps for item in step if documents[item.document].group.startswith(src + ":"))
                           for src in SOURCES},
        "epochs": round(config.max_steps * config.documents_per_step / len(documents), 3),
        "distill_texts": len(inputs.ids),
        "held_out_titles": held_out,
    }
    identity = {
        "config": config.to_dict(),
        "sources": list(sources),
        "model_files": teacher_identity(Path(source.transformer_path)),
        "documents_sha256": documents_digest(documents),
        "inputs_sha256": inputs.digest(),
    }
    return _Plan(documents, inputs, data, identity)


def _train(
    encoder: LongContextEncoder, plan: _Plan, targets: Any, checkpoint_dir: Path, config: ContextualConfig,
    resume_from: str | None, show_progress: bool, callbacks: Sequence[TrainerCallback],
) -> ContextualSummary:
    """Train the encoder's model in place, one planned step per optimizer step, in order."""
    dataset = Dataset.from_dict({"step": list(range(config.max_steps))})
    arguments = {**shared_trainer_arguments(config, checkpoint_dir), "disable_tqdm": not show_progress,
                 "per_device_train_batch_size": 1}
    args = TrainingArguments(
        **arguments,
        max_steps=config.max_steps,
        use_cpu=encoder.device.type != "cuda",
        remove_unused_columns=False,
        train_sampling_strategy="sequential",
        logging_first_step=True,
        activation_checkpointing=config.gradient_checkpointing,
        activation_checkpointing_kwargs={"use_reentrant": False},
    )
    trainer = ContextualTrainer(
        model=encoder.model, args=args, train_dataset=dataset, data_collator=collate_steps,
        callbacks=list(callbacks), encoder=encoder, steps=plan.inputs.steps, targets=targets,
        temperature=config.temperature, in_sequence_weight=config.in_sequence_weight,
        distill_weight=config.distill_weight,
    )
    if show_progress:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(LossProgressBar)
    run = run_trainer(trainer, checkpoint_dir, plan.identity, resume_from, config.documents_per_step)
    encoder.model.eval()
    logged = [e for e in trainer.state.log_history if "loss" in e]
    seq, batch, distill = ([(int(e["step"]), float(e[name])) for e in logged if name in e] for name in LOSS_PARTS)
    steps_run = run.summary.steps - (int(Path(resume_from).name.rsplit("-", 1)[-1]) if resume_from else 0)
    return ContextualSummary(
        **vars(run.summary), in_sequence_losses=seq, in_batch_losses=batch, distill_losses=distill,
        seconds_per_step=round(run.seconds / steps_run, 2) if steps_run else 0.0,
    )
