"""``longembed report RUN_DIR... [--output DIR]``: report.md and PNG plots over benchmark runs;
``longembed report --summary RUN_DIR... [--json]``: the decision table (:mod:`longembed.report.summary`)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from longembed.errors import UserError
from longembed.report.summary import decision_table, summary_markdown
from longembed.report.table import load_table
from longembed.report.write import write_report


def run(args: argparse.Namespace) -> int:
    """Write the report and list the files written, or print the decision table."""
    if args.summary:
        return summary(args)
    if args.json:
        raise UserError("--json goes with --summary (the report itself is written as report.md)")
    for path in write_report(args.runs, args.output).values():
        print(f"wrote {path}")
    return 0


def summary(args: argparse.Namespace) -> int:
    """Print the decision table of the runs: markdown, or JSON with --json."""
    decisions = decision_table(load_table(args.runs, base_models(args.base_model)), margin=args.margin)
    if args.json:
        json.dump(decisions.to_dict(), sys.stdout, indent=1, default=str)
        print()
    else:
        command = "longembed report --summary " + " ".join(shlex.quote(str(p)) for p in args.runs)
        command += "".join(f" --base-model {shlex.quote(pair)}" for pair in args.base_model)
        if args.margin != 2.0:
            command += f" --margin {args.margin:g}"
        print(summary_markdown(decisions, command))
    return 0


def base_models(pairs: list[str]) -> dict[str, str]:
    """``--base-model DERIVED=BASE`` flags as a mapping; a malformed one is a one-line error."""
    mapping = {}
    for pair in pairs:
        derived, sep, base = pair.partition("=")
        if not sep or not derived.strip() or not base.strip():
            raise UserError(f"--base-model {pair!r}: expected DERIVED=BASE (model names as the table shows them)")
        mapping[derived.strip()] = base.strip()
    return mapping
