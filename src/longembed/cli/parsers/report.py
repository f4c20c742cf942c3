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
            "gets its sweep.md and sweep.png. With --summary, print the decision table instead: per model, "
            "task and length, the best strategy with its 95% interval, the strategies tied with it "
            "(non-inferiority within --margin points, paired bootstrap bounds Bonferroni-adjusted over the "
            "strategies compared with the best, as `longembed advise` decides) and the cheapest of those."
        ),
        epilog=(
            "examples:\n"
            "  longembed report runs/minilm-truncate runs/minilm-pi-4k --output report\n"
            "  longembed report --summary results/runs 'results/advise/*/runs' > decisions.md\n"
            "  longembed report --summary --json results/runs > decisions.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run folders, results.json files, folders of run folders, or glob patterns of them")
    parser.add_argument("--output", type=Path, default=Path("report"), help="output folder (default: ./report)")
    parser.add_argument("--summary", action="store_true",
                        help="print the decision table (markdown) of the runs instead of writing a report")
    parser.add_argument("--json", action="store_true", help="with --summary: print the decision table as JSON")
    parser.add_argument("--base-model", action="append", default=[], metavar="DERIVED=BASE",
                        help="with --summary: count the runs of model DERIVED (a tuned or retrofitted folder, named "
                             "as the table names it) as strategies of BASE, so they are compared with BASE's "
                             "methods; repeatable")
    parser.add_argument("--margin", type=float, default=2.0, metavar="POINTS",
                        help="with --summary: the points a strategy may lose against the best and be called "
                             "tied (default 2)")
    parser.set_defaults(func=CommandHandler("longembed.cli.report", "run"))
