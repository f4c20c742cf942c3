"""Dynamic batching across concurrent requests, under a token budget, on one worker thread.

Requests put their inputs in one queue; a worker thread takes the next batch whenever it is free
(continuous batching: no timer, the queue fills while the model runs) and embeds it with the
encode function (the server's runs ``encoder.encode_tokenized``, which sorts a batch by length and
splits it under the same token budget).  The server queues token ids (``longembed.inputs.
TokenizedInput``), as TEI does: an input is tokenized once, when its request is planned, and the
model runs those ids; the batcher itself only needs each input's token count.

Fairness: a batch always starts with the oldest waiting input, then takes later inputs, in arrival
order, while they fit in ``max_batch_tokens``.  A long input therefore waits only for the inputs that
arrived before it, never behind an endless stream of short ones; short ones still fill the room a
long one leaves.  The queue is bounded by tokens (:class:`QueueFull` -> 429; a request larger than
the whole queue, :class:`RequestTooLarge` -> 413, is refused even when the queue is empty), inference
never runs on the event loop, a request whose client went away is taken out of the queue
(:meth:`DynamicBatcher.cancel`), and :meth:`DynamicBatcher.close` finishes the accepted inputs within
its timeout, then cancels what is left.

Two kinds of work share the queue and the budget: ``"vectors"`` (one pooled vector per input, the
``encode`` function) and ``"states"`` (one (len, dim) array of last-layer token states per input, the
``encode_states`` function: token-id sequences the server planned as windows, for late chunking and
``/embed_all``).  A batch may hold both; each kind runs as its own call.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: encode(inputs, prompt, normalize, max_batch_tokens) -> (n, dim) float32; inputs are what was
#: submitted (the server: TokenizedInputs, their prompt already in their ids).
EncodeFunction = Callable[[list[Any], str, bool, int], np.ndarray]
#: encode_states(inputs, max_batch_tokens) -> one (len, dim) float32 array per input.
StatesFunction = Callable[[list[Any], int], list[np.ndarray]]
#: The kinds of work (see the module docstring).
KINDS = ("vectors", "states")


class QueueFull(RuntimeError):
    """The queue holds too many tokens already; the client should retry later (429)."""


class RequestTooLarge(ValueError):
    """One request holds more tokens than the whole queue may (413): it must be split."""


class ShuttingDown(RuntimeError):
    """The server is finishing its accepted work and takes nothing new (503)."""


@dataclass
class _Job:
    """One request: its inputs' vectors fill in as their batches finish."""

    future: Future
    vectors: list[np.ndarray | None]
    remaining: int
    kind: str = "vectors"


@dataclass
class _Item:
    """One input waiting for a batch."""

    input: Any
    n_tokens: int
    prompt: str
    normalize: bool
    job: _Job
    index: int


@dataclass
class BatchRecord:
    """What one batch held (for metrics)."""

    n_inputs: int
    n_tokens: int
    seconds: float


