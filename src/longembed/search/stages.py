"""Where a build's wall time goes: seconds per stage (reading, loading, tokenizing, encoding, writing...).

Stages are timed on the build's own thread, so they add up to its wall time; tokenizing that a
background thread did meanwhile is counted apart (``background``), not twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: the stages in the order a build runs them
#: (passages: every document's sentence pieces embedded for the saved snapshot, :mod:`longembed.search.piece_vectors`)
STAGES = ("reading", "loading", "planning", "tokenizing", "encoding", "writing", "passages", "finishing")


@dataclass
class StageTimes:
    """Seconds per stage on the build's thread (``tokenizing``: the waits for a batch the background
    thread had not finished), that thread's own seconds (``background``), the tokens the model read,
    and the wall time from the first stage's start."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    background: float = 0.0
    tokens: int = 0
    started: float = field(default_factory=time.perf_counter)
    wall: float = 0.0

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as ``name`` (one of :data:`STAGES`)."""
        if name not in self.seconds:
            raise ValueError(f"unknown build stage {name!r}; the stages are {', '.join(STAGES)}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start

    def add(self, name: str, seconds: float) -> None:
        """Count ``seconds`` measured otherwise as ``name``."""
        if name not in self.seconds:
            raise ValueError(f"unknown build stage {name!r}; the stages are {', '.join(STAGES)}")
        self.seconds[name] += seconds

    def move(self, seconds: float, source: str, target: str) -> None:
        """Count ``seconds`` timed as ``source`` as ``target`` instead (a stage run inside another's block)."""
        self.add(source, -seconds)
        self.add(target, seconds)

    def stop(self) -> None:
        """The wall time ends now."""
        self.wall = time.perf_counter() - self.started

    def share(self, name: str) -> float:
        """``name``'s fraction of the wall time (0 before :meth:`stop`)."""
        return self.seconds[name] / self.wall if self.wall > 0 else 0.0

    def summary(self) -> str:
        """One line: every stage's seconds, the encoding share, and tokens per second of wall time."""
        parts = []
        for name in STAGES:
            text = f"{name} {seconds_text(self.seconds[name])}"
            if name == "tokenizing" and self.background:
                text += f" waited ({seconds_text(self.background)} in the background)"
            if name == "encoding":
                text += f" ({self.share(name):.0%})"
            parts.append(text)
        rate = f"; {self.tokens / self.wall:,.0f} tokens/s" if self.tokens and self.wall else ""
        return f"time {seconds_text(self.wall)}: " + ", ".join(parts) + rate

    def to_dict(self) -> dict[str, float | int]:
        """The figures as JSON-ready numbers (seconds per stage, ``background_tokenizing``, ``wall``, ``tokens``)."""
        return {**{k: round(v, 4) for k, v in self.seconds.items()}, "background_tokenizing": round(self.background, 4),
                "wall": round(self.wall, 4), "tokens": self.tokens}


def seconds_text(seconds: float) -> str:
    """``123.4 s``, ``3.4 s``, ``0.0213 s``: tenths from a second up, three significant digits below."""
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.3g} s"
