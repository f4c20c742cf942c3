"""The readers on real files made by real tools (groff, reportlab, pypdf, python-docx, mkdocs, Texinfo):
the text a person reads in them, and where each part of it is (page, heading path)."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from longembed.documents import DocumentReadError, location_of, read_document
from longembed.locations import Location

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def located(name: str, phrase: str) -> tuple[str | None, int | None]:
    """(location, page) of ``phrase`` in the fixture ``name`` as read."""
    document = read_document(FIXTURES / name)
    start = document.text.index(phrase)
    return location_of(document.locations, start, start + len(phrase))


def test_a_groff_pdf_reads_as_paragraphs_page_by_page() -> None:
    document = read_document(FIXTURES / "manual.pdf")
    assert [m.page for m in document.locations] == [1, 2, 3]
    text = document.text
    # groff hyphenated "es-tuary" at a line end: joined; the lines of a paragraph joined by a space
    assert "the tides of the estuary. Every spring" in text and "es-" not in text and "\ufffe" not in text
    assert "computed from the harmonic constituents" in text
    # paragraph breaks stay: the two paragraphs of the introduction, the heading before them
    assert "1. Introduction\n\nThis manual explains" in text
    assert "along the whole coast.\n\nThe second paragraph" in text
    assert "2.1. Calibration\n\nTwice a year" in text
    assert located("manual.pdf", "mean spring range of 4.7 metres") == ("page 2", 2)
    # groff's page numbers at the top of pages 2 and 3 ("-2-", "-3-") are not text; a page opens with its heading
    assert "-2-" not in text and "-3-" not in text
    assert text[document.locations[1].start :].startswith("2. Measuring the tides\n\nThe gauge at Port Ellen")
    assert text[document.locations[2].start :].startswith("3. Safety\n\nNever rely")
    assert located("manual.pdf", "flood warning service") == ("page 3", 3)


def test_a_reportlab_pdf_joins_its_hyphenated_line_and_keeps_its_paragraphs() -> None:
    document = read_document(FIXTURES / "hyphenated.pdf")
    assert document.text == (
        "Chapter One\n\nThe harbour master publishes the predictions every spring, for pilots and ferries.\n\n"
        "A second paragraph starts here and ends on this line.\n\nChapter Two\n\n"
        "The lock gates open two hours before high water."
    )
    assert document.locations == (Location(0, page=1), Location(document.text.index("Chapter Two"), page=2))


@pytest.mark.parametrize(("name", "reason"), [
    ("encrypted.pdf", r"encrypted \(it needs a password\)"),
    ("scanned.pdf", r"no text layer \(a scanned or image-only PDF, 1 page\); OCR is not supported"),
    ("truncated.pdf", r"not a readable PDF \(damaged or cut short"),
    ("truncated.docx", r"not a readable Word \(\.docx\) file"),
])
def test_a_file_that_cannot_be_read_is_an_error_naming_it_and_why(name: str, reason: str) -> None:
    with pytest.raises(DocumentReadError, match=rf"^{FIXTURES / name}: {reason}"):
        read_document(FIXTURES / name)


def test_a_word_file_gives_paragraphs_headings_and_tables_under_their_heading_path() -> None:
    document = read_document(FIXTURES / "handbook.docx")
    assert document.text == (
        "Ferry Operations Handbook\n\nTimetables\n\nThe winter timetable starts on the first Monday of November.\n\n"
        "Night sailings\n\nNight sailings need two certified deck officers on the bridge.\n\nFares\n\n"
        "Ticket | Price\nFoot passenger | 4.50\nCar and driver | 21.00\n\nChildren under five travel free."
    )
    assert located("handbook.docx", "two certified deck officers") == (
        "Ferry Operations Handbook > Timetables > Night sailings", None)
    assert located("handbook.docx", "Car and driver | 21.00") == ("Ferry Operations Handbook > Fares", None)


def test_an_html_page_keeps_its_headings_and_drops_its_navigation() -> None:
    document = read_document(FIXTURES / "docs-page.html")
    text = document.text
    assert text.index("Getting started") < 40 and "Table of contents" not in text  # the nav and the toc: gone
    assert "¶" not in text and "Initializing search" not in text  # permalinks and the header: gone
    assert "\n\n\n" not in text and "  " not in text
    assert located("docs-page.html", "From a clone of the repository") == ("Getting started > Install", None)
    sections = [m.section for m in document.locations]
    assert sections == ["Getting started", "Getting started > Install", "Getting started > Models",
                        "Getting started > Run the tests", "Getting started > First steps in Python"]
    for mark in document.locations:  # each mark sits on its heading
        assert text[mark.start :].startswith(mark.section.split(" > ")[-1])


def test_a_texinfo_page_keeps_the_headings_a_main_text_extractor_drops() -> None:
    document = read_document(FIXTURES / "texinfo-page.html")
    title = "Arrays Unions Enums (libffi: the portable foreign function interface library)"
    assert document.text.startswith(title + "\n\n")  # no <h1>: the <title> heads the text and the paths
    assert located("texinfo-page.html", "A union can also be emulated") == (
        f"{title} > 2.3.4.2 Unions", None)  # Texinfo makes both 2.3.4 and 2.3.4.2 an <h4>: siblings


def test_markdown_headings_give_the_path_and_code_blocks_do_not(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("# Install\n\nPip it.\n\n```sh\n# not a heading\n```\n\n## Configuration\n\nSet it.\n\n"
                    "Usage\n=====\n\nRun it.\n")
    document = read_document(path)
    assert document.text == path.read_text()
    assert [m.section for m in document.locations] == ["Install", "Install > Configuration", "Usage"]
    assert location_of(document.locations, document.text.index("Set it"), len(document.text))[0] == \
        "Install > Configuration"


@pytest.mark.parametrize("encoded", [
    "naïve café\n".encode(), codecs.BOM_UTF8 + "naïve café\n".encode(),
    codecs.BOM_UTF16_LE + "naïve café\n".encode("utf-16-le"), codecs.BOM_UTF16_BE + "naïve café\n".encode("utf-16-be"),
])
def test_utf8_with_or_without_bom_and_utf16_with_bom_read_alike(tmp_path: Path, encoded: bytes) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(encoded)
    assert read_document(path).text == "naïve café\n"


@pytest.mark.parametrize(("encoded", "reason"), [
    ("first\ncafé\n".encode("latin-1"), r":2: not UTF-8 text \(byte 0xe9"),
    ("cafe\n".encode("utf-16-le"), r": holds NUL bytes \(UTF-16 without a byte-order mark"),
    (codecs.BOM_UTF32_LE + "café".encode("utf-32-le"), r": UTF-32 text"),
    (b"   \n\n", r": the document is empty"),
])
def test_other_encodings_are_an_error_naming_the_file_not_mojibake(tmp_path: Path, encoded: bytes, reason: str) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(encoded)
    with pytest.raises(DocumentReadError, match=rf"^{path}{reason}"):
        read_document(path)


def test_a_span_over_several_pages_names_them_all() -> None:
    marks = (Location(0, page=1), Location(100, page=2), Location(200, page=4))
    assert location_of(marks, 10, 90) == ("page 1", 1)
    assert location_of(marks, 90, 150) == ("pages 1-2", 1)
    assert location_of(marks, 150, 250) == ("pages 2-4", 2)
    assert location_of(marks, 100, 200) == ("page 2", 2)  # ends where page 4 starts: not on it
    assert location_of((), 0, 10) == (None, None)
    assert location_of((Location(50, section="Intro"),), 0, 10) == (None, None)  # before the first heading


def test_an_html_page_in_its_declared_charset_reads_and_an_undeclared_one_is_an_error(tmp_path: Path) -> None:
    xhtml = tmp_path / "ref.html"  # as Debian's expat and libxslt manuals are saved: XML declaration, Latin-1
    xhtml.write_bytes('<?xml version="1.0" encoding="iso-8859-1"?>\n<html><head><title>Ref</title></head>'
                      "<body><h1>Caf\u00e9</h1><p>Cr\u00e8me br\u00fbl\u00e9e.</p></body></html>".encode("latin-1"))
    document = read_document(xhtml)
    assert document.text == "Caf\u00e9\n\nCr\u00e8me br\u00fbl\u00e9e." and document.locations[0].section == "Caf\u00e9"
    undeclared = tmp_path / "old.html"
    undeclared.write_bytes("<html><body><p>Caf\u00e9</p></body></html>".encode("latin-1"))
    with pytest.raises(DocumentReadError, match=rf"^{undeclared}:1: not UTF-8 text \(byte 0xe9"):
        read_document(undeclared)
