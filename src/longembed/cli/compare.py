"""``longembed compare RUN_A RUN_B [RUN_C ...] [--baseline RUN] [--output DIR]``: a paired comparison
of benchmark runs (:func:`longembed.results.compare`), printed, and written with ``--output``.

A RUN may pool several folders joined by the path separator (``runs/pi-4k-200:runs/pi-8k-50``), for
lengths run apart (:func:`longembed.results.pool_runs`); it is labelled by its folders' names joined
with ``+``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from longembed.report.comparison import write_comparison
from longembed.report.comparison_tables import comparison_text
from longembed.results import RunResults, compare, pool_runs


def run(args: argparse.Namespace) -> int:
    """Compare the runs, write the three files (with --output) and print the tables.

    The files are written before anything is printed, so output piped into ``head`` (a closed pipe)
    never loses them."""
    names = list(args.runs)
    base = None
    if args.baseline is not None:
        base = next((name for name in names if same_run(name, args.baseline)), None)
        if base is None:  # compare's own rule: a baseline not among the runs comes first
            names.insert(0, base := args.baseline)
    sources = {name: run_source(name) for name in names}
    comparison = compare([sources[n] for n in names], baseline=None if base is None else sources[base],
                         n_resamples=args.resamples, seed=args.seed, labels=[run_label(n) for n in names])
    written = [] if args.output is None else list(write_comparison(comparison, args.output).values())
    print(comparison_text(comparison))
    for path in written:
        print(f"wrote {path}")
    return 0


def run_source(arg: str) -> Path | RunResults:
    """A RUN argument: a folder or results.json file, or folders joined by the path separator, pooled."""
    folders = run_folders(arg)
    return Path(arg) if len(folders) == 1 else pool_runs(folders)


def run_folders(arg: str) -> list[Path]:
    """The folders a RUN argument names: one, or the pooled ones (a results.json file: its folder)."""
    path = Path(arg)
    parts = [path] if path.exists() or os.pathsep not in arg else [Path(p) for p in arg.split(os.pathsep) if p]
    return [p.parent if p.suffix == ".json" else p for p in parts]


def run_label(arg: str) -> str:
    """A run's name in the tables: its folder's name; a pooled run's folder names joined with "+"."""
    return "+".join(folder.name for folder in run_folders(arg))


def same_run(a: str, b: str) -> bool:
    """Whether two RUN arguments name the same folders (``runs/x``, ``runs/x/`` and ``runs/x/results.json`` do)."""
    return [f.resolve() for f in run_folders(a)] == [f.resolve() for f in run_folders(b)]
