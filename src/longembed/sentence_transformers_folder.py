"""The sentence-transformers folder format, read and written in one place.

A sentence-transformers folder is a Hugging Face model folder plus a pipeline of modules:

- ``modules.json``: the modules in order, each ``{"idx", "name", "path", "type"}``; the Transformer's
  ``path`` is where its config.json and weights are ("" for the folder itself), then a Pooling module
  (``1_Pooling/config.json``) and optionally a Normalize module (``2_Normalize``, no settings);
- ``sentence_bert_config.json`` beside the Transformer's weights: its ``max_seq_length``;
- ``config_sentence_transformers.json`` at the root: the named ``prompts`` (``{"query": "query: "}``),
  the similarity function and the versions that wrote it.

Loading a model (:mod:`longembed.loading`), exporting one (:mod:`longembed.export`), the retrofit's and
the Jina recipe's output folders and the cache's model identity all read or write the format through
this module.  It writes the classic form (``sentence_transformers.models.*`` types, ``pooling_mode_*``
keys), which every sentence-transformers release opens, and reads that form and the newer one
(``sentence_transformers.base.modules...`` types, a ``pooling_mode`` key).  Plain JSON: no import of
sentence-transformers, which is an optional extra.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.errors import UserError

MODULES_FILE = "modules.json"
#: The Transformer module's settings (``max_seq_length``), beside its weights.
TRANSFORMER_CONFIG_FILE = "sentence_bert_config.json"
#: The model's settings: prompts, similarity function, versions.
MODEL_CONFIG_FILE = "config_sentence_transformers.json"
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
#: longembed's pooling names -> the classic Pooling config's switch.
POOLING_SWITCHES = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "last": "pooling_mode_lasttoken"}
_MODULE_TYPES = {
    "Transformer": "sentence_transformers.models.Transformer",
    "Pooling": "sentence_transformers.models.Pooling",
    "Normalize": "sentence_transformers.models.Normalize",
}


@dataclass(frozen=True)
class SentenceTransformersFolder:
    """What a sentence-transformers folder declares: where the transformer is, how it pools, whether
    it normalizes, and its prompts.  ``pooling`` is None when the folder has no Pooling module."""

    root: Path
    transformer_path: Path
    pooling: str | None = None
    normalize: bool = False
    prompts: dict[str, str] = field(default_factory=dict)


def is_sentence_transformers_folder(folder: Path | str) -> bool:
    """Whether ``folder`` has a ``modules.json`` (else it is a plain Hugging Face folder, or none)."""
    return (Path(folder) / MODULES_FILE).is_file()


def read_modules(folder: Path | str) -> list[dict[str, Any]]:
    """The entries of ``folder``'s modules.json, in order."""
    path = Path(folder) / MODULES_FILE
    modules = json.loads(path.read_text())
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise UserError(f"{path}: expected a list of modules, got {type(modules).__name__}")
    return modules


def module_kind(module: Mapping[str, Any]) -> str:
    """The class name a modules.json entry names: "Transformer", "Pooling", "Normalize", ..."""
    return str(module.get("type", "")).rsplit(".", 1)[-1]


def read_folder(folder: Path | str) -> SentenceTransformersFolder:
    """Read a sentence-transformers folder's modules and prompts (a FileNotFoundError without modules.json)."""
    root = Path(folder)
    transformer, pooling, normalize = root, None, False
    for module in read_modules(root):
        kind, module_path = module_kind(module), root / module.get("path", "")
        if kind == "Transformer":
            transformer = module_path
        elif kind == "Pooling":
            pooling = read_pooling(module_path / "config.json")
        elif kind == "Normalize":
            normalize = True
    return SentenceTransformersFolder(root, transformer, pooling, normalize, read_prompts(root))


def transformer_path(folder: Path | str) -> Path:
    """The folder that holds the transformer's config.json: the Transformer module's path in a
    sentence-transformers folder, else ``folder`` itself."""
    folder = Path(folder)
    if is_sentence_transformers_folder(folder):
        for module in read_modules(folder):
            if module_kind(module) == "Transformer":
                return folder / module.get("path", "")
    return folder


