"""PDF files through pypdfium2 (PDFium, Apache-2.0/BSD): text page by page, located by 1-based page number.

PDFium gives each page's characters in reading order with ``\\r\\n`` at every line end and marks a
hyphen it judged a line-end hyphenation (U+FFFE): those words are joined.  Lines are joined with a
space unless the next one starts a paragraph, told by the page's geometry: a gap above it larger than
the page's usual line step, or a first line indented past the page's usual left margin.  Pages are
separated by a blank line; a page's first or last line that is only its page number (groff's ``-2-``) is
dropped.  A PDF whose pages hold no text (a scan) is an error, not an empty document.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from longembed.errors import MissingExtraError, UserError
from longembed.locations import DocumentText, Location

try:  # the ``documents`` extra
    import pypdfium2

    PDFIUM_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    PDFIUM_IMPORT_ERROR = exc
    pypdfium2 = None  # type: ignore[assignment]

#: PDFium's mark for a hyphen it judged to break a word at a line end
SOFT_HYPHEN_MARK = "\ufffe"
#: a line starts a paragraph when the gap above it is this many times the page's usual line step
PARAGRAPH_GAP = 1.3
#: ... or when it starts this many line heights right of the page's usual left margin
PARAGRAPH_INDENT = 0.8


def read_pdf(path: Path) -> DocumentText:
    """The PDF's text, page by page (see the module docstring); a UserError for an encrypted, damaged or
    text-less PDF."""
    if pypdfium2 is None:
        raise MissingExtraError(f"{path}: reading PDF files needs pypdfium2: pip install 'longembed[documents]' "
                                f"({PDFIUM_IMPORT_ERROR})")
    try:
        pdf = pypdfium2.PdfDocument(str(path))
    except pypdfium2.PdfiumError as exc:
        raise UserError(f"{path}: {_open_problem(str(exc))}") from None
    try:
        pages = [page_text(pdf[number], number + 1) for number in range(len(pdf))]
    finally:
        pdf.close()
    parts: list[str] = []
    marks: list[Location] = []
    offset = 0
    for number, text in enumerate(pages, start=1):
        if not text:
            continue
        if parts:
            parts.append("\n\n")
            offset += 2
        marks.append(Location(offset, page=number))
        parts.append(text)
        offset += len(text)
    if not parts:
        count = f"{len(pages)} page{'s' if len(pages) != 1 else ''}"
        raise UserError(f"{path}: no text layer (a scanned or image-only PDF, {count}); OCR is not supported")
    return DocumentText("".join(parts), tuple(marks))


def _open_problem(message: str) -> str:
    if "password" in message.lower():
        return "encrypted (it needs a password); save an unencrypted copy to index it"
    return f"not a readable PDF (damaged or cut short: {message})"


def page_text(page: pypdfium2.PdfPage, number: int | None = None) -> str:
    """One page's text: paragraphs separated by a blank line, the lines within one joined by a space;
    a first or last line that is only the page's ``number`` (groff's ``-2-``) dropped."""
    textpage = page.get_textpage()
    try:
        raw = textpage.get_text_range()
        lines = _lines(raw, textpage if textpage.count_chars() == len(raw) else None)
    finally:
        textpage.close()
        page.close()
    return _join(_without_page_number(lines, number))


def _without_page_number(lines: list[tuple[str, Box | None]], number: int | None) -> list[tuple[str, Box | None]]:
    """``lines`` without a first or last line holding nothing but ``number`` and punctuation ("-2-", "2",
    "— 2 —"): a page number, not text.  Running headers of words ("Chapter 3", a title) are kept: on a
    page alone they cannot be told from a heading."""
    if number is None:
        return lines
    filled = [i for i, (text, _) in enumerate(lines) if text.strip()]
    ends = {filled[0], filled[-1]} if filled else set()
    return [line for i, line in enumerate(lines) if i not in ends or not _only_number(line[0], number)]


def _only_number(text: str, number: int) -> bool:
    digits = "".join(c for c in text if c.isdigit())
    return digits == str(number) and not any(c.isalpha() for c in text)


#: where a line is on its page: (left and bottom of its first character, bottom of its last, its height)
Box = tuple[float, float, float, float]


def _lines(raw: str, textpage: pypdfium2.PdfTextPage | None) -> list[tuple[str, Box | None]]:
    """(text, :data:`Box` or None) of each line of the page (a line PDFium joined at a hyphen spans two)."""
    lines = []
    start = 0
    for line in raw.split("\r\n"):
        box = None
        if textpage is not None and line.strip():
            first = start + (len(line) - len(line.lstrip()))
            last = start + len(line.rstrip()) - 1
            left, bottom, _right, top = textpage.get_charbox(first)
            box = (left, bottom, textpage.get_charbox(last)[1], max(top - bottom, 1.0))
        lines.append((line, box))
        start += len(line) + 2
    return lines


def _join(lines: list[tuple[str, Box | None]]) -> str:
    """The page's lines joined: a paragraph break where :func:`_starts_paragraph` says, else a space;
    PDFium's hyphenation marks removed (the word joined)."""
    boxes = [box for _, box in lines if box is not None]
    steps = [above[2] - below[1] for above, below in zip(boxes, boxes[1:], strict=False) if above[2] > below[1]]
    step = statistics.quantiles(steps, n=4, method="inclusive")[0] if len(steps) > 1 else (steps or [None])[0]
    margin = min((box[0] for box in boxes), default=0.0)
    paragraphs: list[str] = []
    current = ""
    previous = None
    for text, box in lines:
        text = " ".join(text.split())
        if not text:
            continue
        if current and _starts_paragraph(previous, box, step, margin):
            paragraphs.append(current)
            current = ""
        current = text if not current else current + ("" if current.endswith(SOFT_HYPHEN_MARK) else " ") + text
        current = current.replace(SOFT_HYPHEN_MARK, "")
        previous = box
    if current:
        paragraphs.append(current)
    return "\n\n".join(p.replace(SOFT_HYPHEN_MARK, "") for p in paragraphs)


def _starts_paragraph(previous: Box | None, box: Box | None, step: float | None, margin: float) -> bool:
    """A gap above ``box`` wider than the page's usual line step (its lower quartile: most steps are
    lines of one paragraph), a first line indented past the margin, or a line above the previous one."""
    if previous is None or box is None:
        return False
    if box[0] - margin > PARAGRAPH_INDENT * box[3]:
        return True
    gap = previous[2] - box[1]
    return step is not None and (gap > PARAGRAPH_GAP * step or gap < 0)
