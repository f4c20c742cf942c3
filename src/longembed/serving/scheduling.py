"""Which waiting inputs go into the next batch: the batcher's scheduling policies, pure functions.

``fifo`` takes inputs in arrival order; ``fair`` (the default) takes the cheapest request first, with
aging, so a short request waits about one model call and nothing waits forever.  How and why, with the
bounds: docs/guides/serving.md ("How the schedulers choose the next batch").
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
    """A scheduling policy: the next batch, the inputs taken between two calls of a running batch
    (how long new work would wait is these two, simulated: :mod:`longembed.serving.wait_estimate`),
    and whether a batch runs as calls of ``sub_batch_tokens``, shortest first, each answered at once
    (``answers_short_first``)."""

    answers_short_first: bool

    def select(self, requests: Sequence[Waiting], budget: int, batches_formed: int) -> list[Any]: ...

    def admit(self, requests: Sequence[Waiting], cheaper_than: int, budget: int) -> list[Any]: ...


@dataclass(frozen=True)
class Fifo:
    """The oldest input, then later ones in arrival order while they fit in the budget; a batch is
    one encoder call, answered when it ends (longembed's first server, for before/after runs)."""

    answers_short_first: bool = False

    def select(self, requests: Sequence[Waiting], budget: int, batches_formed: int) -> list[Any]:
        return _fill([], budget, _in_arrival_order(requests))

    def admit(self, requests: Sequence[Waiting], cheaper_than: int, budget: int) -> list[Any]:
        """Nothing: a batch is one call."""
        return []


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

    def admit(self, requests: Sequence[Waiting], cheaper_than: int, budget: int) -> list[Any]:
        """Between two calls of a running batch whose cheapest request has ``cheaper_than`` tokens
        left: the waiting requests cheaper than that, cheapest first (ties: the older), within one
        call's ``budget`` (the first one even alone: it is cheaper than what it overtakes)."""
        cheaper = sorted((r for r in requests if r.pending_tokens < cheaper_than), key=lambda r: (r.pending_tokens, r.seq))
        return _fill([], budget, _in_request_order(cheaper))

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
