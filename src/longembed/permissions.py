"""The permissions a new file or folder gets: what ``open()`` and ``mkdir`` give under the umask.

Files written atomically start as ``mkstemp`` / ``mkdtemp`` temporaries, which are owner-only; they
are given these permissions before they are renamed into place, so results, caches, shards and
exports are readable by the other users of a shared filesystem exactly when an ordinary file would be.
"""

from __future__ import annotations

import os
import threading

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
