"""LongEmbed's further tuning: extend an APE model with PI or RP, then train only the added position rows.

    >>> tune_positions("all-MiniLM-L6-v2", "pi", 4096, "minilm-pi-4k", data_dir="../shared/data")
    >>> load_encoder("minilm-pi-4k")        # opens with method="pi", max_length=4096

Recipe (LongEmbed section 4.3, Figure 4 right, Appendix B):

1. Extend the position table from Lo to Lt rows with PI (row p is the original position p / s, rows
   at multiples of s are the original vectors) or RP (row p is the original row p mod Lo); the
   extended model is written as a plain folder first (``export.write_extended_table_model``).
2. Freeze every original parameter and the original rows inside the table
   (``positions.freeze_all_but_new_rows``).
3. Train contrastively (``contrastive.train_contrastive``: InfoNCE, in-batch + hard negatives) with
   PoSE position ids: each training text of n <= Lo tokens is placed at u..u+n-1, u ~ U{0..Lt-Lo}.
   ``objective="distill"`` trains the same texts to embed at their PoSE rows as the original model
   embeds them, ``"both"`` adds that to InfoNCE (``training.tune_objectives``).
4. Save a sentence-transformers folder with the tuned table and its ``longembed_positions.json``
   record, so ``load_encoder(folder)`` gives inputs of at most Lo tokens the original rows (ids
   0, s, 2s, ... for PI) and longer inputs the tuned ones.

Weight decay is 0 for the table (Table 4 has 0.01): decoupled weight decay shrinks every row of a
parameter, and the frozen rows live in the same parameter as the learned ones.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig

from longembed.encoder_protocol import retrieval_prompts
from longembed.errors import UserError
from longembed.export import write_extended_table_model, write_table_record
from longembed.extension.ape import ExtendedTable, extended_position_table
from longembed.extension.methods import APE, detect_position_scheme
from longembed.extension.positions import AbsolutePositions
from longembed.loading import ModelSource, resolve_device, resolve_model
from longembed.permissions import weights_follow_umask
from longembed.sentence_transformers_folder import is_sentence_transformers_folder
from longembed.training.config import TUNABLE_METHODS, ContrastiveConfig, default_tuning_config
from longembed.training.contrastive import SentenceTransformer, require_training_extra, train_contrastive
from longembed.training.data import SOURCES, TrainingPair, pairs_digest, training_pairs
from longembed.training.positions import PoseDataCollator, freeze_all_but_new_rows
from longembed.training.runs import CHECKPOINTS, TrainingSummary, prepare_output
from longembed.training.tune_objectives import check_objective, tuning_loss

TUNING_FILE = "longembed_tuning.json"


@dataclass
class TuningResult:
    """The tuned model folder and what its training did."""

    folder: Path
    summary: TrainingSummary
    record: dict[str, Any]


def tune_positions(
    model: str | Path,
    method: str,
    max_length: int,
    output: str | Path,
    *,
    data_dir: str | Path | None = None,
    train_file: str | Path | None = None,
    sources: tuple[str, ...] = SOURCES,
    config: ContrastiveConfig | None = None,
    max_pairs: int | None = None,
    overwrite: bool = False,
    objective: str = "contrastive",
    distill_weight: float = 1.0,
) -> TuningResult:
    """Tune the added position rows of ``model`` extended by ``method`` (pi, rp) to ``max_length`` tokens.

    Training pairs come from ``train_file`` (jsonl: query, positive, negatives) or from the allowed
    sources under ``data_dir`` (``training.data``); ``max_pairs`` keeps a seeded random subset.
    ``objective``: "contrastive" (the paper's InfoNCE), "distill" (each text at its PoSE rows embedded
    as the original model embeds it) or "both" (InfoNCE + ``distill_weight`` x distill).
    A killed run resumes from its last checkpoint when called again with the same arguments.
    """
    require_training_extra()
    config = config or default_tuning_config()
    _check_tuning_options(method, config)
    check_objective(objective, distill_weight)
    source = resolve_model(model)
    offset, lo = _original_table(source)
    table = ExtendedTable(method, lo, max_length, tuned=True)
    output = Path(output)
    sources_folders = [p for p in (source.folder, source.transformer_path) if p is not None]
    prepare_output(output, overwrite, sources_folders, TUNING_FILE, "a finished tuned model")

    pairs, counts = _select_pairs(data_dir, train_file, sources, max_pairs, config.seed)
    work = output / CHECKPOINTS
    st_model, kept = _extended_model(source, table, offset, work / "initial-model", config)
    transformer = st_model[0].auto_model
    frozen_before = {k: v.detach().clone() for k, v in transformer.state_dict().items()}

    def collator(st: Any, prompts: dict[str, str]) -> PoseDataCollator:
        return PoseDataCollator(
            preprocess_fn=st.preprocess,
            prompts=prompts,
            target_length=max_length,
            original_length=lo,
            position_offset=offset,
            seed=config.seed,
        )

    identity = {
        "model": str(source.folder or source.transformer_path),
        "method": method,
        "max_length": max_length,
        "pairs": counts,
        "pairs_sha256": pairs_digest(pairs),
        **_objective_identity(objective, distill_weight),
    }
    original_rows = kept.nonzero().flatten()

    def loss(st: SentenceTransformer) -> torch.nn.Module:
        return tuning_loss(st, objective, config.temperature, original_rows, offset, distill_weight)

    summary = train_contrastive(
        st_model, pairs, output, config, prompts=retrieval_prompts(source.prompts), collator=collator,
        run_identity=identity, loss=loss,
    )
    _check_frozen(transformer, frozen_before, kept, offset)
    st_model.max_seq_length = max_length
    st_model.save(str(output))
    weights_follow_umask(output)
    record = {
        "base_model": source.name,
        "training": {
            "data": counts,
            "config": config.to_dict(),
            **_objective_identity(objective, distill_weight),
            "summary": summary.to_dict(),
        },
    }
    write_table_record(output, table, {"tuning": TUNING_FILE})
    (output / TUNING_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return TuningResult(output, summary, record)


def _objective_identity(objective: str, distill_weight: float) -> dict[str, Any]:
    """The objective in a run's identity and record; the paper's contrastive runs keep their old identity
    (no key), so a run checkpointed before objectives existed still resumes."""
    if objective == "contrastive":
        return {}
    return {"objective": objective, "distill_weight": distill_weight}


def _check_tuning_options(method: str, config: ContrastiveConfig) -> None:
    """A tunable method, and no weight decay (it would shrink the frozen rows too: module docstring)."""
    if method not in TUNABLE_METHODS:
        raise UserError(f"position tuning starts from one of {TUNABLE_METHODS}, not {method!r}")
    if config.weight_decay != 0:
        raise UserError(
            "position tuning needs weight_decay=0: decoupled weight decay would also shrink the frozen original rows"
        )


def _original_table(source: ModelSource) -> tuple[int, int]:
    """(offset, Lo) of the learned position table of an original (not yet extended) APE model."""
    if source.extended_table is not None:
        raise UserError(f"{source.name} is already extended ({source.extended_table.method}); tune the original model")
    model_config = AutoConfig.from_pretrained(source.transformer_path)
    if detect_position_scheme(model_config) != APE:
        raise UserError(
            "position tuning trains the rows of a learned position table (BERT, XLM-R); "
            f"{source.name} has {detect_position_scheme(model_config).upper()} positions"
        )
    positions = AbsolutePositions("truncate", model_config)
    return positions.offset, positions.original_length


def _extended_model(
    source: ModelSource, table: ExtendedTable, offset: int, initial: Path, config: ContrastiveConfig
) -> tuple[SentenceTransformer, torch.Tensor]:
    """The model extended to Lt rows (written once to ``initial``, reused on resume), with every weight
    frozen but the new rows; and the mask of the table rows that are original (kept)."""
    method, lo, max_length = table.method, table.original_length, table.table_length
    if not is_sentence_transformers_folder(initial):
        shutil.rmtree(initial, ignore_errors=True)
        write_extended_table_model(source, method, max_length, initial)
    st_model = SentenceTransformer(str(initial), device=str(resolve_device(config.device)))
    st_model.max_seq_length = min(config.max_seq_length or lo, lo)
    transformer = st_model[0].auto_model
    original_table = transformer.embeddings.position_embeddings.weight.detach().clone()
    _, kept = extended_position_table(original_table[offset : offset + lo], method, max_length)
    freeze_all_but_new_rows(transformer, kept, offset)
    return st_model, kept


def _select_pairs(
    data_dir: str | Path | None,
    train_file: str | Path | None,
    sources: tuple[str, ...],
    max_pairs: int | None,
    seed: int,
) -> tuple[list[TrainingPair], dict[str, int]]:
    pair_sources = training_pairs(data_dir, sources, train_file, seed)
    pairs = [p for s in pair_sources for p in s.pairs]
    counts = {s.name: len(s.pairs) for s in pair_sources}
    random.Random(f"longembed-tune:{seed}").shuffle(pairs)
    if max_pairs is not None:
        if max_pairs < 1:
            raise UserError(f"max_pairs must be positive, got {max_pairs}")
        pairs = pairs[:max_pairs]
    counts["used"] = len(pairs)
    return pairs, counts


def _check_frozen(model: torch.nn.Module, before: dict[str, torch.Tensor], kept: torch.Tensor, offset: int) -> None:
    """Every original weight, and every original row of the table, is bit-identical after training."""
    key = "embeddings.position_embeddings.weight"
    for name, value in model.state_dict().items():
        old = before[name]
        if name == key:
            rows = torch.cat([torch.ones(offset, dtype=torch.bool), kept.bool()])
            value, old = value[rows], old[rows]
        if not torch.equal(value.cpu(), old.cpu()):
            raise RuntimeError(f"a frozen weight changed during position tuning: {name}")
