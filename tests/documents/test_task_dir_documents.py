"""``task-dir --docs`` on a folder of PDFs, HTML pages, a Word file and Markdown (the committed fixtures):
the task holds what the readers read, ``eval`` finds each question's document, ``advise`` runs on it;
a folder holding a damaged, encrypted or scanned file is refused, each named with its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.results import Advice, RunResults
from longembed.tasks.task_dir import read_corpus

FIXTURES = Path(__file__).resolve().parent / "fixtures"
READABLE = ("manual.pdf", "hyphenated.pdf", "handbook.docx", "docs-page.html", "texinfo-page.html")
QUESTIONS = [
    {"question": "What is the mean spring range measured by the gauge at Port Ellen?", "document": "manual.pdf"},
    {"question": "How many certified deck officers do night sailings need?", "document": "office/handbook.docx"},
    {"question": "How long before high water do the lock gates open?", "document": "hyphenated.pdf"},
]


def documents_folder(root: Path, extra: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A folder of the readable fixtures (the .docx in a subfolder), a Markdown note and ``extra``
    fixtures, and a questions file about them."""
    docs = root / "docs"
    (docs / "office").mkdir(parents=True)
    for name in (*READABLE, *extra):
        shutil.copy(FIXTURES / name, docs / ("office" if name.endswith(".docx") else "") / name)
    (docs / "notes.md").write_text("# Canteen\n\nThe ferry canteen sells tea, soup and sandwiches.\n")
    questions = root / "questions.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in QUESTIONS))
    return docs, questions


def build_task(root: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    docs, questions = documents_folder(root)
    task = root / "task"
    assert main(["task-dir", "--docs", str(docs), "--questions", str(questions), "--out", str(task)]) == 0
    assert f"wrote {task}: 6 documents (3 named by no question), 3 questions, 3 judgements" in capsys.readouterr().out
    return task


def test_task_dir_reads_pdf_html_and_word_files_into_the_corpus(tmp_path: Path, capsys) -> None:
    corpus = read_corpus(build_task(tmp_path, capsys) / "corpus.jsonl")
    assert sorted(corpus) == ["docs-page.html", "hyphenated.pdf", "manual.pdf", "notes.md", "office/handbook.docx",
                              "texinfo-page.html"]
    # the readers' text, not the files' bytes: a PDF's pages as paragraphs, a Word file's table, a page's headings
    assert "mean spring range of 4.7 metres" in corpus["manual.pdf"] and "%PDF" not in corpus["manual.pdf"]
    assert "publishes the predictions every spring" in corpus["hyphenated.pdf"]
    assert "Car and driver | 21.00" in corpus["office/handbook.docx"]
    assert "<div" not in corpus["docs-page.html"] and "Getting started" in corpus["docs-page.html"]


def test_task_dir_refuses_a_folder_with_unreadable_documents_naming_each(tmp_path: Path, capsys) -> None:
    docs, questions = documents_folder(tmp_path, extra=("encrypted.pdf", "scanned.pdf", "truncated.pdf"))
    assert main(["task-dir", "--docs", str(docs), "--questions", str(questions), "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert f"{docs / 'encrypted.pdf'}: encrypted (it needs a password)" in err
    assert f"{docs / 'scanned.pdf'}: no text layer" in err and "OCR is not supported" in err
    assert f"{docs / 'truncated.pdf'}: not a readable PDF (damaged or cut short" in err
    assert not (tmp_path / "t").exists()


@pytest.mark.slow
def test_eval_finds_each_questions_document_in_the_task_made_from_pdfs(tmp_path: Path, capsys) -> None:
    task = build_task(tmp_path, capsys)
    run = tmp_path / "run"
    assert main(["eval", "--model", "default", "--max-length", "128", "--task-dir", str(task), "--output", str(run),
                 "--cache-dir", str(tmp_path / "cache"), "--no-estimate"]) == 0
    result = RunResults.load(run).tasks["task"]
    assert result.first_ranked == {f"q{i}": row["document"] for i, row in enumerate(QUESTIONS, start=1)}


@pytest.mark.slow
def test_advise_runs_on_the_task_made_from_pdfs(tiny_models: dict[str, Path], tmp_path: Path, capsys) -> None:
    task = build_task(tmp_path, capsys)
    out = tmp_path / "advice"
    assert main(["advise", "--model", str(tiny_models["nomic"]), "--max-length", "64", "--task-dir", str(task),
                 "--chunking", "tokens:16", "--output", str(out), "--cache-dir", str(tmp_path / "cache"),
                 "--latency-queries", "2"]) == 0
    advice = Advice.load(out)
    assert advice.tasks == ["task"] and advice.sampling is None
    assert {"bm25", "truncate", "late-chunks"} <= {s.name for s in advice.strategies}
    assert advice.recommendation.choice in (out / "advice.md").read_text()
    assert RunResults.load(out / "runs" / "bm25").tasks["task"].first_ranked["q1"] == "manual.pdf"
