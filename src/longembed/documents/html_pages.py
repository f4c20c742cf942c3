"""HTML pages through inscriptis: the page's text laid out as a browser shows it, located by heading path.

A page is UTF-8 (or UTF-16 with a BOM), or in the charset it declares (``<meta charset>``, ``<?xml?>``).

Chosen over trafilatura on ten real pages (this project's mkdocs site, Debian's Texinfo and DocBook
manuals; ``benchmarks/html_readers.py``): trafilatura dropped every heading of the Texinfo and DocBook
pages (0 of 12), which are the locations a hit needs; inscriptis kept all of them, with their offsets in
the text, in half the time.  Inscriptis converts the whole page, so the page's navigation landmarks
(``<nav>``, ``<header>``, ``<footer>``, ``<aside>``, ``role="navigation"``), scripts, styles and the
permalink marks after headings (``¶``) are dropped first; what is left matches trafilatura's main text
within a few percent of words.  The ``<title>`` opens the text when the page has no ``<h1>``.  A page
is UTF-8 (or UTF-16 with a BOM), or in the charset it declares (``<meta charset>``, ``<?xml encoding?>``).
"""

from __future__ import annotations

import re
from pathlib import Path

from longembed.documents.plain import decode_text
from longembed.errors import MissingExtraError, UserError
from longembed.locations import SECTION_SEPARATOR, DocumentText, Location

try:  # the ``documents`` extra
    import lxml.etree
    import lxml.html
    from inscriptis import Inscriptis
    from inscriptis.model.config import ParserConfig

    HTML_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    HTML_IMPORT_ERROR = exc

#: what is dropped before the page is converted: navigation landmarks, code that is not text, permalinks
BOILERPLATE = ("//nav | //header | //footer | //aside | //*[@role='navigation'] | //script | //style | //noscript"
               " | //a[contains(concat(' ', normalize-space(@class), ' '), ' headerlink ')]")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_DECLARED_CHARSET = re.compile(rb"""(?i)(?:<meta[^>]+charset|<\?xml[^>]+encoding)\s*=\s*["']?([a-z0-9_.:-]+)""")
HEADINGS = {f"h{level}": [f"h{level}"] for level in range(1, 7)}


def read_html(path: Path) -> DocumentText:
    """The page's main text, located by the heading path each part sits under."""
    if HTML_IMPORT_ERROR is not None:
        raise MissingExtraError(f"{path}: reading HTML files needs inscriptis: pip install 'longembed[documents]' "
                                f"({HTML_IMPORT_ERROR})")
    markup = _markup(path.read_bytes(), path)
    try:
        tree = lxml.html.document_fromstring(markup)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise UserError(f"{path}: not a readable HTML page ({exc})") from None
    title = " ".join(" ".join(tree.xpath("//title//text()")).split())
    for element in tree.xpath(BOILERPLATE):
        element.drop_tree()
    converter = Inscriptis(tree, ParserConfig(annotation_rules=HEADINGS))
    layout = converter.get_text()
    headings = [(a.start, int(a.metadata[1]), " ".join(layout[a.start : a.end].split()))
                for a in sorted(converter.get_annotations(), key=lambda a: a.start)]
    prefix = title if title and not any(level == 1 for _, level, _ in headings) else ""
    text, moved = _tidy(([prefix, ""] if prefix else []) + layout.split("\n"))
    shift = 2 if prefix else 0
    starts = [0, *(_line_of(layout, start) + shift for start, _, _ in headings)]
    levels = ([(1, prefix)] if prefix else []) + [(level, name) for _, level, name in headings]
    marks = _section_marks([moved[line] for line in starts[0 if prefix else 1 :]], levels)
    return DocumentText(text, marks)


def _markup(data: bytes, path: Path) -> str:
    """The page's text (UTF-8, or UTF-16 with a BOM; else the charset the page declares), its XML
    declaration dropped (lxml refuses one in a string); bytes in no such encoding are the error naming the
    file and the first bad byte."""
    try:
        text = decode_text(data, path)
    except UserError:
        declared = _DECLARED_CHARSET.search(data[:4096])
        if declared is None:
            raise
        name = declared.group(1).decode("ascii")
        try:
            text = data.decode(name)
        except (LookupError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: not text in the charset it declares ({name}: {exc})") from None
    return _XML_DECLARATION.sub("", text, count=1)


def _tidy(lines: list[str]) -> tuple[str, list[int]]:
    """The lines with their runs of spaces collapsed and every run of blank lines made one (inscriptis lays
    the page out with indentation and margins), and where each line now starts."""
    pieces: list[str] = []
    moved: list[int] = []
    offset = 0
    blank_before = False
    for line in lines:
        clean = " ".join(line.split())
        if not clean:
            blank_before = True
            moved.append(offset)
            continue
        if pieces:
            separator = "\n\n" if blank_before else "\n"
            pieces.append(separator)
            offset += len(separator)
        moved.append(offset)
        pieces.append(clean)
        offset += len(clean)
        blank_before = False
    return "".join(pieces), moved


def _line_of(text: str, offset: int) -> int:
    """The 0-based line (split at ``\\n``) of the first character at or after ``offset`` that is not
    white space: an annotation may start on the line break before its heading."""
    while offset < len(text) and text[offset].isspace():
        offset += 1
    return text.count("\n", 0, offset)


def _section_marks(starts: list[int], levels: list[tuple[int, str]]) -> tuple[Location, ...]:
    """A mark at every heading (``starts`` its offsets in the text): the path of headings it sits under."""
    path: list[tuple[int, str]] = []
    marks = []
    for start, (level, name) in zip(starts, levels, strict=True):
        if not name:
            continue
        path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, name)]
        marks.append(Location(start, section=SECTION_SEPARATOR.join(t for _, t in path)))
    return tuple(marks)
