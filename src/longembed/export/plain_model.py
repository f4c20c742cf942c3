"""Write an extended model as a standard folder that other tools load with no longembed code.

What a plain model can express, and how (with Lo the trained context, Lt the target, s = ceil(Lt/Lo)):

- APE (BERT, XLM-R): ``pi``, ``gp`` and ``rp`` are fixed position maps, so each is a position table of
  Lt rows (``extension.ape.extended_position_table``); a folder made by ``longembed tune`` already is
  one.  Ids 0..n-1 on that table are what longembed computes for inputs longer than Lo.
- RoPE (nomic-bert, ModernBERT, Llama-style): the rotary parameters in ``config.json``, which each
  method writes (``rope_parameters``): ``pi`` as rope_type "linear" (factor s), static ``ntk`` as
  rope_theta x lambda, dynamic ``ntk`` as rope_type "dynamic" (factor F), ``yarn`` as rope_type "yarn"
  (factor s, original_max_position_embeddings Lo).

A plain model applies its one position map to every input, where longembed by default leaves inputs
of at most Lo tokens untouched (``apply_to="long"``): an exported model's vectors for short inputs
differ from the original model's (measured in RESULTS.md), except RP and tuned RP, whose first Lo rows
are the original ones.  Methods no config can express (SelfExtend, PCW, GP on RoPE, per-document
scales, log-n scaling, TempScale) are refused with the method's reason (``export_refusal``) and the
list of those that can be exported.

The output is a sentence-transformers folder (modules.json, pooling, normalization, prompts) whose
``max_seq_length`` is Lt, plus ``longembed_positions.json`` so that ``load_encoder(folder)`` reads an
APE folder as what it is (short inputs on the original rows).
"""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModel

from longembed.config import EncoderConfig, check_scale_factor
from longembed.errors import UserError
from longembed.export.folders import check_destination, staged_folder
from longembed.extension.ape import EXTENDED_TABLE_FILE, ExtendedTable, extended_position_table
from longembed.extension.methods import (
    APE,
    METHODS,
    ROPE,
    ExtensionMethod,
    build_method,
    detect_position_scheme,
)
from longembed.extension.positions import AbsolutePositions, RotaryPositions
from longembed.extension.scaling import fixed_scale
from longembed.loading import ModelSource, load_transformer, resolve_model
from longembed.permissions import weights_follow_umask

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


def exportable_by_scheme() -> dict[str, tuple[str, ...]]:
    """What ``export_model`` can write, per position scheme (each method's ``exportable_on``)."""
    return {scheme: tuple(n for n, m in METHODS.items() if scheme in m.exportable_on) for scheme in (APE, ROPE)}


#: What ``export_model`` can write, per position scheme (as of import; ``exportable_by_scheme`` is live).
EXPORTABLE = exportable_by_scheme()


def exportable_methods() -> str:
    return "; ".join(
        f"{scheme.upper()} models: {', '.join(methods)}" for scheme, methods in exportable_by_scheme().items()
    )


def export_model(
    model: str | Path,
    method: str | None,
    max_length: int | None,
    output: str | Path,
    overwrite: bool = False,
    **options: Any,
) -> Path:
    """Write ``model`` extended with ``method`` to ``max_length`` tokens as a plain folder at ``output``.

    ``options`` are ``EncoderConfig`` fields (ntk_factor, ntk_variant, yarn_options); those a plain
    config cannot express are refused.  A folder from ``longembed tune`` exports with its own method
    and Lt (``method``/``max_length`` may be None).  Returns the output folder.
    """
    source = resolve_model(model)
    output = Path(output)
    check_destination(output, [p for p in (source.folder, source.transformer_path) if p is not None], overwrite)
    write = _planned_export(source, str(model), method, max_length, options)  # every check, nothing written
    with staged_folder(output) as staging:  # a failure leaves the previous output as it was
        write(staging)
    return output


