"""Seconds spent reading vs embedding when ``longembed index`` builds an index of real PDFs and HTML pages.

Makes the folder first (issue 52, point 5): Paul Graham's essays typeset by ``groff -ms -Tpdf``, QMSum
meeting transcripts drawn by reportlab (a heading per meeting, a paragraph per turn), and Debian's HTML
manuals from /usr/share/doc (copied as they are).  Then reads the folder as ``longembed index`` does
(:func:`longembed.search.sources.gather_sources`) and builds the index from what it read at the default
strategy (``longembed index``'s defaults): reading seconds, build seconds (embedding and writing), and
reading's share.  Run: ``python benchmarks/document_reading/document_reading.py --out /tmp/document-reading``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path
from xml.sax.saxutils import escape

from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import Paragraph, SimpleDocTemplate

from longembed.cli.index import chosen_strategy
from longembed.cli.main import build_parser
from longembed.documents import read_document
from longembed.search.build import build_index
from longembed.search.sources import SourceOptions, gather_sources

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
ESSAYS = DATA / "paul_graham_essays" / "PaulGrahamEssays"
MEETINGS = DATA / "qmsum" / "data" / "ALL" / "train"
DEBIAN_HTML = Path("/usr/share/doc")


def groff_essay(essay: Path, out: Path) -> None:
    """An essay as a groff -ms PDF: its title, then a justified (hyphenated) paragraph per paragraph."""
    paragraphs = [" ".join(p.split()) for p in essay.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    lines = [".TL", essay.stem.replace("_", " "), ""]
    for paragraph in paragraphs:
        safe = paragraph.replace("\\", "\\\\")
        lines += [".PP", ("\\&" + safe) if safe[:1] in ".'" else safe]
    pdf = subprocess.run(["groff", "-ms", "-Tpdf", "-P-pa4", "-Kutf8"], input="\n".join(lines).encode(),
                         capture_output=True, check=True).stdout
    out.write_bytes(pdf)


def reportlab_meeting(meeting: Path, out: Path) -> None:
    """A QMSum meeting as a reportlab PDF: a heading, then a paragraph per turn (speaker: words)."""
    turns = json.loads(meeting.read_text(encoding="utf-8"))["meeting_transcripts"]
    styles = getSampleStyleSheet()
    story = [Paragraph(f"Meeting {meeting.stem}", styles["Heading1"])]
    story += [Paragraph(f"<b>{escape(t['speaker'])}</b>: {escape(t['content'])}", styles["BodyText"]) for t in turns]
    SimpleDocTemplate(str(out), pagesize=A4).build(story)


def make_folder(out: Path, pdfs: int, pages: int) -> Path:
    """``out/docs``: ``pdfs`` PDFs (the essays by groff, then meetings by reportlab) and ``pages`` HTML
    pages of Debian's manuals (in path order, over 4 kB)."""
    docs = out / "docs"
    if docs.exists():
        shutil.rmtree(docs)
    (docs / "essays").mkdir(parents=True)
    (docs / "meetings").mkdir()
    (docs / "manuals").mkdir()
    essays = sorted(ESSAYS.glob("*.txt"))[:pdfs]
    for essay in essays:
        groff_essay(essay, docs / "essays" / f"{essay.stem}.pdf")
    for meeting in sorted(MEETINGS.glob("*.json"))[: pdfs - len(essays)]:
        reportlab_meeting(meeting, docs / "meetings" / f"{meeting.stem}.pdf")
    html = [p for p in sorted(DEBIAN_HTML.rglob("*.html")) if p.stat().st_size > 4096][:pages]
    for number, page in enumerate(html):
        shutil.copy(page, docs / "manuals" / f"{number:03d}-{page.parent.name}-{page.name}")
    return docs


def reading_seconds_by_type(files: list[Path]) -> dict[str, float]:
    """Seconds :func:`read_document` takes over the files of each suffix (the slowest file named)."""
    seconds: dict[str, float] = {}
    slowest = (0.0, "")
    for file in files:
        started = time.perf_counter()
        read_document(file)
        took = time.perf_counter() - started
        seconds[file.suffix] = seconds.get(file.suffix, 0.0) + took
        slowest = max(slowest, (took, file.name))
    print(f"slowest file: {slowest[1]} ({slowest[0]:.2f} s)")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where the documents and the index go")
    parser.add_argument("--pdfs", type=int, default=150, help="PDFs to make (default 150: 49 essays, 101 meetings)")
    parser.add_argument("--html", type=int, default=150, help="Debian HTML pages to copy (default 150)")
    parser.add_argument("--reuse", action="store_true", help="keep out/docs as it is (made by an earlier run)")
    options = parser.parse_args()
    docs = options.out / "docs"
    if not options.reuse:
        started = time.perf_counter()
        docs = make_folder(options.out, options.pdfs, options.html)
        print(f"made {docs} in {time.perf_counter() - started:.1f} s")
    files = [p for p in docs.rglob("*") if p.is_file()]
    megabytes = sum(p.stat().st_size for p in files) / 1e6
    index = options.out / "index"
    if index.exists():
        shutil.rmtree(index)
    args = build_parser().parse_args(["index", str(docs), "--index", str(index)])
    name, strategy = chosen_strategy(args)

    started = time.perf_counter()
    reading = gather_sources([docs], SourceOptions())
    read_seconds = time.perf_counter() - started
    started = time.perf_counter()
    report = build_index(index, reading.documents, strategy, name=name)
    build_seconds = time.perf_counter() - started

    characters = sum(len(d.text) for d in reading.documents)
    by_type = {s: sum(p.suffix == s for p in files) for s in sorted({p.suffix for p in files})}
    total = read_seconds + build_seconds
    print(f"{len(files)} files ({by_type}, {megabytes:.1f} MB), {len(reading.documents)} documents read, "
          f"{len(reading.failed)} failed, {characters:,} characters")
    for failure in reading.failed:
        print(f"  could not read: {failure.reason}")
    print(f"strategy {name}: {report.summary()}")
    print("reading again, by type: " + ", ".join(f"{suffix} {seconds:.1f} s" for suffix, seconds in
                                                 reading_seconds_by_type(files).items()))
    print(f"reading {read_seconds:.1f} s, building (embedding and writing) {build_seconds:.1f} s: "
          f"reading is {100 * read_seconds / total:.1f}% of {total:.1f} s")


if __name__ == "__main__":
    main()
