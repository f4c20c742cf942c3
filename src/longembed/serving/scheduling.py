"""Which waiting inputs go into the next batch: the batcher's scheduling policies, pure functions.

A policy sees the waiting requests (each with its inputs not yet started, in order) and the number of
batches formed so far, and returns the inputs of the next batch, whose tokens never pass the budget
(one input alone always fits: the server refuses inputs longer than ``max_batch_tokens``).  No clock,
no threads: the tests drive them with plain data.

``fifo`` (longembed's first policy, and TEI's order): the oldest waiting input first, then later
inputs in arrival order while they fit.  Under a steady load of long requests a short one waits for
the long inputs ahead of it whenever they fill the budget, and, in a batch with long ones, until the
whole batch ends (issue 40 measured a median of 31 s for a one-line question beside 10 long clients).

``fair`` (the default): shortest request first, with aging, and short inputs answered first.

1. **Overdue lane.**  An input passed over by ``max_skips`` batches is overdue.  Overdue inputs come
   first, oldest first, while they fit in ``overdue_share`` of the budget, and the oldest overdue
   input is always taken.
2. **Cheapest request first.**  The rest of the budget goes to requests in order of the tokens they
   still have waiting (ties: the older first), each request's inputs in order; an input that does not
   fit is skipped and smaller ones behind it still fill the room (as ``fifo`` does).
3. **Short inputs answered first.**  The batcher runs a batch as the length sub-batches the encoder
   would form anyway (same budget, same padding rule: no extra work), shortest first, and answers
   each as soon as it is done; ``fifo`` makes one call, which the encoder runs longest first, so a
   short input in a batch of long ones was answered only when the whole batch ended.

Why this serves a short request within one batch plus its own encode: requests cheaper than the
budget's ``1 - overdue_share`` all fit in the next batch after the overdue lane, whatever long work
waits, and are answered as soon as their own sub-batch is done, at the start of that batch.

Why nothing waits forever (the aging bound): once an input is overdue, every batch takes the oldest
overdue input, and inputs that arrive later are younger, so they never come before it in the
overdue lane.  An input with ``k`` inputs ahead of it when it arrived (queued before it, its own
request's earlier inputs included) is therefore in a batch at most ``max_skips + k + 1`` batches
after it arrived, however many cheaper requests keep coming
(``tests/serving/test_scheduling.py`` checks this with a stream of short requests that alone would
fill every batch).  Each batch holds at most ``max_batch_tokens`` tokens, so the bound is in time too.

What TEI's queue (``core/src/queue.rs``) contributed: a budget counted in tokens per batch, queue
entries per input (not per request), entries whose client left dropped before they run.  Its order is
strict arrival order and a batch stops at the first entry that does not fit; ``fifo`` keeps the
arrival order but lets smaller inputs fill the room left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from longembed.errors import UserError

#: The policies, by the name ``longembed serve --scheduler`` takes.
SCHEDULERS = ("fair", "fifo")
#: Batches an input may be passed over before it is overdue (``fair``).
MAX_SKIPS = 4
#: The part of a batch's budget the overdue lane may take (at least its oldest input).
OVERDUE_SHARE = 0.5


class Waiting(Protocol):
    """A request in the queue, as a policy sees it."""

    seq: int  # arrival order: smaller is older
    queued_at_batch: int  # batches formed before it arrived
    pending: list[Any]  # its inputs not yet started, in order; each has ``n_tokens``

    @property
    def pending_tokens(self) -> int: ...


class Policy(Protocol):
    """A scheduling policy: the next batch, how many waiting tokens would run before new work, and
    whether a batch runs shortest sub-batch first, each answered at once (``answers_short_first``)."""

    answers_short_first: bool

    def select(self, requests: Sequence[Waiting], budget: int, batches_formed: int) -> list[Any]: ...

    def tokens_ahead(self, requests: Sequence[Waiting], cost: int, batches_formed: int) -> int: ...


@dataclass(frozen=True)
class Fifo:
    """The oldest input, then later ones in arrival order while they fit in the budget; a batch is
    one encoder call, answered when it ends (longembed's first server, for before/after runs)."""

    answers_short_first: bool = False

    def select(self, requests: Sequence[Waiting], budget: int, batches_formed: int) -> list[Any]:
        return _fill([], budget, _in_arrival_order(requests))

    def tokens_ahead(self, requests: Sequence[Waiting], cost: int, batches_formed: int) -> int:
        """A new request runs after everything waiting."""
        return sum(r.pending_tokens for r in requests)


@dataclass(frozen=True)
class Fair:
    """Shortest request first with aging (see the module docstring for the rule and its bound)."""

    max_skips: int = MAX_SKIPS
    overdue_share: float = OVERDUE_SHARE
    answers_short_first: bool = True

    def __post_init__(self) -> None:
        if self.max_skips < 0 or not 0 < self.overdue_share <= 1:
            raise UserError("max_skips must be >= 0 and overdue_share in (0, 1]")

    def select(self, requests: Sequence[Waiting], budget: int, batches_formed: int) -> list[Any]:
        batch = self._overdue_lane([r for r in requests if self._overdue(r, batches_formed)], budget)
        cheapest_first = sorted(requests, key=lambda r: (r.pending_tokens, r.seq))
        return _fill(batch, budget, _in_request_order(cheapest_first))

    def tokens_ahead(self, requests: Sequence[Waiting], cost: int, batches_formed: int) -> int:
        """A new request of ``cost`` tokens runs after the overdue ones and those no dearer than it
        (an estimate: requests that become overdue meanwhile may come first too)."""
        return sum(r.pending_tokens for r in requests
                   if r.pending_tokens <= cost or self._overdue(r, batches_formed))

    def _overdue(self, request: Waiting, batches_formed: int) -> bool:
        return batches_formed - request.queued_at_batch >= self.max_skips

    def _overdue_lane(self, overdue: Sequence[Waiting], budget: int) -> list[Any]:
        """Overdue inputs oldest first, within ``overdue_share`` of the budget, stopping at the first
        that does not fit (so none younger overtakes it); the oldest is always taken."""
        share, batch, used = int(budget * self.overdue_share), [], 0
        for item in _in_arrival_order(overdue):
            if batch and used + item.n_tokens > share:
                break
            batch.append(item)
            used += item.n_tokens
        return batch


def policy_named(name: str) -> Policy:
    """The policy ``longembed serve --scheduler NAME`` runs."""
    if name == "fifo":
        return Fifo()
    if name == "fair":
        return Fair()
    raise UserError(f"unknown scheduler {name!r}; choose one of {', '.join(SCHEDULERS)}")


def _in_arrival_order(requests: Sequence[Waiting]) -> list[Any]:
    return _in_request_order(sorted(requests, key=lambda r: r.seq))


def _in_request_order(requests: Sequence[Waiting]) -> list[Any]:
    return [item for request in requests for item in request.pending]


def _fill(batch: list[Any], budget: int, candidates: Sequence[Any]) -> list[Any]:
    """``batch`` plus each candidate (not already in it) that still fits, in order; the first
    candidate is taken even alone when the batch is empty."""
    taken = {id(item) for item in batch}
    room = budget - sum(item.n_tokens for item in batch)
    for item in candidates:
        if id(item) in taken:
            continue
        if item.n_tokens <= room or not batch:
            batch.append(item)
            taken.add(id(item))
            room -= item.n_tokens
    return batch
