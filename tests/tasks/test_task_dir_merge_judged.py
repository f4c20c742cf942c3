"""``task-dir --merge-judged``: the judgments made on the judging page (``longembed judge``) merged with
questions written elsewhere, into one task folder that eval and advise read (issue 55)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.tasks import TaskDirTask
from longembed.tasks.judgment_log import JudgmentLog
from longembed.tasks.task_dir_builder import TaskDirProblems, build_task_dir

DOCS = {"a.txt": "Apples ripen in September on the hill.", "b.txt": "The ferry leaves at noon.",
        "c.txt": "Pears and apples are picked by hand."}


def docs(root: Path) -> Path:
    folder = root / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text + "\n")
    return folder


def questions(root: Path, rows: list[dict]) -> Path:
    path = root / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def judged(root: Path, judgments: dict[str, dict[str, int]]) -> Path:
    """A folder judged through the judging page's own log: question text -> {document: grade}."""
    log = JudgmentLog(root / "judged")
    for text, grades in judgments.items():
        question = log.ask(text, [{"doc_id": d} for d in DOCS], 10, ["bm25"])
        for doc, grade in grades.items():
            log.judge(question.query_id, doc, grade)
    return root / "judged"


def test_judged_questions_are_merged_with_the_file_s_and_the_file_s_relevant_is_kept(tmp_path: Path) -> None:
    folder = judged(tmp_path, {"  when do APPLES ripen? ": {"a.txt": 0, "c.txt": 2},  # the file's q1, graded
                               "Which fruit is picked by hand?": {"c.txt": 2, "b.txt": 0}})
    rows = [{"question": "When do apples ripen?", "document": "a.txt"},
            {"question": "When does the ferry leave?", "document": "b.txt"}]
    built = build_task_dir(docs(tmp_path), questions(tmp_path, rows), tmp_path / "task", judged=[folder])
    data = TaskDirTask(tmp_path / "task").load()
    assert data.queries == {"q1": "When do apples ripen?", "q2": "When does the ferry leave?",
                            "j2": "Which fruit is picked by hand?"}
    assert data.qrels == {"q1": {"a.txt": 1, "c.txt": 2}, "q2": {"b.txt": 1}, "j2": {"c.txt": 2, "b.txt": 0}}
    assert (built.queries, built.judgements) == (3, 5)
    assert built.merged is not None and (built.merged.new_questions, built.merged.added_judgements) == (1, 3)
    assert built.merged.file_kept == ["q1/a.txt"]
    assert "1 questions judged on the page only, 3 judgements added" in built.describe()
    assert "q1/a.txt" in built.describe()


def test_a_judged_document_not_in_docs_or_a_taken_id_is_a_problem_and_nothing_is_written(tmp_path: Path) -> None:
    folder = judged(tmp_path, {"Which fruit is picked by hand?": {"c.txt": 2}})
    rows = [{"question": "When do apples ripen?", "document": "a.txt", "id": "j1"}]
    with pytest.raises(TaskDirProblems, match=r"question id 'j1' is another question's already"):
        build_task_dir(docs(tmp_path), questions(tmp_path, rows), tmp_path / "task", judged=[folder])
    (tmp_path / "docs" / "c.txt").unlink()
    rows = [{"question": "When do apples ripen?", "document": "a.txt"}]
    with pytest.raises(TaskDirProblems, match=r"judged.*test\.tsv:\d+: document 'c\.txt' is not in the corpus"):
        build_task_dir(tmp_path / "docs", questions(tmp_path, rows), tmp_path / "task", judged=[folder])
    with pytest.raises(TaskDirProblems, match=r"not a judged task folder"):
        build_task_dir(tmp_path / "docs", questions(tmp_path, rows), tmp_path / "task", judged=[tmp_path / "docs"])
    assert not (tmp_path / "task").exists()


def test_the_command_line_merges_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = judged(tmp_path, {"Which fruit is picked by hand?": {"c.txt": 2}})
    rows = [{"question": "When do apples ripen?", "document": "a.txt"}]
    status = main(["task-dir", "--docs", str(docs(tmp_path)), "--questions", str(questions(tmp_path, rows)),
                   "--out", str(tmp_path / "task"), "--merge-judged", str(folder)])
    assert status == 0 and "merged 1 judged folder(s): 1 questions judged on the page only" in capsys.readouterr().out
    assert set(TaskDirTask(tmp_path / "task").load().queries) == {"q1", "j1"}
