"""The ``longembed`` command: one subcommand per job (embed, eval, report, sweep, collapse, tune, export, train, serve)."""

from __future__ import annotations

import argparse
import logging
import sys

from longembed import __version__
from longembed.cli import collapse, embed, evaluate, export, report, serve, sweep, train, tune
from longembed.cli.options import resolve_method

SUBCOMMANDS = (embed, evaluate, report, sweep, collapse, tune, export, train, serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="longembed",
        description="Embed and search documents longer than an embedding model's context window.",
    )
    parser.add_argument("--version", action="version", version=f"longembed {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.register_cli(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; a user error prints one line ``longembed CMD: error: ...`` and exits 2."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = build_parser().parse_args(argv)
    try:
        resolve_method(args)
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, OSError, ImportError) as exc:
        print(f"longembed {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
