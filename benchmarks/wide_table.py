"""One wide markdown table of several runs, with their paired differences: the tables of RESULTS.md.

A row per run: a synthetic task's score at each length and its mean over the lengths [95% interval],
a real task's score [interval], and the run's average [interval].  With ``--comparison`` (the folder
``longembed compare`` wrote for the same runs), a row per compared pair under it: B - A per length
and per task, with the interval on the means and the average, **bold** where the comparison found the
difference significant (Holm-adjusted when it compared more than two runs).  Every number is read
from the runs' results.json and the comparison.json; nothing is recomputed or typed by hand.

    python benchmarks/wide_table.py runs/minilm-truncate-200 runs/minilm-pi-4k-200 runs/minilm-rp-4k-200 \\
        --comparison results/intervals/minilm-truncate-pi-rp-4k-200 --pairs "rp 4096 - pi 4096"
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from longembed.report.formatting import fmt_interval, length_title
from longembed.results import Comparison, RunResults
from longembed.results.comparison import Difference


def columns(runs: Sequence[RunResults]) -> list[tuple[str, int | None]]:
    """(task, length) per column, in the runs' task order: each length of a synthetic task, then its
    mean (length None); a real task once."""
    tasks: dict[str, set[int]] = {}
    for run in runs:
        for name, task in run.tasks.items():
            tasks.setdefault(name, set()).update(int(n) for n in (task.by_length or {}))
    return [(name, n) for name, lengths in tasks.items() for n in [*sorted(lengths), None]]


def header(cols: list[tuple[str, int | None]]) -> list[str]:
    """"passkey 1k", "2k", ..., "mean" for a synthetic task; the name for a real one."""
    cells, previous = [], None
    for task, length in cols:
        name = length_title(length) if length is not None else ("mean" if task == previous else "")
        cells.append(name if task == previous else f"{task} {name}".strip())
        previous = task
    return cells


def run_row(label: str, run: RunResults, cols: list[tuple[str, int | None]]) -> str:
    cells = []
    for task_name, length in cols:
        task = run.tasks.get(task_name)
        if task is None:
            cells.append("–")
        elif length is None:
            cells.append(fmt_interval(task.score, task.interval))
        else:
            unit = (task.lengths or {}).get(length)
            cells.append(f"{unit.score:.1f}" if unit is not None else "–")
    average = "–" if run.average is None else fmt_interval(run.average, run.average_interval)
    return f"| {label} | " + " | ".join(cells) + f" | {average} |"


def difference_cell(d: Difference | None, with_bounds: bool) -> str:
    if d is None:
        return "–"
    text = f"{d.difference.estimate:+.1f}"
    text = f"**{text}**" if d.significant else text
    if with_bounds:
        text += f" [{d.difference.low:+.1f}, {d.difference.high:+.1f}]"
    return text


def pair_row(comparison: Comparison, a: str, b: str, cols: list[tuple[str, int | None]]) -> str:
    pair = next((p for p in comparison.pairs if (p.a, p.b) == (a, b)), None)
    if pair is None:
        known = [f"{p.b} - {p.a}" for p in comparison.pairs]
        raise SystemExit(f"the comparison has no pair {b} - {a}; it has: {known}")
    found = {(d.task, d.length): d for d in pair.differences}
    real = {name for name, length in cols if length is not None}
    cells = []
    for task_name, length in cols:
        d = found.get((task_name, length))
        cells.append(difference_cell(d, with_bounds=length is None and (task_name in real or d is not None)))
    average = found.get(("average", None))
    return f"| {b} - {a} (paired) | " + " | ".join(cells) + f" | {difference_cell(average, True)} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (or results.json files)")
    parser.add_argument("--labels", nargs="+", help="a name per run (default: the comparison's labels, else folders)")
    parser.add_argument("--comparison", type=Path, help="longembed compare's output for these runs")
    parser.add_argument("--pairs", nargs="*", default=None,
                        help='"B - A" label pairs to show (default: every pair of the comparison)')
    args = parser.parse_args()

    runs = [RunResults.load(path) for path in args.runs]
    comparison = Comparison.load(args.comparison) if args.comparison else None
    labels = args.labels or (
        [r.label for r in comparison.runs] if comparison else [Path(p).name for p in args.runs]
    )
    if len(labels) != len(runs):
        raise SystemExit(f"{len(labels)} labels for {len(runs)} runs")
    cols = columns(runs)
    print("| run | " + " | ".join(header(cols)) + " | avg |")
    print("| --- |" + " ---: |" * (len(cols) + 1))
    for label, run in zip(labels, runs, strict=True):
        print(run_row(label, run, cols))
    if comparison is None:
        return
    pairs = [tuple(p.split(" - ")[::-1]) for p in args.pairs] if args.pairs else [(p.a, p.b) for p in comparison.pairs]
    for a, b in pairs:
        print(pair_row(comparison, a, b, cols))


if __name__ == "__main__":
    main()
