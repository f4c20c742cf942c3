"""Dynamic batching across concurrent requests, under a token budget, on one worker thread.

Requests put their inputs in one queue; a worker thread takes the next batch whenever it is free
(continuous batching: no timer, the queue fills while the model runs) and embeds it with the
encode function (the server's runs ``encoder.runner.encode_tokenized``, which sorts a batch by length and
splits it under the same token budget).  The server queues token ids (``longembed.inputs.
TokenizedInput``), as TEI does: an input is tokenized once, when its request is planned, and the
model runs those ids; the batcher itself only needs each input's token count.

Which inputs make the next batch is the scheduling policy's choice (:mod:`longembed.serving.
scheduling`): ``fair`` (cheapest request first, with aging: short requests are not starved by long
ones, and nothing waits forever) or ``fifo`` (arrival order).  Under ``fair`` a batch runs as model
calls of at most ``sub_batch_tokens`` tokens, shortest first, each answered when it ends, and
between two calls the requests that arrived meanwhile and are cheaper than what the batch has left
are run first, one call of them per gap (the policy's :meth:`~longembed.serving.scheduling.Fair.
admit`): a short request waits for the call running when it arrived, not for the whole batch.
While closing nothing is taken between calls (what waits is run or refused when the next batch is
formed).

Saying no early and clearly (each refusal carries ``retry_after``, the seconds after which a retry
may succeed, estimated from the waiting work and the model's measured cost per call and per token,
:class:`~longembed.serving.throughput.Throughput`): a request larger than the whole queue is
:class:`RequestTooLarge` (413, even when the queue is empty); one that would pass ``max_queue_tokens``, or whose estimated wait
for its first model call passes its limit (``max_queue_seconds``, or the smaller limit the request
gives), is :class:`QueueFull` (429) at once, not after a long silence.  The wait is what the
scheduler would run before it, simulated in the policy's own order (:mod:`longembed.serving.
wait_estimate`): under ``fair`` a short request behind a backlog of long ones waits about the running
call, and is not refused for the backlog; a request still waiting at its limit
is :class:`QueueTimeout` (503).  A request whose client went away is taken out of the queue
(:meth:`DynamicBatcher.cancel`).  Inference never runs on the event loop.

Shutdown keeps its promise: :meth:`DynamicBatcher.begin_close` takes nothing new and sets a deadline;
the worker keeps running batches that can finish by then (by the throughput estimate) and answers
the rest :class:`ShuttingDown` (503) at once; at the deadline everything unfinished, even a batch
still in the model, is answered :class:`ShuttingDown`, so no client waits past it.

Two kinds of work share the queue and the budget: ``"vectors"`` (one pooled vector per input, the
``encode`` function) and ``"states"`` (one (len, dim) array of last-layer token states per input, the
``encode_states`` function: token-id sequences the server planned as windows, for late chunking and
``/embed_all``).  A batch may hold both; each kind runs as its own call.

A request submitted ``alone`` (a search's query, :mod:`longembed.serving.search_route`) shares batches,
the budget and the order with every other, but its inputs never share a model call with another
request's: padding beside a longer input changes a vector's last bits, and a search must rank with the
vector the encoder gives the query on its own, the command line's ``longembed search``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longembed.batching import length_batches
from longembed.errors import UserError
from longembed.serving.scheduling import Policy, policy_named
from longembed.serving.throughput import Throughput
from longembed.serving.wait_estimate import Scheduler, work_before_start

#: encode(inputs, prompt, normalize, max_batch_tokens) -> (n, dim) float32; inputs are what was
#: submitted (the server: TokenizedInputs, their prompt already in their ids).
EncodeFunction = Callable[[list[Any], str, bool, int], np.ndarray]
#: encode_states(inputs, max_batch_tokens) -> one (len, dim) float32 array per input.
StatesFunction = Callable[[list[Any], int], list[np.ndarray]]
#: The kinds of work (see the module docstring).
KINDS = ("vectors", "states")
#: Retry-After of work refused because the server stops (a restarted server or another replica).
SHUTDOWN_RETRY_SECONDS = 5.0


class Refused(RuntimeError):
    """Work the batcher will not do; ``retry_after``: seconds after which a retry may succeed (None:
    no estimate)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class QueueFull(Refused):
    """The queue holds too many tokens, or too much work to start this request in time (429)."""


