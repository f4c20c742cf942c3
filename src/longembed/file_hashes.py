"""Each file of a model folder by size and sha256 (the weights' by their first and last MiB): what an
index records of its model, compared without importing torch or transformers (a cold search checks the
files of the model its saved query program came from)."""

from __future__ import annotations

import datetime as _dt
import hashlib
from pathlib import Path
from typing import Any

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


def folder_files(folder: Path) -> dict[str, Any]:
    """:func:`hash_file` of every file of ``folder`` (hidden ones excluded), by relative path."""
    files: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            files[rel.as_posix()] = hash_file(path)
    return files


def same_files(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two :func:`model_identity` records name the same file contents (paths and mtimes aside)."""
    def contents(identity: dict[str, Any] | None) -> Any:
        if identity is None:
            return None
        return {name: (f["size"], f["sha256"]) for name, f in identity["files"].items()}

    return contents(a) == contents(b)
