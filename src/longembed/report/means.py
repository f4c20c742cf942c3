"""Means a report computes itself, with their intervals: the mean over the lengths every run evaluated
("mean 1k..4k" in a by-length table) and the average over the tasks every run evaluated.

A run's own task scores and average come with intervals in its results.json; these partial means do
not, so they are computed here from the per-query scores the results keep.  Each part (one task, or
one length of a synthetic task) is weighted as the mean weighs it, and the interval resamples queries
within each part (:func:`~longembed.results.intervals.stratified_bootstrap_interval` with the same
weights), so it is the interval of exactly the number shown.  A part without per-query scores (a
results.json written before they were kept) leaves the mean without an interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from longembed.errors import UserError
from longembed.results import Interval, TaskResult
from longembed.results.intervals import stratified_bootstrap_interval


@dataclass(frozen=True)
class Part:
    """One term of a mean: its score (percent), its per-query scores (None if not kept), its weight."""

    score: float
    per_query: Mapping[str, float] | None
    weight: float = 1.0


@dataclass(frozen=True)
class PartialMean:
    """The weighted mean of some parts' scores, and its interval (None if a part kept no per-query
    scores)."""

    value: float
    interval: Interval | None


def partial_mean(parts: Mapping[str, Part]) -> PartialMean:
    """The mean of ``parts`` (name -> part), each weighted by its share of the total weight, with a
    stratified percentile-bootstrap interval over their per-query scores (seeded; 4 decimals, as a
    results.json keeps its intervals)."""
    if not parts:
        raise UserError("a mean needs at least one part")
    total = sum(p.weight for p in parts.values())
    value = sum(p.weight / total * p.score for p in parts.values())
    if any(p.per_query is None for p in parts.values()):
        return PartialMean(value, None)
    groups = {name: list(p.per_query.values()) for name, p in parts.items() if p.per_query is not None}
    interval = stratified_bootstrap_interval(groups, weights={name: p.weight for name, p in parts.items()})
    interval.estimate, interval.low, interval.high = (round(v, 4) for v in (interval.estimate, interval.low, interval.high))
    return PartialMean(value, interval)


def length_parts(task: TaskResult, lengths: list[int], weight: float = 1.0) -> dict[str, Part]:
    """``task``'s scores at ``lengths`` as parts sharing ``weight`` equally (each length's score as the
    by-length table shows it, its per-query scores when the file kept them)."""
    if task.by_length is None:
        raise UserError(f"task scored without lengths (main score {task.main_score}) has no by-length scores")
    units = task.lengths or {}
    return {
        str(n): Part(task.by_length[n], units[n].per_query if n in units else None, weight / len(lengths))
        for n in lengths
    }


def task_parts(tasks: Mapping[str, TaskResult], lengths: Mapping[str, list[int]]) -> dict[str, Part]:
    """The parts of an unweighted mean of task scores: a real task is one part, a synthetic task its
    ``lengths[task]``, each length weighted 1 / (tasks x its lengths), as a run's average weighs them."""
    parts: dict[str, Part] = {}
    for name, task in tasks.items():
        if name in lengths:
            parts |= {f"{name}/{n}": part for n, part in length_parts(task, lengths[name], 1 / len(tasks)).items()}
        else:
            parts[name] = Part(task.score, task.per_query, 1 / len(tasks))
    return parts
