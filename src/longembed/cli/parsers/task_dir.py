"""The flags of ``longembed task-dir`` (the command itself: :mod:`longembed.cli.task_dir`).

Only light imports here: ``longembed task-dir --help`` imports neither numpy nor torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler

DESCRIPTION = """\
Build a retrieval task folder (BEIR's layout: corpus.jsonl, queries.jsonl, qrels/test.tsv) from a folder
of documents and a file of questions, for `longembed eval --task-dir OUT` and `longembed advise --task-dir OUT`.

Documents: every file under --docs (recursively) that matches a --glob (default: every .txt, .md, .rst, .pdf,
.html and .docx file) is one document; its id is its path relative to --docs (e.g. notes/a.txt), its text
what longembed's readers take from it (a PDF's pages, an HTML page's main text, ...).
Files and folders whose name starts with '.' are skipped. Every document is in the corpus, whether or not a
question names it (the others are distractors).

Questions, one per row, each judged relevant to the document(s) it names (ids as above):
  .jsonl  {"question": "...", "document": "notes/a.txt"}
          {"question": "...", "documents": ["notes/a.txt", "b.md"]}   (several relevant documents)
  .tsv / .csv  a header line with the columns 'question' and 'document'; several documents in one cell
          separated by '|'.
'query' and 'text' are accepted for 'question', so a BEIR queries.jsonl (_id, text) with a 'document' field
added is a questions file. An optional 'id' (or '_id') field or column is the query id (default: q1, q2, ...
in file order); other fields (e.g. 'kind', 'evidence') are ignored. A document may be named without its
extension (notes/a for notes/a.txt) when only one file fits. A file with no document field at all (a BEIR
queries.jsonl or corpus.jsonl, qrels) is one error saying what was expected and what it looks like.

Where the answer is (optional, per question; then eval and advise report passage hit@1 on the task):
'answer' (a quote of the document), 'answer_start' (the character offset where it begins in the document's
text as longembed reads it: for a PDF, HTML or Word file, the extracted text) and 'answer_end' (the offset
after it, for a span without a quote). A quote must be in the document exactly or with whitespace
normalised: at answer_start when given, else once. The spans are written as OUT/answers.jsonl.

Every problem is reported at once by file and line, and nothing is written: a question naming a document
that is not in --docs, an empty question, a question given twice (equal up to case and spacing; give it once
with all its documents) or a document named twice for one question, an answer quote or offset that does not
fit its document, a document that cannot be read, is not UTF-8 or is empty. Exit status 2 then. The folder is written to a temporary folder beside OUT and renamed
into place."""


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``task-dir`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "task-dir",
        help="build a task folder (BEIR layout) from your documents and questions",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--docs", type=Path, required=True, metavar="DIR",
                        help="folder of documents, read recursively (one file = one document)")
    parser.add_argument("--questions", type=Path, required=True, metavar="FILE",
                        help="questions and the documents that answer them: .jsonl, .tsv or .csv (see above)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="the task folder to write (must not exist or be empty, unless --overwrite)")
    parser.add_argument("--glob", action="append", default=None, metavar="PATTERN", dest="globs",
                        help="which files under --docs are documents, relative to it (repeatable; default: "
                        "every document file longembed reads (.txt, .md, .rst, .pdf, .html, .docx); e.g. --glob '*.txt' for the "
                        "top folder only)")
    parser.add_argument("--merge-judged", action="append", type=Path, default=None, metavar="DIR",
                        help="a task folder written by 'longembed judge' on the same --docs (repeatable): its "
                        "questions and graded judgments (2/1/0) are merged in; a question in both gets both "
                        "judgments (where the questions file names a document the page graded lower, the file's "
                        "'relevant' is kept and said)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing task folder at --out (a folder holding other files is refused)")
    parser.set_defaults(func=CommandHandler("longembed.cli.task_dir", "run"))
