"""Builds the reader tests' fixtures with the tools people make documents with (groff, reportlab, pypdf,
python-docx): run from the repository root, ``python tests/documents/make_fixtures.py``; the files are
committed, so the tests need none of these tools.  The HTML pages are saved as they were built: docs-page.html
is this project's "Getting started" page from ``mkdocs build``, texinfo-page.html Debian's libffi manual page
(/usr/share/doc/libffi8/html/Arrays-Unions-Enums.html, MIT)."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import docx
from PIL import Image, ImageDraw
from pypdf import PdfReader, PdfWriter
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

HERE = Path(__file__).resolve().parent / "fixtures"

#: groff -ms source of a three-page manual: numbered headings, justified paragraphs that groff hyphenates,
#: each section on its own page; the fact a test searches for is on page 2.
MANUAL_MS = r""".TL
Harbour Tide Manual
.AU
Port Authority
.NH
Introduction
.PP
This manual explains how the harbour authority measures, predicts and publishes the tides of the
estuary. Every spring the harbour master publishes the predictions for the coming year, computed from
the harmonic constituents of the gauge records, and distributes them to pilots, ferry operators and
fishermen along the whole coast.
.PP
The second paragraph of the introduction says who reads the manual: the duty officers of the control
tower, the pilots who bring the deep-draught vessels through the channel and the engineers who maintain
the lock gates.
.bp
.NH
Measuring the tides
.PP
The gauge at Port Ellen records a mean spring range of 4.7 metres, the largest on the estuary; the
neap range there is 2.1 metres. The gauge is a radar sensor fixed above the water on the north pier,
sampled once a minute and checked against the tide staff every week.
.NH 2
Calibration
.PP
Twice a year the surveyors level the gauge datum against the benchmark on the harbour wall, and any
difference larger than five millimetres is corrected before the next prediction run.
.bp
.NH
Safety
.PP
Never rely on the predictions alone in a storm surge: the observed level can exceed the predicted high
water by more than a metre, and the flood warning service issues its own bulletins.
"""


def groff_manual(out: Path) -> None:
    """The manual typeset by groff (its own justification and hyphenation), as a PDF."""
    pdf = subprocess.run(["groff", "-ms", "-Tpdf", "-P-pa4"], input=MANUAL_MS.encode(), capture_output=True,
                         check=True).stdout
    out.write_bytes(pdf)


def reportlab_hyphenated(out: Path) -> None:
    """Two pages drawn line by line with reportlab: a heading, a paragraph whose line ends with a hyphen
    ("predic-" / "tions"), a blank gap, a second paragraph."""
    pdf = canvas.Canvas(str(out), pagesize=A4)
    pages = [
        ["Chapter One", "", "The harbour master publishes the predic-", "tions every spring, for pilots", "and ferries.",
         "", "A second paragraph starts here and", "ends on this line."],
        ["Chapter Two", "", "The lock gates open two hours before", "high water."],
    ]
    for lines in pages:
        y = 780
        for line in lines:
            pdf.setFont("Helvetica-Bold" if line.startswith("Chapter") else "Helvetica", 12)
            if line:
                pdf.drawString(72, y, line)
            y -= 16
        pdf.showPage()
    pdf.save()


def image_only(out: Path) -> None:
    """A "scanned" page: a raster image and no text layer."""
    image = Image.new("L", (600, 200), 255)
    ImageDraw.Draw(image).text((20, 80), "a scanned page: pixels only", fill=0)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    pdf = canvas.Canvas(str(out), pagesize=A4)
    pdf.drawImage(ImageReader(io.BytesIO(buffer.getvalue())), 72, 500, width=450, height=150)
    pdf.showPage()
    pdf.save()


def encrypted(source: Path, out: Path) -> None:
    """``source`` encrypted with a user password (pypdf, RC4-128: no cryptography package needed)."""
    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password="tide", owner_password="tide-owner", algorithm="RC4-128")
    with out.open("wb") as handle:
        writer.write(handle)


def truncated(source: Path, out: Path) -> None:
    """The first third of ``source``: a download cut short."""
    data = source.read_bytes()
    out.write_bytes(data[: len(data) // 3])


def word_document(out: Path) -> None:
    """A .docx with a title, headings on two levels, paragraphs and a table (python-docx)."""
    document = docx.Document()
    document.add_heading("Ferry Operations Handbook", level=0)
    document.add_heading("Timetables", level=1)
    document.add_paragraph("The winter timetable starts on the first Monday of November.")
    document.add_heading("Night sailings", level=2)
    document.add_paragraph("Night sailings need two certified deck officers on the bridge.")
    document.add_heading("Fares", level=1)
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(table.rows, [("Ticket", "Price"), ("Foot passenger", "4.50"), ("Car and driver", "21.00")],
                          strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.add_paragraph("Children under five travel free.")
    document.save(str(out))


def main() -> None:
    HERE.mkdir(exist_ok=True)
    groff_manual(HERE / "manual.pdf")
    reportlab_hyphenated(HERE / "hyphenated.pdf")
    image_only(HERE / "scanned.pdf")
    encrypted(HERE / "manual.pdf", HERE / "encrypted.pdf")
    truncated(HERE / "manual.pdf", HERE / "truncated.pdf")
    word_document(HERE / "handbook.docx")
    truncated(HERE / "handbook.docx", HERE / "truncated.docx")
    print("wrote", ", ".join(sorted(p.name for p in HERE.iterdir())))


if __name__ == "__main__":
    main()
