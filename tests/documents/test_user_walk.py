"""Issue 52's "Done when", walked as a new user would, with the packaged default model and no flags: a
folder mixing PDF, HTML, Word, Markdown and text is indexed whole and searched; ``task-dir --docs`` and
``advise`` run on it; bad files are each reported with their reason, and fixing one embeds only it.
(The page is walked in test_search_page_locations.py.)
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from longembed.cli.main import main

pytestmark = pytest.mark.slow  # the real all-MiniLM-L6-v2 (the packaged default), and advise's runs

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QUESTION = "What is the mean spring range at Port Ellen?"  # answered on page 2 of manual.pdf
ANSWER = "The gauge at Port Ellen records a mean spring range of 4.7 metres"
RECIPES = """# Kitchen recipes

## Breads

### Sourdough

Feed the starter twice a day with equal weights of rye flour and water. The dough rests for fourteen hours
in the cold room before it is shaped and baked at 250 degrees.

## Soups

### Lentil soup

Red lentils cook in twenty minutes; add cumin and lemon at the end.
"""
NOTES = ("Meeting notes from the planning session.\n\nThe lighthouse keeper reported that the fog horn at "
         "Ardmore failed on the night of the storm and was repaired by the electricians the following Tuesday.\n")
QUESTIONS = [("What is the mean spring range at Port Ellen?", "manual.pdf"),
             ("How many deck officers does a night sailing need?", "handbook.docx"),
             ("How long does the sourdough rest in the cold room?", "recipes.md"),
             ("Which fog horn failed during the storm?", "notes.txt")]
#: the bad files and the reason each is listed with
BAD = {"encrypted.pdf": "encrypted (it needs a password)", "scanned.pdf": "no text layer",
       "truncated.pdf": "not a readable PDF", "latin1.txt": "not UTF-8 text"}


def run(*argv: str) -> tuple[int, str]:
    """``longembed ARGV`` in this process: (exit code, what it printed on stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def mixed_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("manual.pdf", "handbook.docx", "docs-page.html"):
        shutil.copy(FIXTURES / name, folder / name)
    (folder / "recipes.md").write_text(RECIPES, encoding="utf-8")
    (folder / "notes.txt").write_text(NOTES, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> tuple[Path, Path, str]:
    """(docs, index, what ``longembed index docs --index index`` printed)."""
    root = tmp_path_factory.mktemp("walk")
    docs, index = mixed_folder(root / "docs"), root / "index"
    code, printed = run("index", str(docs), "--index", str(index))
    assert code == 0, printed
    return docs, index, printed


def test_index_reads_every_format_and_search_finds_the_pdf_page(walked) -> None:
    docs, index, printed = walked
    assert "5 added, 0 changed, 0 removed, 0 unchanged; the index holds 5 documents" in printed
    assert json.loads((index / "reading-report.json").read_text()) == {"failed": [], "skipped": {}}
    code, text = run("search", "--index", str(index), QUESTION, "-k", "3")
    assert code == 0 and text.splitlines()[1].split()[:2] == ["1.", "manual.pdf"], text
    code, answer = run("search", "--index", str(index), QUESTION, "-k", "3", "--json")
    top = json.loads(answer)["results"][0]
    assert code == 0 and top["id"] == "manual.pdf" and ANSWER in top["passage"]["text"]
    assert top["passage"]["location"].startswith("page") and top["passage"]["page"] is not None
    headings = {r["id"]: r["passage"]["location"] for r in json.loads(answer)["results"]}
    assert all(headings[d].startswith(("Ferry Operations Handbook", "Kitchen recipes", "Getting started"))
               for d in headings if d != "manual.pdf" and d != "notes.txt")


def test_search_says_page_2_beside_the_passage(walked) -> None:
    _, index, _ = walked
    code, text = run("search", "--index", str(index), QUESTION, "-k", "1")
    assert code == 0 and "[page 2, characters " in text, text
    code, answer = run("search", "--index", str(index), QUESTION, "-k", "1", "--json")
    passage = json.loads(answer)["results"][0]["passage"]
    assert (passage["location"], passage["page"]) == ("page 2", 2)


def test_task_dir_and_advise_run_on_the_folder(walked, tmp_path: Path) -> None:
    docs, _, _ = walked
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": q, "document": d}) + "\n" for q, d in QUESTIONS))
    code, printed = run("task-dir", "--docs", str(docs), "--questions", str(questions), "--out", str(tmp_path / "task"))
    assert code == 0 and "5 documents (1 named by no question), 4 questions, 4 judgements" in printed, printed
    corpus = [json.loads(line) for line in (tmp_path / "task" / "corpus.jsonl").read_text().splitlines()]
    manual = next(d for d in corpus if d["_id"] == "manual.pdf")
    assert ANSWER in manual["text"]  # the PDF's text, as the index reads it
    code, printed = run("advise", "--model", "default", "--task-dir", str(tmp_path / "task"),
                        "--output", str(tmp_path / "advice"))
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    measured = [strategy["name"] for strategy in advice["strategies"]]
    assert code == 0 and len(measured) >= 5 and advice["recommended"] in measured, printed
    assert f"use {advice['recommended']}:" in printed and "ndcg@10" in printed


def test_bad_files_are_reported_and_a_fixed_one_alone_is_embedded(walked, tmp_path: Path) -> None:
    docs, index, _ = walked
    docs, index = Path(shutil.copytree(docs, tmp_path / "docs")), Path(shutil.copytree(index, tmp_path / "index"))
    for name in ("encrypted.pdf", "scanned.pdf", "truncated.pdf"):
        shutil.copy(FIXTURES / name, docs / name)
    (docs / "latin1.txt").write_bytes("Café crème: the harbour café opens at six.\n".encode("latin-1"))
    code, printed = run("index", str(docs), "--index", str(index))
    assert code == 3, printed  # documented: some files could not be read
    assert "0 added, 0 changed, 0 removed, 5 unchanged" in printed and "could not read 4 file(s)" in printed
    report = {f["id"]: f["reason"] for f in json.loads((index / "reading-report.json").read_text())["failed"]}
    assert set(report) == set(BAD) and all(BAD[name] in report[name] for name in BAD), report
    assert all(f"docs/{name}" in printed and BAD[name] in printed for name in BAD), printed  # name, then why
    (docs / "latin1.txt").write_text("Café crème: the harbour café opens at six.\n", encoding="utf-8")  # fixed
    code, printed = run("index", str(docs), "--index", str(index))
    assert code == 3 and "could not read 3 file(s)" in printed and "latin1.txt" not in printed.split("could not")[1]
    assert "1 added, 0 changed, 0 removed, 5 unchanged; 1 documents to embed" in printed, printed
    assert "the index holds 6 documents" in printed