def _planned_export(
    source: ModelSource, model: str, method: str | None, max_length: int | None, options: dict[str, Any]
) -> Callable[[Path], Path]:
    """Check every setting against the model (its config only, no weights) and return the writer."""
    table = source.extended_table
    if table is not None:
        _check_extended_folder(source, table, method, max_length)
        return functools.partial(_copy_folder, source)
    if method is None or max_length is None:
        raise UserError(f"give the method and max_length to export ({exportable_methods()})")
    config = EncoderConfig.from_options(model, method, max_length, **options)
    _refuse_inexpressible(config)
    model_config = AutoConfig.from_pretrained(source.transformer_path)
    scheme = config.position_scheme or detect_position_scheme(model_config)
    reason = METHODS[method].export_reason(scheme)
    if reason is not None:
        raise UserError(
            f"method {method!r} on a {scheme.upper()} model has no plain-model equivalent ({reason}); "
            f"exportable: {exportable_methods()}"
        )
    positions = AbsolutePositions if scheme == APE else RotaryPositions
    lo = positions("truncate", model_config, config.original_length).original_length
    if max_length <= lo:
        raise UserError(f"max_length={max_length} is not beyond this model's Lo={lo}: nothing to extend")
    check_scale_factor(max_length, lo)
    if scheme == APE:
        return lambda folder: write_extended_table_model(source, method, max_length, folder)
    return lambda folder: _write_rotary_model(source, build_method(config), config, model_config, folder)


def write_extended_table_model(
    source: ModelSource, method: str, max_length: int, output: Path, original_length: int | None = None
) -> Path:
    """An APE model with its position table extended to ``max_length`` rows by ``method`` (pi, gp, rp)."""
    transformer = load_transformer(source.transformer_path)
    positions = AbsolutePositions("truncate", transformer.config, original_length)
    offset, lo = positions.offset, positions.original_length
    if max_length <= lo:
        raise UserError(f"max_length={max_length} is not beyond this model's Lo={lo}: nothing to extend")
    check_scale_factor(max_length, lo)
    weight = transformer.embeddings.position_embeddings.weight.detach()
    rows, _ = extended_position_table(weight[offset : offset + lo], method, max_length)
    new_table = torch.cat([weight[:offset], rows])
    state = {k: v for k, v in transformer.state_dict().items() if not k.startswith("embeddings.position_ids")}
    state["embeddings.position_embeddings.weight"] = new_table
    new_config = AutoConfig.from_pretrained(source.transformer_path)
    new_config.max_position_embeddings = offset + max_length
    extended = AutoModel.from_config(new_config)
    missing, unexpected = extended.load_state_dict(state, strict=False)
    if unexpected or any(not _is_buffer(extended, key) for key in missing):
        raise UserError(f"cannot rebuild the model with a longer table (missing {missing}, unexpected {unexpected})")
    transformer_dir = _copy_folder(source, output)
    _remove_weights(transformer_dir)
    extended.save_pretrained(transformer_dir)
    weights_follow_umask(transformer_dir)  # also outside an export's staging (tune's initial model)
    _set_max_seq_length(output, transformer_dir, max_length)
    record = ExtendedTable(method, lo, max_length)
    write_table_record(output, record)
    return output


def write_table_record(folder: Path, table: ExtendedTable, extra: dict[str, Any] | None = None) -> None:
    """``longembed_positions.json``: how longembed reads an extended table (and what made it)."""
    (Path(folder) / EXTENDED_TABLE_FILE).write_text(
        json.dumps({**table.to_dict(), **(extra or {})}, indent=2, sort_keys=True) + "\n"
    )


def _check_extended_folder(
    source: ModelSource, table: ExtendedTable, method: str | None, max_length: int | None
) -> None:
    """A tuned (or already exported) folder is a plain model already: it exports (is copied) as it is."""
    if method not in (None, table.method):
        raise UserError(
            f"{source.name} has a position table extended with {table.method!r}; it exports with that method only"
        )
    if max_length not in (None, table.table_length):
        raise UserError(
            f"{source.name} has {table.table_length} positions; export it with max_length={table.table_length} "
            "(or none)"
        )


