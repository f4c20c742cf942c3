"""The flags of ``longembed report`` (the command itself: :mod:`longembed.cli.report`).

Only light imports here: ``longembed report --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "report",
        help="tables and plots over benchmark runs",
        description=(
            "Read the results.json of each RUN_DIR (a folder without one is searched one level down) and "
            "write OUTPUT/report.md (scores per run and task, passkey/needle by length, each with its 95% "
            "interval when the run kept per-query scores) with PNG plots: accuracy-by-length heatmaps and "
            "lines with error bars, and grouped bars per task. A RUN_DIR holding a sweep.json also "
            "gets its sweep.md and sweep.png."
        ),
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run folders (or results.json files)")
    parser.add_argument("--output", type=Path, default=Path("report"), help="output folder (default: ./report)")
    parser.set_defaults(func=CommandHandler("longembed.cli.report", "run"))