@dataclass
class DynamicBatcher:
    """Embeds submitted inputs in token-budgeted batches on a background thread."""

    encode: EncodeFunction
    max_batch_tokens: int
    max_queue_tokens: int
    on_batch: Callable[[BatchRecord], None] | None = None
    encode_states: StatesFunction | None = None
    _queue: deque[_Item] = field(default_factory=deque, init=False)
    _queued_tokens: int = field(default=0, init=False)
    _condition: threading.Condition = field(default_factory=threading.Condition, init=False)
    _closing: bool = field(default=False, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.max_batch_tokens < 1 or self.max_queue_tokens < 1:
            raise ValueError("max_batch_tokens and max_queue_tokens must be positive")

    # ---------------------------------------------------------------- client side
    def submit(
        self, inputs: Sequence[Any], token_counts: Sequence[int], prompt: str = "", normalize: bool = True,
        kind: str = "vectors",
    ) -> Future:
        """Queue ``inputs`` (of ``token_counts`` tokens); the future resolves to their (n, dim) float32
        vectors in input order (``kind="states"``: the list of their token-state arrays).  Inputs of one
        kind, prompt and normalization are encoded together.

        Raises :class:`RequestTooLarge` when the request alone holds more than ``max_queue_tokens``
        (it could never be queued: the client must split it), :class:`QueueFull` when the queue's
        work and these tokens together would pass ``max_queue_tokens`` (retry later),
        :class:`ShuttingDown` after :meth:`close`.
        """
        if len(inputs) != len(token_counts) or not inputs:
            raise ValueError("submit needs one token count per input, and at least one input")
        if kind not in KINDS or (kind == "states" and self.encode_states is None):
            raise ValueError(f"this batcher cannot run {kind!r} work (kinds: {KINDS}; states need encode_states)")
        future: Future = Future()
        job = _Job(future, [None] * len(inputs), len(inputs), kind)
        tokens = sum(token_counts)
        if tokens > self.max_queue_tokens:
            raise RequestTooLarge(
                f"this request has {tokens} tokens, more than the {self.max_queue_tokens} this server queues at "
                "once (max_queue_tokens): send its inputs in several smaller requests"
            )
        with self._condition:
            if self._closing:
                raise ShuttingDown("the server is shutting down")
            if self._queued_tokens + tokens > self.max_queue_tokens:
                raise QueueFull(
                    f"the queue holds {self._queued_tokens} tokens; this request's {tokens} would pass the "
                    f"limit of {self.max_queue_tokens}: retry later"
                )
            for index, (item, n) in enumerate(zip(inputs, token_counts, strict=True)):
                self._queue.append(_Item(item, n, prompt, normalize, job, index))
            self._queued_tokens += tokens
            self._condition.notify()
        return future

    @property
    def queued_tokens(self) -> int:
        return self._queued_tokens

    @property
    def queued_inputs(self) -> int:
        return len(self._queue)

    @property
    def closing(self) -> bool:
        return self._closing

    # ---------------------------------------------------------------- worker side
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="longembed-batcher", daemon=True)
            self._thread.start()

    def cancel(self, future: Future) -> int:
        """Take the not-yet-started inputs of ``future``'s request out of the queue (its client went
        away) and cancel the future; returns how many inputs were removed.  Inputs already in a
        running batch finish, and their vectors are dropped."""
        with self._condition:
            kept = deque(item for item in self._queue if item.job.future is not future)
            removed = [item for item in self._queue if item.job.future is future]
            self._queue = kept
            self._queued_tokens -= sum(item.n_tokens for item in removed)
        future.cancel()
        return len(removed)

    def close(self, timeout: float | None = None) -> None:
        """Take nothing new, finish the queued inputs within ``timeout`` seconds (None: all of them),
        then fail what is still queued with :class:`ShuttingDown` and return."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        if self._thread is None:
            self._fail_queued()
            return
        self._thread.join(timeout)
        if self._thread.is_alive():  # out of time: what has not started is answered 503, not computed
            self._fail_queued()
            self._thread.join(timeout)

    def _fail_queued(self) -> None:
        with self._condition:
            left, self._queue, self._queued_tokens = list(self._queue), deque(), 0
        error = ShuttingDown("the server shut down before this input was embedded")
        for item in left:
            with contextlib.suppress(InvalidStateError):
                item.job.future.set_exception(error)

    def _next_batch(self) -> list[_Item]:
        """The oldest input, then later ones in arrival order while they fit in the token budget."""
        batch = [self._queue.popleft()]
        room = self.max_batch_tokens - batch[0].n_tokens
        kept: deque[_Item] = deque()
        while self._queue and room > 0:
            item = self._queue.popleft()
            if item.n_tokens <= room:
                batch.append(item)
                room -= item.n_tokens
            else:
                kept.append(item)
        self._queue.extendleft(reversed(kept))
        self._queued_tokens -= sum(item.n_tokens for item in batch)
        return batch

    def _work(self) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._closing:
                    self._condition.wait()
                if not self._queue:
                    return  # closing and drained
                batch = self._next_batch()
            self._run(batch)

    def _run(self, batch: list[_Item]) -> None:
        start = time.perf_counter()
        groups: dict[tuple[str, str, bool], list[_Item]] = {}
        for item in batch:
            groups.setdefault((item.job.kind, item.prompt, item.normalize), []).append(item)
        for (kind, prompt, normalize), items in groups.items():
            items = [item for item in items if not item.job.future.done()]  # cancelled or failed meanwhile
            if not items:
                continue
            inputs = [i.input for i in items]
            try:
                if kind == "states":
                    vectors = self.encode_states(inputs, self.max_batch_tokens)
                else:
                    vectors = self.encode(inputs, prompt, normalize, self.max_batch_tokens)
            except Exception as exc:  # a failure fails the requests it touches, not the server
                for item in items:
                    with contextlib.suppress(InvalidStateError):
                        item.job.future.set_exception(exc)
                continue
            for item, vector in zip(items, vectors, strict=True):
                self._deliver(item, vector)
        if self.on_batch is not None:
            self.on_batch(BatchRecord(len(batch), sum(i.n_tokens for i in batch), time.perf_counter() - start))

    @staticmethod
    def _deliver(item: _Item, vector: np.ndarray) -> None:
        job = item.job
        if job.future.done():  # an earlier group of the same request failed, or its client left
            return
        job.vectors[item.index] = vector
        job.remaining -= 1
        if job.remaining == 0:
            with contextlib.suppress(InvalidStateError):  # cancelled by the event loop meanwhile
                job.future.set_result(np.stack(job.vectors) if job.kind == "vectors" else list(job.vectors))
