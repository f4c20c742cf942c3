"""``--help`` of eval, embed, serve and index (issue 44): one line per --method choice, a glossary of
the jargon, and examples that the parser accepts as written."""

from __future__ import annotations

import re
import shlex

import pytest

from longembed.cli.main import build_parser
from longembed.cli.options import GLOSSARY
from longembed.extension.methods import METHODS

COMMANDS = ("eval", "embed", "serve", "index")


def command_help(command: str) -> str:
    parser = build_parser([command])
    subparsers = next(a for a in parser._actions if a.dest == "command")
    return subparsers.choices[command].format_help()


def examples(text: str) -> list[list[str]]:
    """The epilog's ``longembed ...`` examples as argv lists (continuation lines joined, comments and
    environment assignments dropped)."""
    block = text.split("\nexamples:\n", 1)[1].replace("\\\n", " ")
    commands = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        if words and words[0] == "longembed":
            commands.append(words[1:])
    return commands


@pytest.mark.parametrize("command", COMMANDS)
def test_one_line_per_method_and_a_glossary(command: str) -> None:
    text = command_help(command)
    lines = text.splitlines()
    for name, method in METHODS.items():
        (line,) = [x for x in lines if re.match(rf"  {name}\s", x)]
        assert line.rstrip().endswith(method.summary)
    for term in GLOSSARY:
        assert any(x.startswith(f"  {term} ") for x in lines), term


@pytest.mark.parametrize("command", COMMANDS)
def test_the_examples_parse(command: str) -> None:
    found = examples(command_help(command))
    assert any(argv[0] == command for argv in found)
    for argv in found:
        args = build_parser(argv).parse_args(argv)  # argparse exits (SystemExit) on a wrong flag
        assert args.command == argv[0]