class QueueTimeout(Refused):
    """The request waited its whole limit without reaching the model (503)."""


class ShuttingDown(Refused):
    """The server is finishing its accepted work and takes nothing new (503)."""

    def __init__(self, message: str, retry_after: float | None = SHUTDOWN_RETRY_SECONDS):
        super().__init__(message, retry_after)


class RequestTooLarge(ValueError):
    """One request holds more tokens than the whole queue may (413): it must be split."""


@dataclass(eq=False)
class _Job:
    """One request: its inputs not yet started, and its vectors, filled in as their batches finish."""

    future: Future
    kind: str
    prompt: str
    normalize: bool
    seq: int  # arrival order
    queued_at_batch: int  # batches formed before it arrived
    deadline: float | None  # it must reach the model by then (clock time), or QueueTimeout
    n_inputs: int
    alone: bool = False  # its inputs run in model calls of their own (see the module docstring)
    pending: list[_Item] = field(default_factory=list)
    started: bool = False

    def __post_init__(self) -> None:
        self.vectors: list[np.ndarray | None] = [None] * self.n_inputs
        self.remaining = self.n_inputs

    @property
    def pending_tokens(self) -> int:
        return sum(item.n_tokens for item in self.pending)


@dataclass(eq=False)
class _Item:
    """One input waiting for a batch."""

    input: Any
    n_tokens: int
    job: _Job
    index: int


@dataclass
class BatchRecord:
    """What one batch held (for metrics), inputs taken between its calls included; ``call_seconds``:
    each model call's duration (a call is the longest work a waiting request can be stuck behind)."""

    n_inputs: int
    n_tokens: int
    seconds: float
    call_seconds: list[float] = field(default_factory=list)


