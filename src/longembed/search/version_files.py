"""The files an index keeps beside its table for each complete version (saved BM25, vectors, spans):
where they are, how a build publishes them, and which version a search opens, on disk or on S3.

A build writes a version's files into a fresh folder and renames it into place
(``versions/<version>-<when it was written>``), then moves the pointer :data:`POINTER` (``complete.json``, replaced in one
rename) to that version, and only then removes the folders of other versions.  So the pointer always
names a folder that is whole, and a build that dies midway leaves the pointer, and the files it names,
as the last complete build left them.  A search reads the pointer, never the table's tag, so what it
opens is one version's files and table rows together.

On S3 (``s3://bucket/prefix``) the same files are objects: a build writes them in a local folder,
uploads them to ``prefix/versions/<name>/``, then puts the pointer object last (one PUT is atomic: a
reader gets the old pointer or the new one), which lists the version's files and their sizes, and then
deletes the other versions' objects.  A search reads the pointer and downloads that version's files once
into a local cache (:func:`cache_root`, one folder per index URI holding the version it last opened),
into a temporary folder renamed into place when every file has arrived whole (a killed download is never
used), and opens them as it opens a local index's; a cached file whose size differs from the pointer's
is downloaded again.  On gs:// and az:// no files are saved: a search builds what it needs from the
table in memory, as for an index built before they existed.

Every read and write of these files goes through this module's functions.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import longembed.search as heavy
from longembed.durable import durable_replace_folder, fsync_path
from longembed.errors import MissingExtraError, UserError

#: the folder (in the index folder) holding one folder per saved version
VERSIONS_DIR = "versions"
#: the file (in the index folder) naming the version a search opens
POINTER = "complete.json"
#: the environment variable naming the folder S3 indexes' versions are downloaded into
CACHE_ENV = "LONGEMBED_INDEX_CACHE"
#: a version's name as :func:`version_name` writes it (a pointer naming anything else is refused)
NAME_PATTERN = re.compile(r"\d+-\d*")


class MissingVersionFile(FileNotFoundError):
    """A file of the version the pointer names is missing (on S3: its object, or a download cut short)."""

    def __init__(self, version: str, name: str) -> None:
        super().__init__(errno.ENOENT, f"{name} of version {version} is missing", name)
        self.version = version


def is_local(path: str | Path) -> bool:
    """Whether the index is a folder on this machine (not an object-storage URI)."""
    return "://" not in str(path)


def on_s3(path: str | Path) -> bool:
    """Whether the index is on S3 (``s3://``), where its version files are objects beside the table."""
    return str(path).lower().startswith("s3://")


def keeps_files(path: str | Path) -> bool:
    """Whether a build saves the index's version files (a local folder, or S3)."""
    return is_local(path) or on_s3(path)


def version_name(version: int, written_at: str | None) -> str:
    """The name of a version's files: its number and when it was written (a ``--rebuild`` starts the
    table's numbers again, so the number alone could name an older table's files)."""
    return f"{version}-{''.join(c for c in written_at or '' if c.isdigit())}"


def cache_root() -> Path:
    """Where S3 indexes' versions are downloaded: ``$LONGEMBED_INDEX_CACHE``, else
    ``~/.cache/longembed/index-cache``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "longembed" / "index-cache"


def cache_folder(path: str | Path) -> Path:
    """The cache folder of the S3 index ``path`` (named by a hash of its URI and the store's endpoint, so
    two stores' buckets of one name never share it)."""
    key = f"{os.environ.get('AWS_ENDPOINT_URL', '')}\n{str(path).rstrip('/')}"
    return cache_root() / hashlib.sha256(key.encode()).hexdigest()[:20]


def work_folder(path: str | Path) -> Path:
    """A local folder where a build of ``path`` may put scratch files on the disk its saved files are
    written to: the index folder, or the S3 index's cache folder (made here)."""
    if is_local(path):
        return Path(path)
    folder = cache_folder(path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def has_pointer(path: str | Path) -> bool:
    """Whether the index has a pointer (:data:`POINTER`): a build saved its files at least once."""
    if is_local(path):
        return (Path(path) / POINTER).is_file()
    return on_s3(path) and _s3_pointer(path) is not None


def saved_version(path: str | Path) -> tuple[str, Path] | None:
    """The name of the version the pointer names and the local folder of its files (on S3 downloaded
    first, unless cached); None when the index has no saved files (built before they existed, or on
    gs:// or az://).  A :class:`MissingVersionFile` when an S3 version's object is missing."""
    if on_s3(path):
        return _cached_version(path)
    if not is_local(path):
        return None
    pointer = Path(path) / POINTER
    try:
        name = _pointer_name(json.loads(pointer.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:  # JSON, UTF-8 or its key
        raise _unreadable_pointer(path, exc) from None
    folder = Path(path) / VERSIONS_DIR / name
    return (name, folder) if folder.is_dir() else None


def pointed_name(path: str | Path) -> str | None:
    """The name of the version the pointer names, without opening its files (None: no pointer)."""
    if on_s3(path):
        pointer = _s3_pointer(path)
        return None if pointer is None else pointer[0]
    if not is_local(path):
        return None
    try:
        return _pointer_name(json.loads((Path(path) / POINTER).read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise _unreadable_pointer(path, exc) from None


def save(path: str | Path, name: str, write: Callable[[Path], None]) -> bool:
    """Save the files of the version ``name`` (:func:`version_name`) (``write(folder)`` fills a fresh folder, renamed into place whole and
    flushed to the disk; on S3 uploaded, and kept as this machine's cached copy) unless they are saved
    already; False (nothing written) for an index on gs:// or az://.  Searches open them once
    :func:`point_to` names the version."""
    if not keeps_files(path):
        return False
    versions = Path(path) / VERSIONS_DIR if is_local(path) else work_folder(path)
    versions.mkdir(parents=True, exist_ok=True)
    final = versions / name
    if is_local(path) and final.is_dir():
        return True
    staging = versions / f".writing-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        write(staging)
        if on_s3(path):
            _upload(path, name, staging)
        if not final.exists():
            durable_replace_folder(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a write that failed leaves nothing
    return True


def point_to(path: str | Path, name: str) -> None:
    """Point searches at the saved files of the version ``name`` (the pointer replaced in one durable rename,
    on S3 one PUT: a reader sees the old one or the new one, whole), then remove every other version's files."""
    if on_s3(path):
        _s3_point_to(path, name)
        if (cache_folder(path) / name).is_dir():  # this machine's copy (the build's own): the others go
            _remove_other_versions(cache_folder(path), name)
        return
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


def discard_cached(path: str | Path, name: str) -> bool:
    """Remove this machine's cached copy of the S3 index's version ``name`` (a damaged one: the next
    :func:`saved_version` downloads it again); whether there was one to remove (never for a local index)."""
    if not on_s3(path):
        return False
    folder = cache_folder(path) / name
    if not folder.is_dir():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def _pointer_name(record: Any) -> str:
    """The version name a pointer's JSON names (a KeyError or TypeError when it names none, or not one
    :func:`version_name` writes: it becomes a folder's name)."""
    name = record["version"]
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise TypeError(f"not a version name: {name!r}")
    return name


def _unreadable_pointer(path: str | Path, exc: BaseException) -> UserError:
    return UserError(f"--index {path}: {POINTER} cannot be read ({type(exc).__name__}); run longembed index "
                     "again on the same sources to write it anew (or give --rebuild)")


def _cached_version(path: str | Path) -> tuple[str, Path] | None:
    """:func:`saved_version` of an S3 index: the pointer's version, downloaded unless cached whole."""
    pointer = _s3_pointer(path)
    if pointer is None:
        return None
    name, files = pointer
    root = cache_folder(path)
    folder = root / name
    damaged = _damaged_files(folder, files)
    if damaged is None:
        return name, folder
    if damaged:
        warnings.warn(f"{path}: the cached copy of version {name} is damaged ({damaged[0]} differs from the store's); "
                      "it is downloaded again", stacklevel=3)
        shutil.rmtree(folder, ignore_errors=True)
    _download(path, name, files, root)
    _remove_other_versions(root, name)
    return name, folder


def _s3_pointer(path: str | Path) -> tuple[str, dict[str, int]] | None:
    """The S3 pointer's version name and its files' sizes; None when there is no pointer object (or no
    boto3 to read it: said once per open, the table is read instead)."""
    try:
        body = heavy.S3Objects(path).read(POINTER)
    except MissingExtraError as exc:
        warnings.warn(f"{path}: the files saved with this index are not read, so every open reads all its rows ({exc})",
                      stacklevel=4)
        return None
    if body is None:
        return None
    try:
        record = json.loads(body)
        files = {str(k): int(v) for k, v in record["files"].items()}
        if not all(_safe_relative(k) for k in files):
            raise TypeError("a file outside the version's folder")
        return _pointer_name(record), files
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _unreadable_pointer(path, exc) from None


def _upload(path: str | Path, name: str, folder: Path) -> None:
    """Upload every file under ``folder`` as the objects of version ``name``."""
    store = heavy.S3Objects(path)
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        store.upload(f"{VERSIONS_DIR}/{name}/{file.relative_to(folder).as_posix()}", file)


def _s3_point_to(path: str | Path, name: str) -> None:
    """Put the pointer naming version ``name`` and its files' sizes (as the store lists them), then
    delete the other versions' objects."""
    store = heavy.S3Objects(path)
    under = f"{VERSIONS_DIR}/{name}/"
    files = {key[len(under):]: size for key, size in store.sizes(under).items()}
    if not files:
        raise UserError(f"--index {path}: the store holds no files of version {name} to point searches at")
    store.write(POINTER, json.dumps({"version": name, "files": files}, sort_keys=True).encode())
    store.delete([key for key in store.sizes(f"{VERSIONS_DIR}/") if not key.startswith(under)])


def _download(path: str | Path, name: str, files: dict[str, int], root: Path) -> None:
    """Download the version ``name`` into ``root/name``: into a temporary folder, each file's size
    checked, renamed into place whole (a copy another process finished first is kept)."""
    store = heavy.S3Objects(path)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".downloading-{name}-{uuid.uuid4().hex[:8]}-{os.getpid()}"
    staging.mkdir()
    try:
        for relative, size in sorted(files.items()):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                store.download(f"{VERSIONS_DIR}/{name}/{relative}", target)
            except FileNotFoundError:
                raise MissingVersionFile(name, relative) from None
            if target.stat().st_size != size:
                raise MissingVersionFile(name, relative)
        try:
            durable_replace_folder(staging, root / name)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not (root / name).is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _damaged_files(folder: Path, files: dict[str, int]) -> list[str] | None:
    """None when ``folder`` holds every file at the pointer's size; else the files that differ (empty
    when the folder is not there)."""
    if not folder.is_dir():
        return []
    damaged = []
    for relative, size in files.items():
        try:
            if (folder / relative).stat().st_size != size:
                damaged.append(relative)
        except FileNotFoundError:
            damaged.append(relative)
    return damaged or None


def _remove_other_versions(root: Path, name: str) -> None:
    """Keep one version per index in the cache: remove the others (a process still reading one keeps its
    memory maps), and downloads left by processes that died."""
    for other in root.iterdir():
        if other.is_dir() and _stale(other.name, name):
            shutil.rmtree(other, ignore_errors=True)


def _stale(folder: str, kept: str) -> bool:
    """Whether a cache folder is another version, or a download or write whose process has died."""
    if folder == kept:
        return False
    if not folder.startswith("."):
        return True
    return folder.startswith((".downloading-", ".writing-")) and not _alive(folder.rsplit("-", 1)[1])


def _alive(pid: str) -> bool:
    """Whether the process ``pid`` (a number from a folder's name) is running on this machine."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _safe_relative(relative: str) -> bool:
    """Whether a file name from the store stays inside the version's folder."""
    parts = Path(relative).parts
    return bool(parts) and not Path(relative).is_absolute() and ".." not in parts
