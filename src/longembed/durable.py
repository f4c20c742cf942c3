"""Renames that survive a crash of the machine, the way PostgreSQL makes them (``durable_rename``).

``os.replace`` is atomic, but not durable: after a power loss the file system may show the new
name over a file whose data never reached the disk, or the old name again.  PostgreSQL's
``durable_rename`` (``src/backend/storage/file/fd.c``) fsyncs the file before the rename, then the
file under its new name and the directory that holds it.  For a folder of files (a training
checkpoint) that is: every file and folder in it before the rename, then the folder under its new
name and its parent after it.  As PostgreSQL does, a directory that cannot be opened or fsynced on
this platform (EACCES, EBADF, EINVAL) is skipped; a file that cannot be fsynced is an error.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: Errors a directory's fsync may give where the platform does not support it (PostgreSQL ignores them).
_DIRECTORY_FSYNC_UNSUPPORTED = (errno.EACCES, errno.EBADF, errno.EINVAL)


def fsync_path(path: Path | str, is_dir: bool = False) -> None:
    """Flush ``path`` (a file, or a directory's entries) to the disk."""
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if is_dir else 0))
    except OSError as exc:
        if is_dir and exc.errno in _DIRECTORY_FSYNC_UNSUPPORTED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if not (is_dir and exc.errno in _DIRECTORY_FSYNC_UNSUPPORTED):
            raise
    finally:
        os.close(fd)


def fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder``, then every folder (deepest first, ``folder`` last)."""
    for root, dirs, files in os.walk(folder, topdown=False):
        for name in files:
            path = Path(root, name)
            if not path.is_symlink():
                fsync_path(path)
        for name in dirs:
            if not Path(root, name).is_symlink():
                fsync_path(Path(root, name), is_dir=True)
    fsync_path(folder, is_dir=True)


def durable_replace_folder(source: Path, target: Path) -> None:
    """Rename the folder ``source`` to ``target`` (which must not exist) so that after a crash at any
    point the disk holds either no ``target`` or the whole of it: its contents are flushed before
    the rename, its new name (and the parent's entry) after it."""
    fsync_tree(source)
    os.replace(source, target)
    fsync_path(target, is_dir=True)
    fsync_path(target.parent, is_dir=True)
    if source.parent.resolve() != target.parent.resolve():
        fsync_path(source.parent, is_dir=True)  # the old entry's removal, too
