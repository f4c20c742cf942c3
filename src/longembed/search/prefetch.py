"""Prepare the next items in a background thread while the caller works on this one (bounded, in order).

The build tokenizes the next batches of documents here while the model encodes the current one: the
tokenizer's work hides behind the model's, and at most ``depth`` prepared batches wait in memory.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from longembed.search.stages import StageTimes

In = TypeVar("In")
Out = TypeVar("Out")

_DONE = object()


def prefetched(items: Iterable[In], prepare: Callable[[In], Out], times: StageTimes, stage: str = "tokenizing",
               depth: int = 2) -> Iterator[tuple[In, Out]]:
    """``(item, prepare(item))`` for each item, in order; with ``depth`` >= 1 ``prepare`` runs up to
    ``depth`` items ahead in one background thread, and 0 runs it here, item by item.

    ``times``: the caller's waits for a prepared item count as ``stage``; the background thread's own
    seconds count as ``times.background``.  An exception in ``prepare`` is raised here, at its item; a
    consumer that stops early (an error, a break) stops the thread after its current item.
    """
    if depth < 1:
        for item in items:
            with times.stage(stage):
                out = prepare(item)
            yield item, out
        return
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(value: object) -> bool:
        """Queue ``value`` once there is room; False when the consumer has stopped."""
        while not stop.is_set():
            try:
                ready.put(value, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                start = time.perf_counter()
                out = prepare(item)
                times.background += time.perf_counter() - start
                if not put((item, out, None)):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            put((None, None, exc))
            return
        put(_DONE)

    thread = threading.Thread(target=produce, name="longembed-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            with times.stage(stage):
                got = ready.get()
            if got is _DONE:
                return
            item, out, error = got
            if error is not None:
                raise error
            yield item, out
    finally:
        stop.set()
        thread.join()
