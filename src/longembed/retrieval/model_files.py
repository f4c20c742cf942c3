"""Which model files a vector came from (each file's size and sha256; the weights' by their first and
last MiB): the embedding cache keys on it, and an index records it so that ``longembed search`` never
encodes queries with another model than the one that encoded the documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from longembed.encoder_protocol import EncoderMetadata
from longembed.file_hashes import folder_files, hash_file, same_files
from longembed.loading import DEFAULT_MODEL, default_model_path
from longembed.sentence_transformers_folder import is_sentence_transformers_folder

__all__ = ["hash_file", "model_folder", "model_identity", "same_files"]


def model_folder(model: str | Path) -> Path | None:
    """The folder a model name resolves to without downloading anything (None if it is not local)."""
    if str(model) == DEFAULT_MODEL:
        try:
            return default_model_path()
        except (ImportError, FileNotFoundError):
            return None
    path = Path(model).expanduser()
    return path.resolve() if path.is_dir() else None


def model_identity(encoder: EncoderMetadata) -> dict[str, Any] | None:
    """A cheap, identifying description of the model behind ``encoder`` (None if unknown).

    Every file of the model folder (hidden ones excluded): size and sha256 (whole for files up to
    2 MiB, first and last MiB for larger ones such as the weights), and mtime. The folder path and the
    mtimes are recorded but are not part of the cache key (a copied folder stays warm).
    """
    source = encoder.source
    folder = model_folder(encoder.config.model)
    if folder is None and source is not None:
        transformer = Path(source.transformer_path)
        folder = transformer.parent if is_sentence_transformers_folder(transformer.parent) else transformer
    if folder is None or not folder.is_dir():
        return None
    return {"name": str(folder) if source is None else source.name, "path": str(folder), "files": folder_files(folder)}
