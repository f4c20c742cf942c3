"""A 50 MB PDF made by reportlab (400 pages of text, each with a photo-sized image) is read page by page
and indexed in memory bounded by a few times the file, and a late page's text is located on that page.

Made here, not committed: reportlab draws each page's lines (a phrase only that page holds) and a
random-noise image (incompressible, so the file is as big as a scanned report with a text layer).  The
index runs in a subprocess that reports its peak resident memory (``resource.getrusage``).  The safety
branch's size limit (a chunked strategy refuses a document over 4 MiB of text) does not apply: the
text here is under 1 MiB, as in most big PDFs, whose bytes are images and fonts.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

from longembed.documents import location_of, read_document

pytestmark = pytest.mark.slow  # 50 MB made and read, and two subprocesses

MIB = 2**20
PAGES = 400
LATE_PAGE = 387

RUN_AND_MEASURE = """
import json, resource, sys, warnings
warnings.simplefilter("ignore")
from longembed.cli.main import main
status = main(sys.argv[1:])
print(json.dumps({"status": status, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
BASELINE = """
import json, resource
import longembed.cli.main, longembed.search.build, longembed.documents, lancedb, pypdfium2
print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def phrase(page: int) -> str:
    return f"The inspection log of berth {page} records the crane number {page * 7} as serviced."


def make_big_pdf(out: Path) -> None:
    """:data:`PAGES` pages: a heading, 30 lines of text with :func:`phrase` of the page, and a 128 KiB
    noise image each."""
    noise = random.Random(52)
    pdf = canvas.Canvas(str(out), pagesize=(595, 842))
    for page in range(1, PAGES + 1):
        pdf.setFont("Helvetica-Bold", 14)
        pdf.drawString(72, 790, f"Section {page}")
        pdf.setFont("Helvetica", 10)
        y = 770
        for line in range(30):
            pdf.drawString(72, y, phrase(page) if line == 15 else f"Line {line} of page {page}: tide, berth and crane.")
            y -= 13
        image = Image.frombytes("RGB", (209, 209), noise.randbytes(209 * 209 * 3))
        pdf.drawImage(ImageReader(image), 72, 72, width=300, height=300)
        pdf.showPage()
    pdf.save()


@pytest.fixture(scope="module")
def big_pdf(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("big-pdf") / "docs"
    folder.mkdir()
    make_big_pdf(folder / "report.pdf")
    return folder / "report.pdf"


def test_a_50_mb_pdf_is_read_page_by_page_and_a_late_page_is_located(big_pdf: Path) -> None:
    assert big_pdf.stat().st_size > 50 * MIB
    document = read_document(big_pdf)
    assert [m.page for m in document.locations] == list(range(1, PAGES + 1))
    start = document.text.index(phrase(LATE_PAGE))
    assert location_of(document.locations, start, start + len(phrase(LATE_PAGE))) == (f"page {LATE_PAGE}", LATE_PAGE)
    assert document.text.count("Line 29 of page") == PAGES  # nothing dropped
    assert len(document.text) < MIB


def test_a_50_mb_pdf_is_indexed_in_bounded_memory(big_pdf: Path, tmp_path: Path) -> None:
    size = big_pdf.stat().st_size
    base = json.loads(subprocess.run([sys.executable, "-c", BASELINE], capture_output=True, text=True,
                                     check=True).stdout)["peak"]
    index = tmp_path / "index"
    done = subprocess.run([sys.executable, "-c", RUN_AND_MEASURE, "index", str(big_pdf.parent), "--index", str(index),
                           "--model", "bm25"], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["status"] == 0
    print(f"peak {measured['peak'] / MIB:.0f} MiB, baseline {base / MIB:.0f} MiB, file {size / MIB:.0f} MiB")
    assert measured["peak"] - base < 2 * size, (measured, base, size)
    shown = subprocess.run([sys.executable, "-m", "longembed.cli.main", "index", "--index", str(index), "--show-text",
                            "report.pdf"], capture_output=True, text=True, timeout=300, check=True).stdout
    assert phrase(LATE_PAGE) in shown and shown.rstrip("\n") == read_document(big_pdf).text
