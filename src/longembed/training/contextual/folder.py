"""The trained model's folder: the original folder's files (tokenizer, sentence-transformers modules, prompts)
with the fine-tuned transformer weights, and ``longembed_contextual.json``.

The weights are saved through a freshly loaded copy of the original transformer class (longembed's
attention function and PI's interpolating table wrapper are the encoder's, never saved), so
``SentenceTransformer(folder)`` and transformers open it as they open the original.  The record's
"encoder" entry (method and Lt the model was trained under) makes ``load_encoder(folder)`` open it
that way, and tells ``advise`` how to run its late chunks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors import safe_open

from longembed.loading import ModelSource, load_transformer, quiet_transformers
from longembed.permissions import weights_follow_umask

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
#: What PI's wrapper adds to a parameter name (``extension.ape.InterpolatedPositionEmbedding``).
_WRAPPED = ".position_embeddings.embedding."


def plain_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trained model's weights under the original class's names."""
    return {name.replace(_WRAPPED, ".position_embeddings."): value for name, value in model.state_dict().items()}


def _saved_names(transformer_path: Path) -> set[str] | None:
    """The weight names of the original safetensors file (None: another format, every weight is saved).

    A weight the original folder lacks (a BERT pooler, initialised at random on every load and never
    trained here) is not saved either: the folder holds what was trained, and two identical runs write
    identical files."""
    path = transformer_path / "model.safetensors"
    if not path.is_file():
        return None
    with safe_open(str(path), framework="pt") as handle:
        return {_canonical(name) for name in handle.keys()}  # noqa: SIM118 (safe_open is not iterable)


def _canonical(name: str) -> str:
    """A weight name as the bare transformer names it (some files prefix the model's base name)."""
    return name.split(".", 1)[1] if name.startswith(("bert.", "roberta.", "model.")) else name


def write_trained_folder(trained: torch.nn.Module, source: ModelSource, output: Path) -> Path:
    """Copy the original model folder into ``output`` and replace its transformer's weights by ``trained``'s."""
    root = Path(source.folder or source.transformer_path)
    shutil.copytree(root, output, ignore=shutil.ignore_patterns("checkpoints", ".git*", "longembed_contextual.json"),
                    dirs_exist_ok=True)
    transformer_dir = output / Path(source.transformer_path).relative_to(root)
    fresh = load_transformer(Path(source.transformer_path))
    fresh.load_state_dict(plain_state(trained), strict=True)
    saved = _saved_names(Path(source.transformer_path))
    state = {k: v for k, v in fresh.state_dict().items() if saved is None or k in saved}
    for name in _WEIGHT_FILES:
        (transformer_dir / name).unlink(missing_ok=True)
    with quiet_transformers():
        fresh.save_pretrained(transformer_dir, state_dict=state)
    weights_follow_umask(transformer_dir)
    return transformer_dir
