"""How many CPU threads one forward runs on: inputs too small to share run on one thread (issue 54).

Waking torch's second thread costs more than it saves on a one-sentence query (468 ms against 13 ms on a
loaded machine), while a 512-token text runs in 141 ms on two threads and 239 ms on one.  So the rule
depends on the forward's size: at most :data:`SMALL_INPUT_TOKENS` padded tokens (texts x longest) run on
one thread, anything larger on torch's own setting.  ``benchmarks/small_input_threads.py`` measures it.

``torch.set_num_threads`` is process-wide (the MKL half of it at least), so the switch and its restore
happen under one process-wide lock that every CPU forward holds (:func:`forward_threads`): a server's
batcher thread and a search in another thread never run a forward while the other has the count changed,
and never restore each other's value.  Vectors do not depend on the thread count (tests/test_threads.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from longembed.errors import UserError

#: The largest forward (padded tokens: texts x the longest one) run on one thread; measured with
#: benchmarks/small_input_threads.py (benchmarks/RESULTS.md, "Small inputs on one thread").
SMALL_INPUT_TOKENS = 128

_FORWARD_LOCK = threading.RLock()
_UNSET = object()
_forced = threading.local()


def threads_for(padded_tokens: int, default: int) -> int:
    """The thread count a CPU forward of ``padded_tokens`` runs on, given torch's ``default``."""
    return 1 if padded_tokens <= SMALL_INPUT_TOKENS else default


@contextmanager
def forward_threads(padded_tokens: int, device: torch.device) -> Iterator[None]:
    """Run one forward of ``padded_tokens`` inside: on CPU, under the process's forward lock, with torch
    set to :func:`threads_for`'s count (or :func:`forced_threads`'), and torch's setting restored after.
    Other devices: nothing changes."""
    if device.type != "cpu":
        yield
        return
    with _FORWARD_LOCK:
        before = torch.get_num_threads()
        forced = getattr(_forced, "threads", _UNSET)
        wanted = threads_for(padded_tokens, before) if forced is _UNSET else (forced or before)
        if wanted != before:
            torch.set_num_threads(wanted)
        try:
            yield
        finally:
            if wanted != before:
                torch.set_num_threads(before)


@contextmanager
def forced_threads(threads: int | None) -> Iterator[None]:
    """Inside, this thread's forwards ignore the size rule and run on ``threads`` (None: torch's own
    setting); for measuring the rule (benchmarks/small_input_threads.py) and testing it."""
    if threads is not None and threads < 1:
        raise UserError(f"threads must be at least 1, got {threads}")
    previous = getattr(_forced, "threads", _UNSET)
    _forced.threads = threads
    try:
        yield
    finally:
        if previous is _UNSET:
            del _forced.threads
        else:
            _forced.threads = previous
