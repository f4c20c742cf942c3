"""The recipe's three stages, run one at a time into a folder: :func:`train_jina`."""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.errors import MissingFileError, UserError
from longembed.models.jina_bert import JinaBertForMaskedLM
from longembed.permissions import weights_follow_umask
from longembed.training.config import ContrastiveConfig
from longembed.training.contrastive import require_training_extra, train_contrastive
from longembed.training.data import TrainingPair, pairs_digest
from longembed.training.jina.config import JinaRecipeConfig, check_stage
from longembed.training.jina.data import (
    held_out_pairs,
    mlm_corpus,
    read_texts_jsonl,
    recipe_pairs,
    texts_digest,
)
from longembed.training.jina.folders import (
    RECORD_FILE,
    device_or_default,
    readable_length,
    sentence_model,
    tokenizer_folder,
    trained_length,
    transformer_folder,
    write_sentence_transformers_files,
)
from longembed.training.jina.held_out import held_out_retrieval
from longembed.training.mlm import build_mlm_model, is_alibi_folder, load_mlm_model, load_tokenizer, train_mlm
from longembed.training.runs import CHECKPOINTS, TrainingSummary, prepare_output


@dataclass
class StageResult:
    """A finished stage: its folder, what its training did, and the record written beside the model."""

    folder: Path
    summary: TrainingSummary
    record: dict[str, Any]


def train_jina(
    stage: str,
    output: Path | str,
    init: Path | str | None = None,
    config: JinaRecipeConfig | None = None,
    data_dir: Path | str | None = None,
    max_steps: int | None = None,
    device: str | None = None,
    precision: str | None = None,
    overwrite: bool = False,
) -> StageResult:
    """Run one stage of the recipe into ``output`` (module docstring); ``init`` is the previous stage's folder.

    ``max_steps``, ``device`` and ``precision`` override the stage's section of ``config``.  Stage
    ``mlm`` starts from a new model (``config.model``) unless ``init`` names an MLM folder to continue;
    ``pairs`` and ``negatives`` need ``init``.  Returns the folder, the training summary and the record
    (also written to ``OUTPUT/longembed_jina.json``).
    """
    require_training_extra()
    check_stage(stage)
    config = (config or JinaRecipeConfig()).with_overrides(stage, max_steps, device, precision)
    output = Path(output)
    init = Path(init) if init is not None else None
    if init is not None and not (init / "config.json").is_file() and not (init / "modules.json").is_file():
        raise MissingFileError(f"--init {init} is not a model folder (no config.json)")
    if stage != "mlm" and init is None:
        raise UserError(f"stage {stage!r} fine-tunes a model: give --init, the folder of the previous stage")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise MissingFileError(f"--data-dir {data_dir} is not a folder")
    prepare_output(output, overwrite, [init] if init is not None else [], RECORD_FILE, "a finished stage")
    if stage == "mlm":
        return _train_mlm_stage(output, init, config, data_dir)
    return _train_contrastive_stage(stage, output, init, config, data_dir)


def _train_mlm_stage(
    output: Path, init: Path | None, config: JinaRecipeConfig, data_dir: Path | str | None
) -> StageResult:
    data, mlm = config.data, config.mlm
    if data.text_file is not None:
        texts, held_texts = read_texts_jsonl(data.text_file), []
        counts = {"text_file": len(texts)}
    elif data_dir is not None:
        texts, held_texts = mlm_corpus(data_dir, data.held_out_articles, data.seed)
        counts = {"documents": len(texts), "held_out_articles": len(held_texts)}
    else:
        raise UserError(
            "stage mlm needs text: give --data-dir (../shared/data) or data.text_file in the config"
        )
    if init is not None:
        model = load_mlm_model(transformer_folder(init))
        tokenizer = load_tokenizer(transformer_folder(init))
    else:
        tokenizer = load_tokenizer(tokenizer_folder(data.tokenizer))
        model = build_mlm_model(config.model, tokenizer, mlm.training_length, seed=mlm.seed)
    alibi = isinstance(model, JinaBertForMaskedLM)
    if not alibi and mlm.training_length > model.config.max_position_embeddings:
        raise UserError(
            f"mlm.training_length {mlm.training_length} is longer than the model's "
            f"{model.config.max_position_embeddings}-position table"
        )
    identity = {
        "stage": "mlm",
        "model": dataclasses.asdict(config.model) if init is None else str(init.resolve()),
        "data": counts,
        "texts_sha256": texts_digest(texts),
    }
    held = held_out_pairs(config.data, data_dir)
    summary = train_mlm(model, tokenizer, texts, output, mlm, run_identity=identity)
    if alibi:
        model.config.training_length = mlm.training_length
    tokenizer.model_max_length = readable_length(model.config)
    model.save_pretrained(output)
    weights_follow_umask(output)
    tokenizer.save_pretrained(output)
    write_sentence_transformers_files(output, device_or_default(mlm.device))
    record = {
        "stage": "mlm",
        "init": str(init) if init is not None else None,
        "positions": "alibi" if alibi else "absolute",
        "data": counts,
        "summary": summary.to_dict(),
    }
    return _finish(output, config, record, summary, held)


def _train_contrastive_stage(
    stage: str, output: Path, init: Path, config: JinaRecipeConfig, data_dir: Path | str | None
) -> StageResult:
    section: ContrastiveConfig = getattr(config, stage)
    train, held, counts = recipe_pairs(config.data, data_dir)
    init_folder = transformer_folder(init)
    length = trained_length(json.loads((init_folder / "config.json").read_text()))
    st_model = sentence_model(init, section.max_seq_length or length, device_or_default(section.device))
    identity = {
        "stage": stage,
        "init": str(init.resolve()),
        "pairs": counts,
        "pairs_sha256": pairs_digest(train),
    }
    summary = train_contrastive(st_model, train, output, section, run_identity=identity)
    st_model.max_seq_length = readable_length(st_model[0].auto_model.config)
    st_model.save(str(output))
    weights_follow_umask(output)
    record = {
        "stage": stage,
        "init": str(init),
        "positions": "alibi" if is_alibi_folder(init_folder) else "absolute",
        "data": counts,
        "summary": summary.to_dict(),
    }
    return _finish(output, config, record, summary, held if config.data.evaluate else [])


def _finish(
    output: Path,
    config: JinaRecipeConfig,
    record: dict[str, Any],
    summary: TrainingSummary,
    held: list[TrainingPair],
) -> StageResult:
    """Score the held-out pairs (when there are any), write the record, drop the checkpoints."""
    record = {**record, "config": config.to_dict(), "format_version": 1}
    if held:
        device = getattr(config, record["stage"]).device
        record["held_out"] = held_out_retrieval(output, held, config.data.max_held_out_queries, device=device)
    (output / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(output / CHECKPOINTS, ignore_errors=True)
    return StageResult(output, summary, record)
