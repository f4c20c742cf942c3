"""How long the model takes for a call of n tokens, from the calls it ran (for the early 429 and Retry-After).

A call costs a fixed overhead plus a cost per token: :class:`Throughput` fits ``seconds = per_call +
per_token x tokens`` by least squares over the recent calls, each weighted by how recent it is in
model time (a call's weight decays with the model seconds run since, over ``horizon_seconds``).  A
single rate over the recent mix was wrong both ways: one-line questions (overhead-bound) made long
calls look several times slower than they were, and their count, not their time, decided the rate,
so twenty short requests after one long one refused short work for a wait that never came (issue 51).
Until two call sizes are seen the fit is a rate alone (no overhead); it is None before any call, and
nothing is refused on a time estimate before then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Model seconds over which a call's weight decays by e (older calls count less).
HORIZON_SECONDS = 60.0


@dataclass
class Throughput:
    """Model seconds per call and per token, fitted over recent calls (time-decayed least squares)."""

    horizon_seconds: float = HORIZON_SECONDS
    _weight: float = 0.0  # sums over calls, each call's weight decayed: sum w, sum w x, sum w y, ...
    _tokens: float = 0.0
    _seconds: float = 0.0
    _tokens_squared: float = 0.0
    _tokens_seconds: float = 0.0

    def record(self, n_tokens: int, seconds: float) -> None:
        """One model call of ``n_tokens`` tokens that took ``seconds``."""
        seconds = max(seconds, 0.0)
        decay = math.exp(-seconds / self.horizon_seconds)
        self._weight = decay * self._weight + 1.0
        self._tokens = decay * self._tokens + n_tokens
        self._seconds = decay * self._seconds + seconds
        self._tokens_squared = decay * self._tokens_squared + n_tokens * n_tokens
        self._tokens_seconds = decay * self._tokens_seconds + n_tokens * seconds

    @property
    def costs(self) -> tuple[float, float] | None:
        """(seconds per call, seconds per token), or None before any call with tokens and time."""
        if self._tokens <= 0 or self._seconds <= 0:
            return None
        spread = self._weight * self._tokens_squared - self._tokens ** 2  # weighted variance of call sizes, x w^2
        if spread > 1e-6 * self._weight * self._tokens_squared:  # call sizes differ: fit both
            per_token = (self._weight * self._tokens_seconds - self._tokens * self._seconds) / spread
            per_call = (self._seconds - per_token * self._tokens) / self._weight
            if per_token > 0 and per_call >= 0:
                return per_call, per_token
        return 0.0, self._seconds / self._tokens  # one size, or a fit that makes no sense: a rate alone

    @property
    def tokens_per_second(self) -> float | None:
        """Tokens per second of long calls (the per-token cost alone), None before any call."""
        costs = self.costs
        return None if costs is None else 1.0 / costs[1]

    def seconds_for(self, n_tokens: float, calls: int = 1) -> float | None:
        """Seconds the model needs for ``n_tokens`` tokens in ``calls`` calls (None before any call)."""
        costs = self.costs
        if costs is None:
            return None
        per_call, per_token = costs
        return per_call * calls + per_token * n_tokens


def retry_after_seconds(seconds: float) -> int:
    """A Retry-After value: whole seconds, at least 1."""
    return max(1, math.ceil(seconds))
