"""``longembed compare RUN_A RUN_B [RUN_C ...] [--baseline RUN] [--output DIR]``: a paired comparison
of benchmark runs (:func:`longembed.results.compare`), printed, and written with ``--output``."""

from __future__ import annotations

import argparse

from longembed.report.comparison import write_comparison
from longembed.report.comparison_tables import comparison_text
from longembed.results import compare


def run(args: argparse.Namespace) -> int:
    """Compare the runs, write the three files (with --output) and print the tables.

    The files are written before anything is printed, so output piped into ``head`` (a closed pipe)
    never loses them."""
    comparison = compare(args.runs, baseline=args.baseline, n_resamples=args.resamples, seed=args.seed)
    written = [] if args.output is None else list(write_comparison(comparison, args.output).values())
    print(comparison_text(comparison))
    for path in written:
        print(f"wrote {path}")
    return 0