@dataclass
class DynamicBatcher:
    """Embeds submitted inputs in token-budgeted batches on a background thread.

    ``scheduler``: a policy name (``"fair"``, ``"fifo"``) or a :class:`~longembed.serving.scheduling.
    Policy`; ``sub_batch_tokens``: the most padded tokens of one model call when the policy answers
    short inputs first (None: ``max_batch_tokens``); ``max_queue_seconds``: the longest a request may
    wait for its first batch (None: no limit); ``clock``: seconds, monotonic (tests pass a fake one)."""

    encode: EncodeFunction
    max_batch_tokens: int
    max_queue_tokens: int
    on_batch: Callable[[BatchRecord], None] | None = None
    encode_states: StatesFunction | None = None
    scheduler: str | Policy = "fair"
    sub_batch_tokens: int | None = None
    max_queue_seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    throughput: Throughput = field(default_factory=Throughput)
    _jobs: dict[Future, _Job] = field(default_factory=dict, init=False)  # in arrival order
    _queued_tokens: int = field(default=0, init=False)
    _queued_inputs: int = field(default=0, init=False)
    _batches_formed: int = field(default=0, init=False)
    _arrivals: int = field(default=0, init=False)
    _running: list[_Item] = field(default_factory=list, init=False)
    _calls_left: list[list[_Item]] = field(default_factory=list, init=False)  # the running batch's next calls
    _gap_passed: bool = field(default=False, init=False)  # the gap before them was taken (an admitted call runs)
    _call: tuple[int, float] = field(default=(0, 0.0), init=False)  # the running call: its tokens, its start
    _condition: threading.Condition = field(default_factory=threading.Condition, init=False)
    _closing: bool = field(default=False, init=False)
    _deadline: float | None = field(default=None, init=False)
    _timer: threading.Timer | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.max_batch_tokens < 1 or self.max_queue_tokens < 1:
            raise UserError("max_batch_tokens and max_queue_tokens must be positive")
        if self.sub_batch_tokens is not None and self.sub_batch_tokens < 1:
            raise UserError(f"sub_batch_tokens must be positive (or None), got {self.sub_batch_tokens}")
        self.call_tokens = min(self.sub_batch_tokens or self.max_batch_tokens, self.max_batch_tokens)
        if self.max_queue_seconds is not None and self.max_queue_seconds <= 0:
            raise UserError(f"max_queue_seconds must be positive (or None), got {self.max_queue_seconds}")
        self.policy: Policy = policy_named(self.scheduler) if isinstance(self.scheduler, str) else self.scheduler

    # ---------------------------------------------------------------- client side
    def submit(
        self, inputs: Sequence[Any], token_counts: Sequence[int], prompt: str = "", normalize: bool = True,
        kind: str = "vectors", queue_seconds: float | None = None, alone: bool = False,
    ) -> Future:
        """Queue ``inputs`` (of ``token_counts`` tokens); the future resolves to their (n, dim) float32
        vectors in input order (``kind="states"``: the list of their token-state arrays).  Inputs of one
        kind, prompt and normalization are encoded together.  ``queue_seconds``: this request's own
        limit on its wait for a batch (the smaller of it and ``max_queue_seconds`` holds).  ``alone``:
        its inputs are never put in a model call with another request's (see the module docstring).

        Raises :class:`RequestTooLarge` when the request alone holds more than ``max_queue_tokens``
        (it could never be queued: the client must split it), :class:`QueueFull` when the queue's
        work and these tokens together would pass ``max_queue_tokens`` or when the estimated wait
        passes the limit (retry later), :class:`ShuttingDown` after :meth:`begin_close`.  The future
        fails with :class:`QueueTimeout` if the request is still waiting at its limit.
        """
        if len(inputs) != len(token_counts) or not inputs:
            raise UserError("submit needs one token count per input, and at least one input")
        if kind not in KINDS or (kind == "states" and self.encode_states is None):
            raise UserError(f"this batcher cannot run {kind!r} work (kinds: {KINDS}; states need encode_states)")
        tokens = sum(token_counts)
        if tokens > self.max_queue_tokens:
            raise RequestTooLarge(
                f"this request has {tokens} tokens, more than the {self.max_queue_tokens} this server queues at "
                "once (max_queue_tokens): send its inputs in several smaller requests"
            )
        limit = _smaller(self.max_queue_seconds, queue_seconds)
        with self._condition:
            job = self._new_job(inputs, token_counts, prompt, normalize, kind, alone)
            self._refuse_if_full(job, limit)
            job.deadline = None if limit is None else self.clock() + limit
            self._arrivals += 1
            self._jobs[job.future] = job
            self._queued_tokens += tokens
            self._queued_inputs += len(inputs)
            self._condition.notify()
        return job.future

    def _new_job(self, inputs: Sequence[Any], token_counts: Sequence[int], prompt: str, normalize: bool, kind: str,
                 alone: bool) -> _Job:
        """A request arriving now, not queued yet (the lock is held)."""
        job = _Job(Future(), kind, prompt, normalize, self._arrivals, self._batches_formed, None, len(inputs), alone)
        job.pending = [_Item(item, n, job, i) for i, (item, n) in enumerate(zip(inputs, token_counts, strict=True))]
        return job

    def _refuse_if_full(self, job: _Job, limit: float | None) -> None:
        """Raise what :meth:`submit` raises for ``job`` (the lock is held)."""
        if self._closing:
            raise ShuttingDown("the server is shutting down and takes no new work")
        tokens = job.pending_tokens
        if self._queued_tokens + tokens > self.max_queue_tokens:
            freed = self.throughput.seconds_for(self._queued_tokens + tokens - self.max_queue_tokens)
            raise QueueFull(
                f"the queue holds {self._queued_tokens} tokens; this request's {tokens} would pass the "
                f"limit of {self.max_queue_tokens}: retry later", freed,
            )
        estimate = None if limit is None else self._wait(job, limit)
        if estimate is not None and estimate[0] > limit:
            wait, complete = estimate
            about = f"about {wait:.0f}" if complete else f"more than {wait:.0f}"
            raise QueueFull(
                f"the server is busy: this request would wait {about} s for the model, more than its "
                f"limit of {limit:g} s (--queue-seconds, or the request's X-Longembed-Queue-Seconds): retry later",
                wait - limit,
            )

    def estimated_wait(self, *token_counts: int, prompt: str = "", kind: str = "vectors") -> float | None:
        """Seconds a request of inputs of ``token_counts`` tokens, arriving now, would wait for its first
        model call (None before any batch has been measured)."""
        with self._condition:
            return self._estimated_wait(self._new_job(token_counts, token_counts, prompt, True, kind, False))

    def _estimated_wait(self, job: _Job, limit: float | None = None) -> float | None:
        estimate = self._wait(job, limit)
        return None if estimate is None else estimate[0]

    def _wait(self, job: _Job, limit: float | None) -> tuple[float, bool] | None:
        """Seconds until ``job``'s first model call starts, and whether that is the whole wait: what
        is left of the running call, then the tokens and calls the scheduler runs before it
        (:func:`~longembed.serving.wait_estimate.work_before_start`: the policy's order, simulated),
        at the measured costs per call and per token (:class:`~longembed.serving.throughput.
        Throughput`).  Past twice ``limit`` the rest is not simulated (not complete: the wait is
        more than that; the request is refused, its Retry-After at least ``limit``)."""
        costs = self.throughput.costs
        if costs is None:
            return None
        per_call, per_token = costs
        now, (running, since) = self.clock(), self._call
        calls_left: list[list[_Item]] = []
        left_of_running = 0.0
        if self._running:
            calls_left = [[item for item in call if not item.job.future.done()] for call in self._calls_left]
            left_of_running = max(0.0, per_call + per_token * running - (now - since))
        scheduler = Scheduler(self.policy, self.max_batch_tokens, self.call_tokens, self._calls,
                              admitting=not self._closing)
        queue = [waiting for waiting in self._jobs.values() if waiting is not job]
        enough = float("inf") if limit is None else 2 * limit / per_token
        ahead = work_before_start(scheduler, queue, job, calls_left, self._batches_formed, enough,
                                  gap_first=not self._gap_passed)
        return left_of_running + per_call * ahead.calls + per_token * ahead.tokens, ahead.tokens <= enough

    @property
    def queued_tokens(self) -> int:
        return self._queued_tokens

    @property
    def queued_inputs(self) -> int:
        return self._queued_inputs

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def past_deadline(self) -> bool:
        """Closing, and the shutdown deadline has passed: every request not answered yet gets 503."""
        return self._deadline is not None and self.clock() >= self._deadline

    @property
    def batches_formed(self) -> int:
        return self._batches_formed

    def cancel(self, future: Future) -> int:
        """Take the not-yet-started inputs of ``future``'s request out of the queue (its client went
        away) and cancel the future; returns how many inputs were removed.  Inputs already in a
        running batch finish, and their vectors are dropped."""
        with self._condition:
            job = self._jobs.get(future)
            removed = self._remove(job) if job is not None else 0
        future.cancel()
        return removed

    def check_deadline(self, future: Future) -> None:
        """Fail ``future``'s request with :class:`QueueTimeout` if it is still waiting for its first
        batch past its limit (the server calls this while the request waits)."""
        with self._condition:
            job = self._jobs.get(future)
            if job is not None:
                self._expire([job], self.clock())

    def _remove(self, job: _Job) -> int:
        """Take ``job`` out of the queue (the lock is held); how many inputs it still had waiting."""
        del self._jobs[job.future]
        self._queued_tokens -= job.pending_tokens
        self._queued_inputs -= len(job.pending)
        removed, job.pending = len(job.pending), []
        return removed

    def _expire(self, jobs: Sequence[_Job], now: float) -> None:
        """Fail the jobs not started whose deadline has passed (the lock is held)."""
        for job in jobs:
            if not job.started and job.deadline is not None and now > job.deadline:
                wait = self._estimated_wait(job, self.max_queue_seconds)
                self._remove(job)
                _fail(job, QueueTimeout(
                    "this request waited its whole limit (--queue-seconds, or its X-Longembed-Queue-Seconds) "
                    "without reaching the model: the server is busy, retry later", wait))

    # ---------------------------------------------------------------- worker side
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="longembed-batcher", daemon=True)
            self._thread.start()

    def begin_close(self, timeout: float | None = None) -> None:
        """Take nothing new; run what can finish within ``timeout`` seconds (None: everything), answer
        the rest :class:`ShuttingDown` (at once when it cannot finish in time, at the deadline at the
        latest).  Returns at once; :meth:`close` waits."""
        with self._condition:
            if self._closing:
                return
            self._closing = True
            self._deadline = None if timeout is None else self.clock() + max(0.0, timeout)
            self._condition.notify_all()
        if timeout is not None:
            self._timer = threading.Timer(max(0.0, timeout), self._fail_unfinished)
            self._timer.daemon = True
            self._timer.start()

    def close(self, timeout: float | None = None) -> None:
        """:meth:`begin_close` (unless begun: its deadline holds), then wait for the worker until the
        deadline; what is still unfinished then is answered :class:`ShuttingDown`."""
        self.begin_close(timeout)
        if self._thread is not None:
            left = None if self._deadline is None else max(0.0, self._deadline - self.clock())
            self._thread.join(left)
        if self._thread is None or self._thread.is_alive():
            self._fail_unfinished()
        if self._timer is not None:
            self._timer.cancel()

    def _fail_unfinished(self) -> None:
        """Answer every request not finished yet (queued, or in a batch still running) ShuttingDown."""
        with self._condition:
            jobs = list(self._jobs.values()) + [item.job for item in self._running]
            for job in list(self._jobs.values()):
                self._remove(job)
        error = ShuttingDown("the server shut down (--shutdown-seconds) before this request was finished")
        for job in jobs:
            _fail(job, error)

    def _next_batch(self) -> list[_Item]:
        """The policy's next batch, taken out of the queue (the lock is held)."""
        batch = self.policy.select(list(self._jobs.values()), self.max_batch_tokens, self._batches_formed)
        self._take(batch)
        self._batches_formed += 1
        return batch

    def _take(self, items: list[_Item]) -> None:
        """Take ``items`` out of the queue; their requests have started (the lock is held)."""
        taken = set(map(id, items))
        for job in {id(item.job): item.job for item in items}.values():
            job.started = True
            job.pending = [item for item in job.pending if id(item) not in taken]
            if not job.pending:
                del self._jobs[job.future]
        self._queued_tokens -= sum(item.n_tokens for item in items)
        self._queued_inputs -= len(items)

    def _work(self) -> None:
        while True:
            with self._condition:
                while not self._jobs and not self._closing:
                    self._condition.wait()
                if not self._jobs:
                    return  # closing and drained
                batch = self._take_batch()
            if batch:
                self._run_batch(batch)

    def step(self) -> int:
        """Form and run one batch on the calling thread; how many inputs it ran (0: none waited, or
        they were answered without running).  The tests drive an unstarted batcher this way."""
        with self._condition:
            batch = self._take_batch() if self._jobs else []
        if batch:
            self._run_batch(batch)
        return len(batch)

    def _take_batch(self) -> list[_Item]:
        """Expire what waited too long, take the policy's next batch, and answer it ShuttingDown
        instead when it cannot finish before the shutdown deadline (the lock is held)."""
        now = self.clock()
        self._expire(list(self._jobs.values()), now)
        if not self._jobs:
            return []
        batch = self._next_batch()
        if self._too_late(batch, now):
            self._give_up(batch)
            return []
        calls = self._calls(batch)  # what runs now and next, for the wait estimate until _run takes over
        self._running = batch
        self._call, self._calls_left = (sum(item.n_tokens for item in calls[0]), now), calls[1:]
        self._gap_passed = False
        return batch

    def _run_batch(self, batch: list[_Item]) -> None:
        try:
            self._run(batch)
        finally:
            with self._condition:
                self._running, self._calls_left = [], []

    def _too_late(self, batch: list[_Item], now: float) -> bool:
        """Closing, and this batch would not finish before the deadline (by the throughput estimate)."""
        if self._deadline is None:
            return False
        needed = self.throughput.seconds_for(sum(item.n_tokens for item in batch))
        return now >= self._deadline or (needed is not None and now + needed > self._deadline)

    def _give_up(self, batch: list[_Item]) -> None:
        """Shutting down without time for ``batch``: answer its requests and every queued one now, as
        cheaper work was chosen first (the lock is held)."""
        jobs = [item.job for item in batch] + list(self._jobs.values())
        for job in list(self._jobs.values()):
            self._remove(job)
        error = ShuttingDown("the server is shutting down and cannot finish this request within --shutdown-seconds")
        for job in jobs:
            _fail(job, error)

    def _run(self, batch: list[_Item]) -> None:
        """Embed ``batch`` call by call (:meth:`_calls`), each answered as soon as it is done; between
        two calls, run first what the policy admits (cheaper requests that arrived meanwhile)."""
        start, n_inputs, n_tokens, call_seconds = self.clock(), len(batch), sum(i.n_tokens for i in batch), []
        calls = self._calls(batch)
        for position, call in enumerate(calls):
            with self._condition:
                self._calls_left, self._gap_passed = calls[position + 1:], False
            call_seconds.append(self._encode_and_deliver(call))
            admitted = self._admit(calls[position + 1:]) if position + 1 < len(calls) else []
            for extra in self._calls(admitted):
                call_seconds.append(self._encode_and_deliver(extra))
            n_inputs, n_tokens = n_inputs + len(admitted), n_tokens + sum(i.n_tokens for i in admitted)
        seconds = self.clock() - start
        if self.on_batch is not None:
            self.on_batch(BatchRecord(n_inputs, n_tokens, seconds, [s for s in call_seconds if s is not None]))

    def _calls(self, items: list[_Item]) -> list[list[_Item]]:
        """The model calls that embed ``items``: one per kind / prompt / normalization (and one per
        request submitted ``alone``); when the policy answers short inputs first, one per length
        sub-batch under ``call_tokens`` (the ones the encoder would form under that budget), shortest
        first."""
        groups: dict[tuple[str, str, bool, int | None], list[_Item]] = {}
        for item in items:
            job = item.job
            groups.setdefault((job.kind, job.prompt, job.normalize, id(job) if job.alone else None), []).append(item)
        if not self.policy.answers_short_first:
            return list(groups.values())
        calls = []
        for group in groups.values():
            lengths = [item.n_tokens for item in group]
            calls += [[group[i] for i in indices] for indices in length_batches(lengths, len(group), self.call_tokens)]
        return sorted(calls, key=lambda call: max(item.n_tokens for item in call))

    def _admit(self, remaining: list[list[_Item]]) -> list[_Item]:
        """Between two calls: the waiting inputs the policy runs before the ``remaining`` calls (those
        of requests cheaper than every request with inputs left in them), taken out of the queue; one
        model call of them at most (the first, shortest, of those they would make: padding or prompts
        may split what the policy admits), so that a request arriving meanwhile waits one call, not
        several, before the next gap."""
        with self._condition:
            self._gap_passed = True
            if self._closing or not self._jobs:
                return []
            left = self._left_costs(remaining)
            if not left:
                return []
            waiting = [job for job in self._jobs.values() if id(job) not in left]
            admitted = self.policy.admit(waiting, min(left.values()), self.call_tokens)
            admitted = self._calls(admitted)[0] if admitted else []
            self._take(admitted)
            self._running = self._running + admitted
            return admitted

    @staticmethod
    def _left_costs(calls: list[list[_Item]]) -> dict[int, int]:
        """The requests with inputs in ``calls`` (by id), each with its tokens not run yet (those in
        ``calls`` and those still queued): what a cheaper request is compared with."""
        left: dict[int, int] = {}
        for item in (item for call in calls for item in call if not item.job.future.done()):
            left[id(item.job)] = left.get(id(item.job), item.job.pending_tokens) + item.n_tokens
        return left

    def _encode_and_deliver(self, items: list[_Item]) -> float | None:
        """Run one model call on ``items`` (all of one kind, prompt and normalization) and answer its
        inputs; the call's seconds (None: nothing left to run)."""
        items = [item for item in items if not item.job.future.done()]  # cancelled or failed meanwhile
        if not items:
            return None
        job, inputs, start = items[0].job, [i.input for i in items], self.clock()
        with self._condition:
            self._call = (sum(item.n_tokens for item in items), start)
        budget = self.call_tokens if self.policy.answers_short_first else self.max_batch_tokens
        try:
            if job.kind == "states":
                vectors = self.encode_states(inputs, budget)
            else:
                vectors = self.encode(inputs, job.prompt, job.normalize, budget)
        except Exception as exc:  # a failure fails the requests it touches, not the server
            for item in items:
                _fail(item.job, exc)
            return self.clock() - start
        seconds = self.clock() - start
        with self._condition:
            self.throughput.record(sum(item.n_tokens for item in items), seconds)  # the cost of one call
        for item, vector in zip(items, vectors, strict=True):
            self._deliver(item, vector)
        return seconds

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


def _fail(job: _Job, error: BaseException) -> None:
    with contextlib.suppress(InvalidStateError):
        job.future.set_exception(error)


def _smaller(a: float | None, b: float | None) -> float | None:
    """The smaller of two limits, None meaning no limit."""
    return b if a is None else a if b is None else min(a, b)