def _write_rotary_model(
    source: ModelSource, method: ExtensionMethod, config: EncoderConfig, model_config: Any, output: Path
) -> Path:
    """Copy the folder and put the method's rotary parameters (``rope_parameters``) into config.json."""
    lo = RotaryPositions("truncate", model_config, config.original_length).original_length
    lt = config.max_length
    if lt <= lo:
        raise UserError(f"max_length={lt} is not beyond this model's Lo={lo}: nothing to extend")
    check_scale_factor(lt, lo)
    s = fixed_scale(lt, lo)
    transformer_dir = _copy_folder(source, output)
    config_file = transformer_dir / "config.json"
    raw = json.loads(config_file.read_text())
    params = raw.get("rope_parameters")
    layered = isinstance(params, dict) and all(isinstance(v, dict) for v in params.values()) and params

    def rewrite(p: dict[str, Any]) -> dict[str, Any]:
        if p.get("rope_type", "default") != "default":
            raise UserError(f"the model already uses rope_type {p['rope_type']!r}; export starts from plain RoPE")
        base = float(p.get("rope_theta", raw.get("rope_theta", 10000.0)))
        return method.rope_parameters(dict(p), base, s, lo)

    if layered:
        raw["rope_parameters"] = {name: rewrite(p) for name, p in params.items()}
    else:
        raw["rope_parameters"] = rewrite(params or {})
        raw.pop("rope_theta", None)
    if method.export_raises_max_positions:  # else the config reads Lo there (dynamic NTK)
        raw["max_position_embeddings"] = max(int(raw.get("max_position_embeddings", lo)), lt)
    config_file.write_text(json.dumps(raw, indent=2) + "\n")
    _set_max_seq_length(output, transformer_dir, lt)
    return output


def _refuse_inexpressible(config: EncoderConfig) -> None:
    problems = []
    if config.scale != "fixed":
        problems.append("scale='per_document' (a plain model has one scale for every input)")
    if config.attention_scale is not None:
        problems.append("attention_scale='logn'")
    if config.temperature != 1.0 or config.temperature_decay:
        problems.append("TempScale (temperature)")
    if problems:
        raise UserError(f"a plain model cannot express {', '.join(problems)}; exportable: {exportable_methods()}")


def _copy_folder(source: ModelSource, output: Path) -> Path:
    """Copy the model folder (no training checkpoints) as a sentence-transformers folder; returns the
    transformer's folder inside it."""
    root = source.folder or source.transformer_path
    shutil.copytree(root, output, ignore=shutil.ignore_patterns("checkpoints", ".git*"), dirs_exist_ok=True)
    transformer_dir = output / source.transformer_path.relative_to(root)
    if not (output / "modules.json").is_file():
        _write_modules(output, source, transformer_dir)
    return transformer_dir


def _write_modules(output: Path, source: ModelSource, transformer_dir: Path) -> None:
    """modules.json + pooling (+ normalize) for a plain Hugging Face folder, so ST pools as longembed does."""
    hidden = json.loads((transformer_dir / "config.json").read_text())["hidden_size"]
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if source.normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (output / "1_Pooling").mkdir(exist_ok=True)
    mode = {"mean": "mean_tokens", "cls": "cls_token", "last": "lasttoken"}[source.pooling]
    (output / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": hidden, f"pooling_mode_{mode}": True}, indent=2) + "\n"
    )
    (output / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")


def _set_max_seq_length(output: Path, transformer_dir: Path, max_length: int) -> None:
    """Let sentence-transformers and the tokenizer take Lt tokens (they would cut at 256 or 512)."""
    for folder in {output, transformer_dir}:
        st_config = folder / "sentence_bert_config.json"
        values = json.loads(st_config.read_text()) if st_config.is_file() else {}
        if st_config.is_file() or folder == transformer_dir:
            st_config.write_text(json.dumps({**values, "max_seq_length": max_length}, indent=2) + "\n")
        tokenizer_config = folder / "tokenizer_config.json"
        if tokenizer_config.is_file():
            values = json.loads(tokenizer_config.read_text())
            tokenizer_config.write_text(json.dumps({**values, "model_max_length": max_length}, indent=2) + "\n")


def _remove_weights(folder: Path) -> None:
    for name in _WEIGHT_FILES:
        (folder / name).unlink(missing_ok=True)


def _is_buffer(model: torch.nn.Module, key: str) -> bool:
    return key in dict(model.named_buffers())
