"""The essays task of issue 41: the 49 Paul Graham essays (one file = one document) and questions of our
own writing, as a task folder that ``longembed eval --task-dir`` and ``longembed advise --task-dir`` read.

``benchmarks/essays/questions.jsonl`` holds the questions: half "fact" (a detail stated in one essay: a
name, a number, an example) and half "paraphrase" (an idea of one essay asked in other words), each with
the essay that answers it and a short quote of that essay as ``answer``, so that eval reports passage
hit@1 on the task.  This script checks every question's kind and every quote is in its essay (whitespace
aside; ``task-dir`` then locates it), then builds the folder with ``longembed task-dir``'s Python API
(:func:`longembed.tasks.task_dir_builder.build_task_dir`; the same as ``longembed task-dir --docs
DATA/PaulGrahamEssays --questions benchmarks/essays/questions.jsonl --out results/essays/task``).

The essays are not ours to redistribute (``../shared/data/README.md``: the data is not to be copied into
the repository), so the built folder (its corpus.jsonl holds the essays' text) is rebuilt from the data,
not committed: ``results/essays/task/`` is in .gitignore.

    python benchmarks/essays/build_task.py [--data ../shared/data/paul_graham_essays] [--out results/essays/task]

``--data`` defaults to ``$LONGEMBED_DATA_DIR/paul_graham_essays``, else ``../shared/data/paul_graham_essays``
next to the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from longembed.tasks.task_dir_builder import build_task_dir

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = Path(__file__).resolve().parent / "questions.jsonl"
#: $LONGEMBED_DATA_DIR/paul_graham_essays, else ../shared/data/paul_graham_essays beside the repository.
DEFAULT_DATA = Path(os.environ.get("LONGEMBED_DATA_DIR") or REPO.parent / "shared" / "data") / "paul_graham_essays"
DEFAULT_OUT = REPO / "results" / "essays" / "task"
KINDS = ("fact", "paraphrase")


def essays_folder(data: Path) -> Path:
    """The folder of the essay files: ``DATA/PaulGrahamEssays`` (the shared data's layout), or DATA itself."""
    inner = data / "PaulGrahamEssays"
    folder = inner if inner.is_dir() else data
    if not any(folder.glob("*.txt")):
        raise FileNotFoundError(f"no essays (*.txt) in {folder}: give --data, the paul_graham_essays folder")
    return folder


def squeeze(text: str) -> str:
    return " ".join(text.split())


def answer_problems(questions: Path, essays: Path) -> list[str]:
    """Every question whose kind is not fact/paraphrase, or whose answer is not a quote of its essay."""
    problems = []
    texts: dict[str, str] = {}
    for number, line in enumerate(questions.read_text(encoding="utf-8").splitlines(), start=1):
        row = json.loads(line)
        where = f"{questions}:{number}"
        if row.get("kind") not in KINDS:
            problems.append(f"{where}: kind must be one of {KINDS}, not {row.get('kind')!r}")
        path = essays / row["document"]
        if not path.is_file():
            continue  # build_task_dir names it, with every other bad row
        text = texts.setdefault(row["document"], squeeze(path.read_text(encoding="utf-8")))
        if squeeze(row.get("answer", "")) not in text or not row.get("answer", "").strip():
            problems.append(f"{where}: the answer is not a quote of {row['document']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help=f"the paul_graham_essays folder (default: {DEFAULT_DATA})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the task folder (default: {DEFAULT_OUT})")
    parser.add_argument("--questions", type=Path, default=QUESTIONS, help=f"default: {QUESTIONS}")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing task folder at --out")
    args = parser.parse_args(argv)
    essays = essays_folder(args.data)
    problems = answer_problems(args.questions, essays)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    built = build_task_dir(essays, args.questions, args.out, globs=["*.txt"], overwrite=args.overwrite)
    kinds = [json.loads(line)["kind"] for line in args.questions.read_text(encoding="utf-8").splitlines()]
    print(f"wrote {built.describe()}; questions: " + ", ".join(f"{kinds.count(k)} {k}" for k in KINDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
