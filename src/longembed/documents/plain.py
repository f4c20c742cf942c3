"""Text files: decoded from UTF-8 (with or without a byte-order mark) or UTF-16 with a byte-order mark,
anything else an error naming the file; Markdown files located by their heading path.

The text is the file's, unchanged (a BOM dropped), so what ``longembed index`` read before this reader
existed keeps its hash.  Markdown headings (ATX ``#`` and setext underlines, never a ``#`` inside a code
block) are found by markdown-it-py, CommonMark's reference parser in Python (the ``documents`` extra;
without it a Markdown file is read, but has no heading paths).
"""

from __future__ import annotations

import codecs
from pathlib import Path

from longembed.errors import UserError
from longembed.locations import SECTION_SEPARATOR, DocumentText, Location
from longembed.textfiles import lines_before, lines_through, not_utf8_error

try:  # the ``documents`` extra: without it a Markdown file is read as plain text, with no heading paths
    from markdown_it import MarkdownIt
except ImportError:  # pragma: no cover - exercised only without the extra
    MarkdownIt = None  # type: ignore[assignment,misc]

_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def decode_text(data: bytes, path: Path) -> str:
    """``data`` as text: UTF-8 (a BOM dropped) or UTF-16 with a BOM; other bytes are a UserError naming
    ``path`` (and the line and byte of the first bad one), never mojibake."""
    if data.startswith(_UTF32_BOMS):
        raise UserError(f"{path}: UTF-32 text, which longembed does not read; save the file as UTF-8")
    if data.startswith(_UTF16_BOMS):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise UserError(f"{path}: not UTF-16 text although it starts with a UTF-16 byte-order mark (bad bytes "
                            f"at byte offset {exc.start}); save the file as UTF-8") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = lines_before(data[:line_start]) + lines_through(data[line_start : exc.start])
        raise not_utf8_error(path, line, line_start, data[line_start:], exc, exc.start - line_start) from None
    if "\x00" in text:
        raise UserError(f"{path}: holds NUL bytes (UTF-16 without a byte-order mark, or not a text file); save "
                        "it as UTF-8")
    return text.removeprefix("\ufeff")


def read_text(path: Path) -> DocumentText:
    """A plain-text file (also reStructuredText, and whatever --glob names): its text, no locations."""
    return DocumentText(decode_text(path.read_bytes(), path))


def read_markdown(path: Path) -> DocumentText:
    """A Markdown file: its text, located by the heading path each part sits under."""
    text = decode_text(path.read_bytes(), path)
    return DocumentText(text, markdown_sections(text))


def markdown_sections(text: str) -> tuple[Location, ...]:
    """A mark at every heading of ``text``: the path of headings it sits under (``Install > Models``)."""
    if MarkdownIt is None:
        return ()
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    tokens = MarkdownIt("commonmark").parse(text)
    path: list[tuple[int, str]] = []
    marks = []
    for token, inline in zip(tokens, tokens[1:], strict=False):
        if token.type != "heading_open" or token.map is None:
            continue
        level = int(token.tag[1])
        path = [(lvl, title) for lvl, title in path if lvl < level] + [(level, " ".join(inline.content.split()))]
        marks.append(Location(line_starts[token.map[0]], section=SECTION_SEPARATOR.join(t for _, t in path)))
    return tuple(marks)
