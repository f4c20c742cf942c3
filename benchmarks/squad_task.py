"""The SQuAD haystack with SQuAD's own questions (issue 54 item 2): each SQuAD 2.0 dev article is one long
document, a haystack of its paragraphs, and each answerable question names it with its answer located,
so ``longembed eval --task-dir`` and ``longembed advise --task-dir`` report passage hit@1 on it.

A document is the article's paragraphs (SQuAD's ``context``, unchanged) joined by a blank line, about
4,400 words; its file is ``<title>.txt``.  A question's answer is SQuAD's first answer: its text is the
quote (``answer``) and its offset in the document, the paragraph's offset plus SQuAD's ``answer_start``, is
``answer_start``, so ``longembed task-dir`` checks the quote is there and pins it when it occurs twice.  A
question asked twice (the same text up to case and spacing: ``task-dir`` takes each once) keeps its first
place; the others are counted, not written.  The inputs are written to ``OUT/docs`` and
``OUT/questions.jsonl`` and built with ``longembed task-dir``'s Python API into ``OUT/task``.

    python benchmarks/squad_task.py [--data ../shared/data/squad/dev-v2.0.json] [--articles 35] \\
        [--questions-per-article 20] [--seed 0] --out runs/squad-task
    longembed eval --task-dir runs/squad-task/task --model default --chunking tokens:256 --output runs/squad-eval

SQuAD is the project's training data (``training/data.py``; ``../shared/data/README.md``): a model tuned by
``longembed train`` on it must not be scored here.  all-MiniLM-L6-v2's own training data include SQuAD
pairs too, so its nDCG here is not a held-out number; the passage choice inside a document is what this task
is for.  Not committed (the data are not ours to copy): rebuild it from the data.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.tasks.task_dir_builder import build_task_dir

REPO = Path(__file__).resolve().parents[1]
#: $LONGEMBED_DATA_DIR/squad/dev-v2.0.json, else ../shared/data/squad/dev-v2.0.json beside the repository
DEFAULT_DATA = (Path(os.environ.get("LONGEMBED_DATA_DIR") or REPO.parent / "shared" / "data")
                / "squad" / "dev-v2.0.json")
PARAGRAPH_SEPARATOR = "\n\n"


@dataclass
class SquadInputs:
    """What :func:`write_inputs` wrote: the documents folder, the questions file, and the counts."""

    docs: Path
    questions: Path
    articles: int
    questions_written: int
    repeated_questions: int  # asked again (same text up to case and spacing), left out


def article_document(article: dict[str, Any]) -> tuple[str, list[int]]:
    """(the article as one document: its paragraphs joined by a blank line, each paragraph's offset in it)."""
    offsets, at = [], 0
    for paragraph in article["paragraphs"]:
        offsets.append(at)
        at += len(paragraph["context"]) + len(PARAGRAPH_SEPARATOR)
    return PARAGRAPH_SEPARATOR.join(p["context"] for p in article["paragraphs"]), offsets


def document_name(title: str) -> str:
    """The article's file name: its title with anything but letters, digits and ``.,()-_`` made ``_``."""
    return re.sub(r"[^\w.,()-]", "_", title) + ".txt"


def answerable(article: dict[str, Any], offsets: Sequence[int]) -> list[tuple[str, str, int, str]]:
    """(question id, question, answer offset in the document, answer text) of every answerable question,
    in file order (SQuAD's first answer)."""
    rows = []
    for paragraph, offset in zip(article["paragraphs"], offsets, strict=True):
        for qa in paragraph["qas"]:
            if qa.get("is_impossible") or not qa["answers"]:
                continue
            answer = qa["answers"][0]
            rows.append((qa["id"], qa["question"], offset + answer["answer_start"], answer["text"]))
    return rows


def write_inputs(squad: dict[str, Any], out: Path, articles: int | None = None,
                 questions_per_article: int | None = None, seed: int = 0) -> SquadInputs:
    """Write ``out/docs/<title>.txt`` for the first ``articles`` articles (by title) and ``out/questions.jsonl``
    with up to ``questions_per_article`` answerable questions of each (a seeded sample, in file order)."""
    chosen = sorted(squad["data"], key=lambda a: a["title"])[:articles]
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"longembed-squad-task:{seed}")
    seen: set[str] = set()
    lines: list[str] = []
    repeated = 0
    for article in chosen:
        text, offsets = article_document(article)
        name = document_name(article["title"])
        (docs / name).write_text(text, encoding="utf-8", newline="")
        rows = answerable(article, offsets)
        if questions_per_article is not None and len(rows) > questions_per_article:
            rows = [rows[i] for i in sorted(rng.sample(range(len(rows)), questions_per_article))]
        for qid, question, start, answer in rows:
            key = " ".join(question.casefold().split())
            if not key or key in seen:
                repeated += 1
                continue
            seen.add(key)
            lines.append(json.dumps({"id": qid, "question": question, "document": name, "answer": answer,
                                     "answer_start": start}, ensure_ascii=False))
    questions = out / "questions.jsonl"
    questions.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return SquadInputs(docs, questions, len(chosen), len(lines), repeated)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"SQuAD 2.0 dev (default: {DEFAULT_DATA})")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/docs, OUT/questions.jsonl, OUT/task")
    parser.add_argument("--articles", type=int, default=None, help="the first N articles by title (default: all 35)")
    parser.add_argument("--questions-per-article", type=int, default=None,
                        help="a seeded sample of N answerable questions per article (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT/task")
    args = parser.parse_args(argv)
    squad = json.loads(args.data.read_text(encoding="utf-8"))
    inputs = write_inputs(squad, args.out, args.articles, args.questions_per_article, args.seed)
    built = build_task_dir(inputs.docs, inputs.questions, args.out / "task", globs=["*.txt"], overwrite=args.overwrite)
    print(f"wrote {built.describe()}; {inputs.articles} articles, {inputs.repeated_questions} repeated questions "
          "left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
