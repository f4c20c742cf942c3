"""``longembed compare RUN_A RUN_B [RUN_C ...] [--baseline RUN] [--output DIR]``: a paired comparison
of benchmark runs (:func:`longembed.results.compare`), printed, and written with ``--output``."""

from __future__ import annotations

import argparse

from longembed.report.comparison import write_comparison
from longembed.report.comparison_tables import comparison_text
from longembed.results import compare


def run(args: argparse.Namespace) -> int:
    """Compare the runs, print the tables and, with --output, write the three files."""
    comparison = compare(args.runs, baseline=args.baseline, n_resamples=args.resamples, seed=args.seed)
    print(comparison_text(comparison))
    if args.output is not None:
        for path in write_comparison(comparison, args.output).values():
            print(f"wrote {path}")
    return 0
