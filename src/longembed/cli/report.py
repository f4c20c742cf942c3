"""``longembed report RUN_DIR... [--output DIR]``: report.md and PNG plots over benchmark runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.report.write import write_report


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "report",
        help="tables and plots over benchmark runs",
        description=(
            "Read the results.json of each RUN_DIR (a folder without one is searched one level down) and "
            "write OUTPUT/report.md (scores per run and task, passkey/needle by length) with PNG plots: "
            "accuracy-by-length heatmaps and grouped bars per task. A RUN_DIR holding a sweep.json also "
            "gets its sweep.md and sweep.png."
        ),
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run folders (or results.json files)")
    parser.add_argument("--output", type=Path, default=Path("report"), help="output folder (default: ./report)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the report and list the files written."""
    for path in write_report(args.runs, args.output).values():
        print(f"wrote {path}")
    return 0
