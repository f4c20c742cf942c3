"""Word files (.docx) through python-docx: paragraphs and tables in document order, located by heading path.

A paragraph styled ``Title`` or ``Heading N`` is a heading (the title heads every path); a table is read
row by row, its cells separated by `` | ``.  Headers, footers, comments, footnotes and text boxes are
not read (python-docx does not expose them in the body's order).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from longembed.errors import MissingExtraError, UserError
from longembed.locations import SECTION_SEPARATOR, DocumentText, Location

try:  # the ``documents`` extra
    import docx
    import lxml.etree
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table

    DOCX_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    DOCX_IMPORT_ERROR = exc

CELL_SEPARATOR = " | "


def read_docx(path: Path) -> DocumentText:
    """The document's paragraphs and tables, one block each, separated by a blank line."""
    if DOCX_IMPORT_ERROR is not None:
        raise MissingExtraError(f"{path}: reading Word files needs python-docx: pip install 'longembed[documents]' "
                                f"({DOCX_IMPORT_ERROR})")
    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, lxml.etree.XMLSyntaxError) as exc:
        raise UserError(f"{path}: not a readable Word (.docx) file (damaged, cut short or another format: "
                        f"{exc or type(exc).__name__})") from None
    blocks: list[str] = []
    marks: list[Location] = []
    path_so_far: list[tuple[int, str]] = []
    offset = 0
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            block = "\n".join(CELL_SEPARATOR.join(" ".join(c.text.split()) for c in row.cells) for row in item.rows)
            level = None
        else:
            block = " ".join(item.text.split())
            level = _heading_level(item.style.name if item.style is not None else "")
        if not block.strip():
            continue
        if blocks:
            offset += 2
        if level is not None:
            path_so_far = [(lvl, t) for lvl, t in path_so_far if lvl < level] + [(level, block)]
            marks.append(Location(offset, section=SECTION_SEPARATOR.join(t for _, t in path_so_far)))
        blocks.append(block)
        offset += len(block)
    return DocumentText("\n\n".join(blocks), tuple(marks))


def _heading_level(style: str) -> int | None:
    """0 for ``Title``, N for ``Heading N``, else None."""
    if style == "Title":
        return 0
    if style.startswith("Heading ") and style.removeprefix("Heading ").isdigit():
        return int(style.removeprefix("Heading "))
    return None
