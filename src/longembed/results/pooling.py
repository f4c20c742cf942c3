"""One side of a comparison pooled from several runs: ``longembed compare A_4K:A_8K B_4K:B_8K``.

Long lengths are often run apart: passkey and needle at 1k..4k with 200 queries per length in one
folder, 8k with 50 queries in another (an 8k document costs several times a 4k one).  To ask "B - A
on the 1k..8k mean", each side's units (task, length) are gathered into one :class:`RunResults`
and handed to :func:`~longembed.results.compare`, which pairs them query by query as it pairs any
two runs: the same data checks, per-unit and per-task rows, and an average weighted as a run's
average is.

The pooled run carries the units only: its task-level scores, intervals and average are the first
run's and are not recomputed (``compare`` reads units, never those).  A unit that two of the runs
both scored is refused: which of the two would count is a choice the user has to make.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from longembed.errors import UserError
from longembed.results.run import RunResults, TaskResult

PooledSource = RunResults | str | Path


def pool_runs(runs: Sequence[PooledSource], lengths: Collection[int] | None = None) -> RunResults:
    """The units of ``runs`` (RunResults, run folders or results.json files) as one run, keeping only
    ``lengths`` of the synthetic tasks when given.

    Raises ValueError for fewer than one run, or for a unit (a task at a length, or a real task) that
    two of the runs scored.
    """
    if not runs:
        raise UserError("pool_runs needs at least one run")
    loaded = [(run if isinstance(run, RunResults) else RunResults.load(run), _name(run, i)) for i, run in enumerate(runs)]
    pooled = copy.deepcopy(loaded[0][0])
    pooled.tasks = {}
    scored_by: dict[tuple[str, int | None], str] = {}
    for run, name in loaded:
        for task_name, task in run.tasks.items():
            units = {n: u for n, u in task.units().items() if n is None or lengths is None or n in lengths}
            if not units:
                continue
            for length in units:
                if (task_name, length) in scored_by:
                    where = task_name if length is None else f"{task_name} at length {length}"
                    raise UserError(f"{where} is scored by both {scored_by[task_name, length]} and {name}: "
                                     "pool runs that scored different units")
                scored_by[task_name, length] = name
            _add_units(pooled, task_name, task, units)
    return pooled


def _add_units(pooled: RunResults, task_name: str, task: TaskResult, units: dict[int | None, Any]) -> None:
    """Put one run's units of a task into the pooled run (a real task whole, a synthetic one by length)."""
    if task.lengths is None:
        pooled.tasks[task_name] = copy.deepcopy(task)
    elif task_name not in pooled.tasks:
        pooled.tasks[task_name] = copy.deepcopy(task)
        pooled.tasks[task_name].lengths = copy.deepcopy(units)
    else:
        pooled.tasks[task_name].lengths.update(copy.deepcopy(units))


def _name(run: PooledSource, index: int) -> str:
    """How an error names a run: its folder, or its position."""
    if isinstance(run, RunResults):
        return f"run {index + 1}"
    path = Path(run)
    return str(path.parent if path.suffix == ".json" else path)
