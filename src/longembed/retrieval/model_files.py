"""Which model files a vector came from (each file's size and sha256; the weights' by their first and
last MiB): the embedding cache keys on it, and an index records it so that ``longembed search`` never
encodes queries with another model than the one that encoded the documents."""

from __future__ import annotations

import datetime as _dt
import hashlib
from pathlib import Path
from typing import Any

from longembed.encoder_protocol import EncoderMetadata
from longembed.loading import DEFAULT_MODEL, default_model_path
from longembed.sentence_transformers_folder import is_sentence_transformers_folder

_SMALL_FILE = 2 << 20  # model files up to 2 MiB are hashed whole; larger ones by size + head + tail
_HEAD = 1 << 20


def hash_file(path: Path) -> dict[str, Any]:
    """size + sha256 of a small file, or of the first and last MiB of a large one; and the mtime."""
    stat = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        if stat.st_size <= _SMALL_FILE:
            digest.update(handle.read())
            how = "sha256"
        else:
            digest.update(handle.read(_HEAD))
            handle.seek(stat.st_size - _HEAD)
            digest.update(handle.read(_HEAD))
            how = "sha256 of first and last MiB"
    return {
        "size": stat.st_size,
        "sha256": digest.hexdigest(),
        "hashed": how,
        "mtime": _dt.datetime.fromtimestamp(stat.st_mtime, tz=_dt.UTC).isoformat(timespec="seconds"),
    }


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
    files: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            files[rel.as_posix()] = hash_file(path)
    return {"name": str(folder) if source is None else source.name, "path": str(folder), "files": files}


def same_files(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two :func:`model_identity` records name the same file contents (paths and mtimes aside)."""
    def contents(identity: dict[str, Any] | None) -> Any:
        if identity is None:
            return None
        return {name: (f["size"], f["sha256"]) for name, f in identity["files"].items()}

    return contents(a) == contents(b)
