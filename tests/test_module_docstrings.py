"""Every module of the package opens with a docstring whose first paragraph says what it is and why in at
most three lines; longer explanations and schemas live in docs/ (issue 50)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import longembed

ROOT = Path(longembed.__file__).resolve().parent
#: Most lines of a module docstring's first paragraph.
MAX_OPENING_LINES = 3


def opening_lines(source: str) -> int | None:
    """Lines of the first paragraph of a module's docstring (None: the module has no docstring)."""
    docstring = ast.get_docstring(ast.parse(source), clean=True)
    if docstring is None or not docstring.strip():
        return None
    return len(re.split(r"\n[ \t]*\n", docstring.strip(), maxsplit=1)[0].splitlines())


def test_every_module_opens_with_at_most_three_lines() -> None:
    missing, long = [], []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        lines = opening_lines(path.read_text(encoding="utf-8"))
        if lines is None:
            missing.append(relative)
        elif lines > MAX_OPENING_LINES:
            long.append(f"{relative}: {lines} lines")
    assert not missing, f"modules without a docstring: {missing}"
    assert not long, f"module docstrings whose first paragraph has more than {MAX_OPENING_LINES} lines: {long}"


def test_the_opening_is_the_first_paragraph() -> None:
    assert opening_lines('"""One line.\n\nA long\nexplanation\nafter\nthe blank line.\n"""\nx = 1\n') == 1
    assert opening_lines('"""What,\nand why,\nin three.\n   \nMore.\n"""\n') == 3
    assert opening_lines('"""A\nfirst\nparagraph\nof four.\n"""\n') == 4
    assert opening_lines('"""Summary.\n\n    >>> example()\n"""\n') == 1
    assert opening_lines("x = 1\n") is None and opening_lines('"""   """\n') is None
    assert opening_lines('# a comment\n"""Still the docstring."""\n') == 1
