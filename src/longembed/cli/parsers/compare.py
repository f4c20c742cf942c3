"""The flags of ``longembed compare`` (the command itself: :mod:`longembed.cli.compare`).

Only light imports here: ``longembed compare --help`` imports neither numpy nor torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "compare",
        help="paired comparison of runs: differences, intervals, p-values",
        description=(
            "Compare benchmark runs query by query on the tasks and lengths they share (the same task data: "
            "refused otherwise). Per pair of runs (or each run against --baseline), per task and length: each "
            "run's score, the difference B - A with its 95% paired bootstrap interval and the p-value of a "
            "paired sign-flip test (Holm-adjusted over all tests when more than two runs are compared); "
            "significant differences are marked. Prints the tables; with --output also writes "
            "comparison.md, comparison.json and comparison.png (a forest plot)."
        ),
    )
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run folders (or their results.json files) written by longembed eval; "
                        "DIR1:DIR2 pools runs that scored different lengths into one side "
                        "(e.g. 1k..4k in one folder, 8k in another)")
    parser.add_argument("--output", type=Path, default=None,
                        help="folder for comparison.md, comparison.json and comparison.png (default: print only)")
    parser.add_argument("--baseline", default=None, metavar="RUN",
                        help="compare each run against this one only (one of RUN, or another run)")
    parser.add_argument("--resamples", type=int, default=10_000,
                        help="bootstrap resamples and random sign flips per test (default: 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling (default: 0)")
    parser.set_defaults(func=CommandHandler("longembed.cli.compare", "run"))