def read_pooling(config_file: Path) -> str:
    """longembed's pooling name ("mean", "cls", "last") of a Pooling module's config.json (either form);
    a ValueError naming the file for any other pooling."""
    config = json.loads(Path(config_file).read_text())
    modes = [mode for mode, switch in POOLING_SWITCHES.items() if config.get(switch)]
    if config.get("pooling_mode") in POOLING_SWITCHES:
        modes = [config["pooling_mode"]]
    if len(modes) != 1:
        raise UserError(
            f"{config_file}: unsupported pooling configuration {config}; pass pooling= one of {tuple(POOLING_SWITCHES)}"
        )
    return modes[0]


def read_prompts(folder: Path | str) -> dict[str, str]:
    """The named prompts of ``folder``'s config_sentence_transformers.json ({} without one)."""
    path = Path(folder) / MODEL_CONFIG_FILE
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text()).get("prompts") or {})


def write_modules(
    folder: Path | str,
    pooling: str,
    embedding_dimension: int,
    normalize: bool = False,
    transformer: str = "",
) -> None:
    """Write modules.json and the Pooling module's config into ``folder``: the Transformer at
    ``transformer`` (relative to ``folder``; "" for the folder itself), ``pooling`` over vectors of
    ``embedding_dimension``, and a Normalize module when ``normalize``."""
    folder = Path(folder)
    if pooling not in POOLING_SWITCHES:
        raise UserError(f"pooling must be one of {tuple(POOLING_SWITCHES)}, got {pooling!r}")
    modules = [_module(0, "Transformer", transformer), _module(1, "Pooling", POOLING_DIR)]
    if normalize:
        modules.append(_module(2, "Normalize", NORMALIZE_DIR))
    (folder / POOLING_DIR).mkdir(parents=True, exist_ok=True)
    pooling_config = {"word_embedding_dimension": int(embedding_dimension), POOLING_SWITCHES[pooling]: True}
    _write_json(folder / POOLING_DIR / "config.json", pooling_config)
    _write_json(folder / MODULES_FILE, modules)


def _module(index: int, kind: str, path: str) -> dict[str, Any]:
    return {"idx": index, "name": str(index), "path": path, "type": _MODULE_TYPES[kind]}


def set_max_seq_length(folder: Path | str, max_seq_length: int) -> None:
    """Set ``max_seq_length`` in ``folder``'s sentence_bert_config.json (created when missing), the
    length beyond which sentence-transformers cuts inputs; other settings are kept."""
    path = Path(folder) / TRANSFORMER_CONFIG_FILE
    values = json.loads(path.read_text()) if path.is_file() else {}
    _write_json(path, {**values, "max_seq_length": int(max_seq_length)})


def copy_modules(source: Path | str, output: Path | str, max_seq_length: int) -> None:
    """Copy ``source``'s modules (their folders too), settings and prompts into ``output``, whose root
    holds the transformer: the Transformer's path becomes "", and ``max_seq_length`` is set."""
    source, output = Path(source), Path(output)
    modules = read_modules(source)
    for module in modules:
        if module_kind(module) == "Transformer":
            module["path"] = ""
        elif module.get("path") and (source / module["path"]).is_dir():
            shutil.copytree(source / module["path"], output / module["path"], dirs_exist_ok=True)
    _write_json(output / MODULES_FILE, modules)
    settings = transformer_path(source) / TRANSFORMER_CONFIG_FILE
    if settings.is_file():
        shutil.copy2(settings, output / TRANSFORMER_CONFIG_FILE)
    set_max_seq_length(output, max_seq_length)
    if (source / MODEL_CONFIG_FILE).is_file():
        shutil.copy2(source / MODEL_CONFIG_FILE, output / MODEL_CONFIG_FILE)


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")
