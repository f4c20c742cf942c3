"""``longembed task-dir``: a folder and a questions file -> a task that ``eval --task-dir`` runs (the
packaged MiniLM at a small length); bad input exits 2 with every problem listed by file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.results import RunResults

ESSAYS = {
    "fruit/apples.txt": "Apples grow on trees in orchards. They ripen in autumn and are red or green.",
    "fruit/bananas.md": "Bananas grow in bunches in the tropics; they are yellow when ripe.",
    "animals/cats.txt": "Cats sleep for about sixteen hours a day and hunt mice at night.",
    "animals/dogs.txt": "Dogs bark at strangers and love to fetch sticks in the park.",
}
QUESTIONS = [
    {"question": "How many hours a day do cats sleep?", "document": "animals/cats.txt"},
    {"question": "Which fruit is yellow when ripe?", "document": "fruit/bananas.md"},
    {"question": "What do dogs fetch?", "document": "animals/dogs.txt"},
]


def write_inputs(root: Path, rows: list[dict]) -> tuple[Path, Path]:
    docs = root / "docs"
    for name, text in ESSAYS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
    questions = root / "questions.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return docs, questions


@pytest.mark.slow
def test_task_dir_builds_a_task_that_eval_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs, questions = write_inputs(tmp_path, QUESTIONS)
    task = tmp_path / "mine"
    assert main(["task-dir", "--docs", str(docs), "--questions", str(questions), "--out", str(task)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {task}: 4 documents (1 named by no question), 3 questions, 3 judgements" in out
    assert f"longembed eval --task-dir {task}" in out and f"longembed advise --task-dir {task}" in out
    run = tmp_path / "run"
    assert main(["eval", "--model", "default", "--max-length", "64", "--task-dir", str(task), "--output", str(run),
                 "--cache-dir", str(tmp_path / "cache"), "--no-estimate"]) == 0
    assert "mine: 4 documents, 3 queries" in capsys.readouterr().out
    result = RunResults.load(run).tasks["mine"]
    # one obvious answer per question: MiniLM ranks each question's own document first
    assert result.first_ranked == {f"q{i}": row["document"] for i, row in enumerate(QUESTIONS, start=1)}
    assert result.main_score == "ndcg@10" and result.score == pytest.approx(100.0)


def test_task_dir_bad_rows_exit_2_listing_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [*QUESTIONS, {"question": "", "document": "animals/cats.txt"},
            {"question": "What do dogs fetch?", "document": "animals/dogs.txt"},
            {"question": "Who wrote it?", "document": "cats.txt"}]
    docs, questions = write_inputs(tmp_path, rows)
    task = tmp_path / "mine"
    assert main(["task-dir", "--docs", str(docs), "--questions", str(questions), "--out", str(task)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("longembed task-dir: error: 3 problem(s), nothing written:")
    assert f"{questions}:4: the question is empty" in err
    assert f"{questions}:5: duplicate pair (question and document 'animals/dogs.txt'): the question of line 3" in err
    assert f"{questions}:6: document 'cats.txt' is not in the documents folder (did you mean 'animals/cats.txt'?" in err
    assert not task.exists()
    write_inputs(tmp_path, QUESTIONS)
    argv = ["task-dir", "--docs", str(docs), "--questions", str(questions), "--out", str(task), "--glob", "fruit/*"]
    assert main(argv) == 2  # the cats and dogs are not documents under this glob
    assert "document 'animals/cats.txt' is not in the documents folder" in capsys.readouterr().err
    assert main([*argv, "--glob", "animals/*.txt"]) == 0
    assert main([*argv, "--glob", "animals/*.txt"]) == 2
    assert "give --overwrite" in capsys.readouterr().err
    assert main([*argv, "--glob", "animals/*.txt", "--overwrite"]) == 0
