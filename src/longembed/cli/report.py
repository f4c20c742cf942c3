"""``longembed report RUN_DIR... [--output DIR]``: report.md and PNG plots over benchmark runs."""

from __future__ import annotations

import argparse

from longembed.report.write import write_report


def run(args: argparse.Namespace) -> int:
    """Write the report and list the files written."""
    for path in write_report(args.runs, args.output).values():
        print(f"wrote {path}")
    return 0
