"""Reading and writing result files: atomic writes, JSON-safe values, errors that name the file.

Every file longembed writes as a result (``results.json``, ``sweep.json``, ``collapse.json``, the
embedding cache's parts) goes through :func:`atomic_write_bytes`: a reader sees the old file or the
whole new one, never half of one, and a run killed mid-write loses nothing that was finished.
The finished file has the permissions ordinary file creation gives (0o666 less the umask), not the
owner-only mode of ``mkstemp``'s temporary files, so the other users of a shared filesystem can
read results as they read any other file there.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from longembed.errors import MissingFileError, UserError
from longembed.permissions import NEW_FILE_MODE, creation_mode


def atomic_write_bytes(path: Path, write: Callable[[Any], None]) -> None:
    """Call ``write(file)`` on a temporary file next to ``path``, then rename it onto ``path``.

    The temporary file is flushed and fsynced before ``os.replace``, so a crash at any point leaves
    either the old file (or none) or the complete new one.  It is given the umask's permissions first
    (``mkstemp`` makes it owner-only), so ``path`` ends as a file ``open(path, "wb")`` would have made.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), creation_mode(NEW_FILE_MODE))
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unwritable_folder(folder: Path) -> str | None:
    """Why a new file cannot be written into ``folder`` (made with its parents if missing), or None.

    Tried for real in the folder, or in its nearest existing ancestor when it is still to be made: a
    temporary file is created and removed.  ``os.access`` is not enough: it says yes to root for folders
    root cannot write (``/sys``, read-only or root-squashed network mounts)."""
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        return f"{existing or folder} is not a writable folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".longembed-write-test-", dir=existing)
    except OSError as exc:
        return f"{existing} is not a writable folder ({exc.strerror or exc})"
    os.close(fd)
    Path(probe).unlink(missing_ok=True)
    return None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, lambda handle: handle.write(text.encode("utf-8")))


def write_json(path: Path, value: Any) -> Path:
    """Write ``value`` as indented JSON (NaN/inf as null, numpy values as Python) atomically."""
    atomic_write_text(path, json.dumps(json_safe(value), indent=2) + "\n")
    return path


def read_json(path: Path, what: str = "JSON file") -> Any:
    """Parse a JSON file; a missing file, bad UTF-8 or bad JSON raises an error naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingFileError(f"no {what} at {path}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}): not a {what}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}): not a {what}") from None


def read_json_object(path: Path, what: str, format_name: str | tuple[str, ...]) -> dict[str, Any]:
    """A JSON object whose ``format`` field is ``format_name`` (or one of them: a reader that still
    understands older formats); a clear error for anything else."""
    value = read_json(path, what)
    if not isinstance(value, dict):
        raise UserError(f"{path} holds a JSON {type(value).__name__}, not a {what}")
    formats = (format_name,) if isinstance(format_name, str) else format_name
    if value.get("format") not in formats:
        expected = " or ".join(repr(f) for f in formats)
        raise UserError(f"{path} is not a {what} (format {value.get('format')!r}, expected {expected})")
    return value


def load_result_file(
    path: str | Path, file_name: str, what: str, format_name: str | tuple[str, ...],
    from_dict: Callable[[dict[str, Any]], Any],
) -> Any:
    """Read a result file (``path`` is the file or the folder holding ``file_name``) into a typed object;
    every failure is a ValueError or FileNotFoundError that names the file."""
    path = Path(path)
    if path.is_dir():
        path = path / file_name
    data = read_json_object(path, what, format_name)
    try:
        return from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path}: malformed {what} ({type(exc).__name__}: {exc})") from None


def json_safe(value: Any) -> Any:
    """numpy scalars -> Python, NaN/inf -> None, dataclasses -> dicts, recursively (JSON has no NaN)."""
    if hasattr(value, "to_dict") and not isinstance(value, type):
        value = value.to_dict()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)


class FolderRecord(Protocol):
    """What :class:`RunFolder` needs of the results it writes (e.g. :class:`~longembed.results.RunResults`)."""

    file_name: ClassVar[str]
    incomplete_file_name: ClassVar[str]
    complete: bool
    created: str

    @classmethod
    def load(cls, path: str | Path) -> Any: ...

    def save(self, path: str | Path) -> Path: ...


class RunFolder:
    """The output folder of a run; writes ``results.json`` without ever losing a finished one.

    ``kind`` is the results class (:class:`~longembed.results.RunResults`): it names the files and
    reads a finished one back.
    """

    def __init__(self, path: str | Path, kind: type[FolderRecord]):
        self.path = Path(path)
        self.kind = kind
        self.results_file = self.path / kind.file_name
        self.incomplete_file = self.path / kind.incomplete_file_name
        self.backup: Path | None = None  # where a replaced finished results.json went
        self._finished: FolderRecord | None = None
        self._checked = False

    def _previous(self) -> FolderRecord | None:
        """The finished run already in the folder, if any (read once)."""
        if not self._checked:
            self._checked = True
            if self.results_file.is_file():
                try:
                    previous = self.kind.load(self.results_file)
                except ValueError:
                    previous = None  # not ours or damaged: it is backed up before being replaced
                    self._backup(None)
                self._finished = previous if previous is not None and previous.complete else None
        return self._finished

    def _backup(self, previous: FolderRecord | None) -> Path:
        stamp = (previous.created if previous is not None else "unreadable").replace(":", "")
        target = self.path / f"results.{stamp}.json"
        counter = 1
        while target.exists():
            counter += 1
            target = self.path / f"results.{stamp}-{counter}.json"
        self.results_file.rename(target)
        return target

    def write(self, results: FolderRecord) -> Path:
        """Write ``results``: unfinished next to a finished results.json, finished in its place.

        A finished results.json is renamed to ``results.<created>.json`` first, whatever the new run's
        configuration: a rerun of the same one (e.g. rescored from the embedding cache) gives the same
        scores, but the old file's timings recorded what the encoding cost, and are a result too.
        """
        previous = self._previous()
        if not results.complete:
            target = self.incomplete_file if previous is not None else self.results_file
            return results.save(target)
        if previous is not None:
            self.backup = self._backup(previous)
        written = results.save(self.results_file)
        self.incomplete_file.unlink(missing_ok=True)
        return written
