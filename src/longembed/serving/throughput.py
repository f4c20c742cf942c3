"""How fast the model has been running, and so how long waiting work will take (for Retry-After).

The batcher records each batch's tokens and seconds; :class:`Throughput` keeps exponentially weighted
sums of both and divides them, so a few slow or fast batches move the estimate without one batch
deciding it.  Tokens of long inputs cost more than tokens of short ones (attention grows with the
square of the length), so the estimate is a rate over the recent mix, not a promise; it is None until
a batch has run, and nothing is refused on a time estimate before then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The weight of the newest batch in the running sums.
NEWEST_WEIGHT = 0.3


@dataclass
class Throughput:
    """Tokens per second over recent batches (exponentially weighted)."""

    newest_weight: float = NEWEST_WEIGHT
    _tokens: float = 0.0
    _seconds: float = 0.0

    def record(self, n_tokens: int, seconds: float) -> None:
        new = 1.0 if self._seconds == 0 else self.newest_weight  # the first batch counts whole
        self._tokens = (1.0 - new) * self._tokens + new * n_tokens
        self._seconds = (1.0 - new) * self._seconds + new * max(seconds, 0.0)

    @property
    def tokens_per_second(self) -> float | None:
        return self._tokens / self._seconds if self._seconds > 0 else None

    def seconds_for(self, n_tokens: float) -> float | None:
        """Seconds the model needs for ``n_tokens`` at the recent rate (None before any batch)."""
        rate = self.tokens_per_second
        return None if rate is None else n_tokens / rate


def retry_after_seconds(seconds: float) -> int:
    """A Retry-After value: whole seconds, at least 1."""
    return max(1, math.ceil(seconds))
