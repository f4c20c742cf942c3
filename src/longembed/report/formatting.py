"""Numbers and markdown tables as every report writes them (one place, so they all look alike)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longembed.results import Interval

MISSING = "–"


def shown_path(path: str | Path | None, base: str | Path | None = None) -> str:
    """A recorded folder as a reader should see it: relative to ``base`` (default: the current
    directory) when it lies inside it, so tables written from a repository's root name runs by their
    place in the repository; otherwise as recorded.  ``MISSING`` for a run with no folder."""
    if path is None:
        return MISSING
    base = Path.cwd() if base is None else Path(base)
    try:
        return Path(path).resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def fmt(value: Any, digits: int = 1) -> str:
    """A number with ``digits`` decimals, or "–" for None."""
    return MISSING if value is None else f"{float(value):.{digits}f}"


def signed(value: Any, digits: int = 2) -> str:
    """A difference with its sign (+1.25, -0.50), or "–" for None."""
    return MISSING if value is None else f"{float(value):+.{digits}f}"


def length_title(n: int) -> str:
    """4096 -> "4k", 256 -> "256" (k = 1024, as LongEmbed names its lengths)."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def md_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int, numeric_to: int | None = None
) -> str:
    """A markdown table whose columns numeric_from..numeric_to (exclusive; None: to the end) are
    right-aligned."""
    end = len(header) if numeric_to is None else numeric_to
    rule = ["---:" if numeric_from <= i < end else "---" for i in range(len(header))]
    return "\n".join([md_row(header), "| " + " | ".join(rule) + " |", *(md_row(r) for r in rows)])


def fmt_interval(value: Any, interval: Interval | None, digits: int = 1, bound_digits: int = 0) -> str:
    """A score and its confidence interval, ``"58.0 [48, 68]"`` (score [low, high]); the plain score
    when there is no interval (a run written before per-query scores were kept), "–" for None.

    The score is ``value`` (the number every table showed before intervals), the bounds the interval's.
    """
    if value is None or interval is None:
        return fmt(value, digits)
    return f"{float(value):.{digits}f} {fmt_bounds(interval, bound_digits)}"


def fmt_bounds(interval: Interval | None, digits: int = 0) -> str:
    """An interval's bounds, ``"[48, 68]"``, or "–" for None."""
    return MISSING if interval is None else f"[{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def interval_method(interval: Interval) -> str:
    """How an interval was computed, in words: "95% percentile bootstrap over queries, 10,000
    resamples, seed 0"."""
    return f"{interval.confidence * 100:g}% {interval.method}, {interval.resamples:,} resamples, seed {interval.seed}"
