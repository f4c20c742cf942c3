"""mkdocs hook: the command-line page is the parsers' own ``--help``, generated at build time.

A page holding the marker ``<!-- cli-reference -->`` gets, in its place, one section per subcommand
(and per sub-subcommand, such as ``train jina``) with the exact text ``longembed ... --help`` prints,
built from ``longembed.cli.main.build_parser``.  So the page cannot drift from the flags: a flag added,
renamed or removed changes the page at the next build.  The repository's ``src/`` goes first on
``sys.path``, so the page describes the sources being built, not another installed copy.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import MISSING, fields
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"  # docs/hooks/ -> the repository's src/
sys.path.insert(0, str(SRC))

from longembed.cli.main import build_parser  # noqa: E402  (after src/ is on the path)
from longembed.serving.settings import ServerSettings  # noqa: E402

MARKER = "<!-- cli-reference -->"
SETTINGS_MARKER = "<!-- server-settings -->"
HELP_WIDTH = "84"  # argparse wraps at $COLUMNS: a fixed width gives the same page on every machine


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, server_settings_table())
    return markdown


def server_settings_table() -> str:
    """Markdown table of ``ServerSettings``' fields: flag, default, and the help ``serve --help`` shows."""
    rows = ["| field | flag | default | what it sets |", "|---|---|---|---|"]
    for f in fields(ServerSettings):
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING else "")
        help_text = str(f.metadata.get("help", "")).replace("|", "\\|")
        flag = "--" + f.name.replace("_", "-")
        rows.append(f"| `{f.name}` | `{flag}` | `{default!r}` | {help_text} |")
    return "\n".join(rows)


def cli_reference() -> str:
    """Markdown: the top-level help, then each subcommand's, in the order ``longembed --help`` lists them."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        parser = build_parser([])
        return "\n".join(_sections(parser, ["longembed"], level=2))
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def _sections(parser: argparse.ArgumentParser, words: list[str], level: int) -> list[str]:
    command = " ".join(words)
    lines = [f"{'#' * level} `{command}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, subparser in _subcommands(parser).items():
        lines += _sections(subparser, [*words, name], min(level + 1, 3))
    return lines


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
