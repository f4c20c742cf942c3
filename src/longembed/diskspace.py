"""Free disk space, checked before long work writes its results, so a full disk fails at once, not after it.

:func:`check_free_space` is what the training commands (distillation targets, teacher states) and
``longembed index`` run before they compute anything: an error naming the folder, what is needed and
what is free, and what to do.  :func:`is_disk_full` recognises the disk filling up anyway, midway (an
``OSError`` ENOSPC, or a library's error that says so), so that it too is one line and not a traceback.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from longembed.errors import UserFileError

__all__ = ["DiskFullError", "check_free_space", "free_bytes", "is_disk_full"]


class DiskFullError(UserFileError):
    """Not enough free disk space where something is written (a user error: free space, or write elsewhere)."""


def free_bytes(folder: Path | str) -> int:
    """Free bytes on the disk that holds ``folder`` (or, when it does not exist yet, its nearest parent)."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def check_free_space(folder: Path | str, needed: int, margin: int, what: str, advice: str) -> None:
    """A :class:`DiskFullError` when ``needed`` bytes plus ``margin`` spare are not free where ``folder``
    is written: ``{what} need(s) N MiB in folder but M MiB are free (keeping ...); {advice}``."""
    free = free_bytes(folder)
    if needed > free - margin:
        raise DiskFullError(
            f"{what} need {needed / 2**20:.1f} MiB in {folder} but {free / 2**20:.1f} MiB are free "
            f"(keeping {_size(margin)} spare); {advice}"
        )


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full (ENOSPC, or a message of a library that wraps it, as Lance does)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    return "no space left on device" in text or "disk quota exceeded" in text


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"
