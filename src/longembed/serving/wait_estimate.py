"""What the model runs before a new request's first call (tokens, calls): the scheduler's own order, simulated.

The batcher refuses a request at once (429) when its wait would pass its limit; counting the whole
queue, or every overdue request, as ahead of it refused short requests that ``fair`` runs after one call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from longembed.serving.scheduling import Policy, Waiting

#: calls(inputs) -> the model calls the batcher runs them as, in order (``DynamicBatcher._calls``).
CallsFunction = Callable[[list[Any]], list[list[Any]]]


class Input(Protocol):
    """A queued input: its tokens, and ``job``, the waiting request it belongs to."""

    n_tokens: int
    job: Any


@dataclass(eq=False)
class _Copy:
    """A waiting request in the simulation: its inputs not yet run there (the real queue is untouched)."""

    seq: int
    queued_at_batch: int
    pending: list[Any]

    @property
    def pending_tokens(self) -> int:
        return sum(item.n_tokens for item in self.pending)


@dataclass(frozen=True)
class Scheduler:
    """What decides the order: the policy, the batcher's budgets, and how it splits a batch in calls."""

    policy: Policy
    budget: int  # tokens of one batch (``max_batch_tokens``)
    call_tokens: int  # tokens of one call (what ``admit`` fills between two calls)
    calls: CallsFunction
    admitting: bool = True  # False while closing: nothing is taken between calls


@dataclass
class Ahead:
    """The work run before a request starts: its tokens and the model calls they make."""

    tokens: int = 0
    calls: int = 0


def work_before_start(
    scheduler: Scheduler, queue: Sequence[Waiting], new: Waiting, calls_left: Sequence[list[Input]],
    batches_formed: int, enough: float = float("inf"), gap_first: bool = True,
) -> Ahead:
    """The tokens and calls the model runs, after the call running now, before ``new``'s first input starts.

    ``queue``: the waiting requests (without ``new``); ``calls_left``: the running batch's calls not
    started yet (empty when none runs); ``gap_first``: the gap before them is still to come (False
    while a call admitted at that gap runs).  The simulation runs the batcher's loop on copies: the running
    batch's calls, with the policy's ``admit`` at each gap between two calls (which may take ``new``),
    then ``select`` batch after batch (``batches_formed`` on, so requests age as they really do), each
    as its calls, until one holds an input of ``new``.  Requests arriving later are not foreseen (under
    ``fair`` a cheaper one may overtake ``new``).  It stops once more than ``enough`` tokens are ahead
    (the caller refuses the request anyway), so a backlog costs at most that much simulation.
    """
    return _Simulation(scheduler, queue, new, enough).run(calls_left, batches_formed, gap_first)


class _Simulation:
    def __init__(self, scheduler: Scheduler, queue: Sequence[Waiting], new: Waiting, enough: float):
        self.scheduler, self.enough, self.ahead = scheduler, enough, Ahead()
        self.copies = {id(r): _Copy(r.seq, r.queued_at_batch, list(r.pending)) for r in queue if r.pending}
        self.copies[id(new)] = _Copy(new.seq, new.queued_at_batch, list(new.pending))
        self.mine = {id(item) for item in new.pending}

    def run(self, calls_left: Sequence[list[Input]], batches_formed: int, gap_first: bool) -> Ahead:
        if self._run_calls(list(calls_left), gap_first):
            return self.ahead
        while True:
            waiting = [copy for copy in self.copies.values() if copy.pending]
            batch = self.scheduler.policy.select(waiting, self.scheduler.budget, batches_formed) if waiting else []
            if not batch:  # cannot happen while new waits; stops the loop if it did
                return self.ahead
            batches_formed += 1
            self._take(batch)
            if self._run_calls(self.scheduler.calls(batch), gap_first=False):
                return self.ahead

    def _run_calls(self, calls: list[list[Input]], gap_first: bool) -> bool:
        """Run ``calls`` as the batcher does (a gap before each call but a new batch's first); True
        once ``new`` starts or more than ``enough`` tokens are ahead."""
        for position, call in enumerate(calls):
            if (position or gap_first) and self._gap(calls[position:]):
                return True
            if self._call(call):
                return True
        return False

    def _call(self, call: list[Input]) -> bool:
        if any(id(item) in self.mine for item in call):
            return True
        self.ahead.tokens += sum(item.n_tokens for item in call)
        self.ahead.calls += 1
        return self.ahead.tokens > self.enough

    def _gap(self, remaining: list[list[Input]]) -> bool:
        """Between two calls: the first call of what the policy admits (requests cheaper than what
        ``remaining`` has left) runs first."""
        if not self.scheduler.admitting:
            return False
        left: dict[int, int] = {}
        for item in (item for call in remaining for item in call):
            key = id(item.job)
            left[key] = left.get(key, self._pending_tokens(key)) + item.n_tokens
        if not left:
            return False
        waiting = [copy for key, copy in self.copies.items() if key not in left and copy.pending]
        admitted = self.scheduler.policy.admit(waiting, min(left.values()), self.scheduler.call_tokens)
        if not admitted:
            return False
        first_call = self.scheduler.calls(admitted)[0]  # the batcher runs one call of them per gap
        self._take(first_call)
        return self._call(first_call)

    def _pending_tokens(self, key: int) -> int:
        copy = self.copies.get(key)
        return 0 if copy is None else copy.pending_tokens

    def _take(self, items: list[Input]) -> None:
        taken = set(map(id, items))
        for key in {id(item.job) for item in items}:
            copy = self.copies[key]
            copy.pending = [item for item in copy.pending if id(item) not in taken]

