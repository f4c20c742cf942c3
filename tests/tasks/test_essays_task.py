"""The essays task of issue 41 (``benchmarks/essays``): our questions about the 49 essays are well formed
(each names one essay, quotes it as its answer, is a fact or a paraphrase, half of each), and the build
script turns them into a task folder that the task reader reads back, every answer located."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import BENCHMARKS_DIR, load_benchmark_script, require_data

from longembed.tasks import TaskDirTask

QUESTIONS = BENCHMARKS_DIR / "essays" / "questions.jsonl"


def test_questions_are_half_facts_half_paraphrases_each_asked_once() -> None:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    kinds = [row["kind"] for row in rows]
    assert len(rows) >= 48 and kinds.count("fact") == kinds.count("paraphrase") == len(rows) // 2
    assert len({" ".join(row["question"].casefold().split()) for row in rows}) == len(rows)
    assert all(isinstance(row["document"], str) and row["answer"].strip() for row in rows)


def test_build_script_checks_the_answers_and_builds_the_task(tmp_path: Path) -> None:
    data = require_data("paul_graham_essays")
    build_task = load_benchmark_script("essays/build_task")
    essays = build_task.essays_folder(data)
    assert build_task.answer_problems(QUESTIONS, essays) == []  # every quote is in its own essay
    assert build_task.main(["--data", str(data), "--out", str(tmp_path / "task")]) == 0
    loaded = TaskDirTask(tmp_path / "task").load()
    assert len(loaded.corpus) == 49 and loaded.corpus["addiction.txt"] == (essays / "addiction.txt").read_text()
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    assert list(loaded.queries.values()) == [row["question"] for row in rows]
    assert [next(iter(r)) for r in loaded.qrels.values()] == [row["document"] for row in rows]
    assert loaded.answers is not None and list(loaded.answers) == list(loaded.queries)  # every quote located
    for row, by_doc in zip(rows, loaded.answers.values(), strict=True):
        ((doc_id, [(start, end)]),) = by_doc.items()
        assert doc_id == row["document"] and loaded.corpus[doc_id][start:end].split() == row["answer"].split()

    misquoted = tmp_path / "misquoted.jsonl"
    misquoted.write_text(json.dumps({**rows[0], "answer": "words no essay holds"}) + "\n")
    assert build_task.answer_problems(misquoted, essays) == [f"{misquoted}:1: the answer is not a quote of "
                                                               f"{rows[0]['document']}"]
