"""A paired difference over units that several runs scored between them: "B - A on the 1k..8k mean".

``longembed compare`` pairs two runs.  When one side's lengths come from several runs (1k..4k at 200
queries per length in one run, 8k at 50 in another, or PI to 4096 up to 4k and PI to 8192 at 8k), this
pools each side's units (task, length) into one run and hands the two to
:func:`longembed.results.compare`: the same data checks, per-unit and per-task rows, and an average
weighted as a run's average is (each length 1 / (tasks x the task's lengths)).  On two single runs it
prints exactly ``compare``'s table (RESULTS.md, the retrofit section).

    python benchmarks/pooled_difference.py --a runs/pi-4k-200 runs/pi-8k-50 --b runs/alibi-200 runs/alibi-8k-50 \\
        --lengths 1024 2048 4096 8192
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Sequence
from pathlib import Path

from longembed.report.comparison_tables import comparison_text
from longembed.results import RunResults, compare


def pooled_run(folders: Sequence[Path], lengths: set[int] | None) -> RunResults:
    """The units of several runs as one run, for ``compare`` (which reads only the units: a task's
    aggregate scores are left as the first run had them).  A unit two runs both scored is refused."""
    runs = [RunResults.load(folder) for folder in folders]
    pooled = copy.deepcopy(runs[0])
    pooled.tasks = {}
    for folder, run in zip(folders, runs, strict=True):
        for name, task in run.tasks.items():
            units = {n: u for n, u in (task.lengths or {}).items() if lengths is None or n in lengths}
            if name not in pooled.tasks:
                pooled.tasks[name] = copy.deepcopy(task)
                if task.lengths is not None:
                    pooled.tasks[name].lengths = units
            elif task.lengths is None or set(units) & set(pooled.tasks[name].lengths or {}):
                raise SystemExit(f"{folder}: a unit of {name} is already scored by another run of the side")
            else:
                pooled.tasks[name].lengths.update(units)
    return pooled


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", nargs="+", type=Path, required=True, help="run folders of side A")
    parser.add_argument("--b", nargs="+", type=Path, required=True, help="run folders of side B")
    parser.add_argument("--lengths", nargs="*", type=int, default=None, help="synthetic lengths to pool (default: all shared)")
    args = parser.parse_args(argv)
    lengths = set(args.lengths) if args.lengths else None
    sides = [pooled_run(args.a, lengths), pooled_run(args.b, lengths)]
    print(comparison_text(compare(sides, labels=["A", "B"])))


if __name__ == "__main__":
    main()
