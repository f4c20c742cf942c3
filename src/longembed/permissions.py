"""The permissions a new file or folder gets: what ``open()`` and ``mkdir`` give under the umask.

Files written atomically start as ``mkstemp`` / ``mkdtemp`` temporaries, which are owner-only; they
are given these permissions before they are renamed into place, so results, caches, shards and
exports are readable by the other users of a shared filesystem exactly when an ordinary file would be.

safetensors (0.7 and later) writes every weight file the same way, an owner-only temporary
(``.tmpXXXXXX``, mode 0600) renamed into place, and gives it no other mode: whatever the umask,
``save_pretrained`` leaves ``model.safetensors`` -rw-------.  :func:`weights_follow_umask` is called on
each folder longembed saves a model into (exports, tuned, retrofitted and trained models, checkpoints).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

#: The mode ``open()`` asks for a new file (and ``mkdir`` for a folder); the umask takes bits away.
NEW_FILE_MODE = 0o666
NEW_FOLDER_MODE = 0o777
_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """This process's umask, read without changing it where the system allows (``/proc/self/status``,
    Linux 4.7+); else set and restored at once under a lock (``os.umask`` can only be read by setting it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def creation_mode(requested: int = NEW_FILE_MODE) -> int:
    """The permission bits a newly created file (``NEW_FILE_MODE``) or folder (``NEW_FOLDER_MODE``)
    gets under the current umask: what ``open()`` or ``mkdir`` would give it."""
    return requested & ~current_umask()


def weights_follow_umask(folder: Path | str) -> None:
    """Give every ``*.safetensors`` file under ``folder`` the mode ``open()`` would have given it under the
    umask (safetensors writes them owner-only: module docstring)."""
    mode = creation_mode(NEW_FILE_MODE)
    for path in Path(folder).rglob("*.safetensors"):
        if path.is_file() and not path.is_symlink():
            path.chmod(mode)
