"""The files an index keeps beside its table for each complete version (saved BM25, vectors, spans):
where they are, how a build publishes them, and which version a search opens.

A build writes a version's files into a fresh folder and renames it into place
(``versions/<version>-<when it was written>``), then moves the pointer :data:`POINTER` (``complete.json``, replaced in one
rename) to that version, and only then removes the folders of other versions.  So the pointer always
names a folder that is whole, and a build that dies midway leaves the pointer, and the files it names,
as the last complete build left them.  A search reads the pointer, never the table's tag, so what it
opens is one version's files and table rows together.

Every read and write of these files goes through this module's functions, so that an index on object
storage (``s3://...``) can keep them there: for such a URI today they report no saved files, and a
search builds what it needs from the table in memory, as for an index built before they existed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from longembed.durable import durable_replace_folder, fsync_path
from longembed.errors import UserError

#: the folder (in the index folder) holding one folder per saved version
VERSIONS_DIR = "versions"
#: the file (in the index folder) naming the version a search opens
POINTER = "complete.json"


def is_local(path: str | Path) -> bool:
    """Whether the index is a folder on this machine (not an object-storage URI)."""
    return "://" not in str(path)


def version_name(version: int, written_at: str | None) -> str:
    """The name of a version's files: its number and when it was written (a ``--rebuild`` starts the
    table's numbers again, so the number alone could name an older table's files)."""
    return f"{version}-{''.join(c for c in written_at or '' if c.isdigit())}"


def has_pointer(path: str | Path) -> bool:
    """Whether the local index has a pointer (:data:`POINTER`): a build saved its files at least once."""
    return is_local(path) and (Path(path) / POINTER).is_file()


def saved_version(path: str | Path) -> tuple[str, Path] | None:
    """The name of the version the pointer names and the local folder of its files; None when the index
    has no saved files (built before they existed, or not on this machine)."""
    if not is_local(path):
        return None
    pointer = Path(path) / POINTER
    try:
        name = str(json.loads(pointer.read_text(encoding="utf-8"))["version"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:  # JSON, UTF-8 or its key
        raise UserError(f"--index {path}: {POINTER} cannot be read ({type(exc).__name__}); run longembed index "
                        "again on the same sources to write it anew (or give --rebuild)") from None
    folder = Path(path) / VERSIONS_DIR / name
    return (name, folder) if folder.is_dir() else None


def save(path: str | Path, name: str, write: Callable[[Path], None]) -> bool:
    """Save the files of the version ``name`` (:func:`version_name`) (``write(folder)`` fills a fresh folder, renamed into place whole and
    flushed to the disk) unless they are saved already; False (nothing written) for an index not on
    this machine.  Searches open them once :func:`point_to` names the version."""
    if not is_local(path):
        return False
    versions = Path(path) / VERSIONS_DIR
    versions.mkdir(parents=True, exist_ok=True)
    final = versions / name
    if final.is_dir():
        return True
    staging = versions / f".writing-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        write(staging)
        durable_replace_folder(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a write that failed leaves nothing
    return True


def point_to(path: str | Path, name: str) -> None:
    """Point searches at the saved files of the version ``name`` (the pointer replaced in one durable rename: a reader
    sees the old one or the new one, whole), then remove every other version's files."""
    if not is_local(path):
        return
    folder = Path(path)
    staging = folder / f".{POINTER}.{os.getpid()}"
    staging.write_text(json.dumps({"version": name}), encoding="utf-8")
    fsync_path(staging)
    staging.replace(folder / POINTER)
    fsync_path(folder, is_dir=True)
    for other in (folder / VERSIONS_DIR).iterdir():
        if other.name != name:
            shutil.rmtree(other, ignore_errors=True)
