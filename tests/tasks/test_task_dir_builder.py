"""``build_task_dir``: a folder of documents and a questions file -> a BEIR task folder that
:class:`TaskDirTask` reads back; every bad row and document named by file and line, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.errors import UserError
from longembed.tasks import TaskDirTask
from longembed.tasks.task_dir_builder import TaskDirProblems, build_task_dir

TEXTS = {
    "a.txt": "Apples grow on trees.\nThey are red or green.\n",
    "notes/b.md": "# Bees\n\nBees make honey.",
    "notes/deep/c.txt": "Cats sleep a lot — sixteen hours a day.",
    "d.txt": "Dogs bark.",
}


def docs_folder(root: Path) -> Path:
    """Four documents in nested folders, plus files that are not documents (a .csv, a hidden file and folder)."""
    for name, text in TEXTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (root / "table.csv").write_text("x,y\n")
    (root / ".hidden.txt").write_text("not a document")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD.txt").write_text("not a document")
    return root


def jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD_ROWS = [
    {"question": "What colour are apples?", "document": "a.txt", "kind": "fact"},
    {"question": "Which insects make something sweet?", "documents": ["notes/b.md", "a.txt"]},
    {"id": "cat", "question": "How long do cats sleep?", "document": "notes/deep/c.txt"},
]


def test_round_trip_reads_back_every_document_question_and_judgement(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    built = build_task_dir(docs, jsonl(tmp_path / "q.jsonl", GOOD_ROWS), tmp_path / "task")
    assert (built.documents, built.queries, built.judgements, built.unjudged_documents) == (4, 3, 4, 1)
    data = TaskDirTask(tmp_path / "task").load()
    assert data.corpus == TEXTS  # ids are relative paths; texts are the files' exact texts; hidden files and .csv skipped
    assert data.queries == {"q1": GOOD_ROWS[0]["question"], "q2": GOOD_ROWS[1]["question"], "cat": GOOD_ROWS[2]["question"]}
    assert data.qrels == {"q1": {"a.txt": 1}, "q2": {"notes/b.md": 1, "a.txt": 1}, "cat": {"notes/deep/c.txt": 1}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "q.jsonl", "task"]  # no temporary folder left


@pytest.mark.parametrize("suffix, delimiter", [(".tsv", "\t"), (".csv", ",")])
def test_tables_with_a_header_and_several_documents_per_cell(tmp_path: Path, suffix: str, delimiter: str) -> None:
    docs = docs_folder(tmp_path / "docs")
    quoted = '"Which insects, if any, make ""honey""?"'  # a quoted field: the delimiter and doubled quotes
    lines = [f"Document{delimiter}Question{delimiter}id", f"a.txt{delimiter}What colour are apples?{delimiter}",
             f"notes/b.md | d.txt{delimiter}{quoted}{delimiter}bees"]
    questions = tmp_path / f"q{suffix}"
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_task_dir(docs, questions, tmp_path / "task")
    data = TaskDirTask(tmp_path / "task").load()
    assert data.queries == {"q1": "What colour are apples?", "bees": 'Which insects, if any, make "honey"?'}
    assert data.qrels == {"q1": {"a.txt": 1}, "bees": {"notes/b.md": 1, "d.txt": 1}}


def test_glob_chooses_the_documents(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    questions = jsonl(tmp_path / "q.jsonl", [GOOD_ROWS[0]])
    build_task_dir(docs, questions, tmp_path / "task", globs=["*.txt"])
    assert set(TaskDirTask(tmp_path / "task").load().corpus) == {"a.txt", "d.txt"}
    with pytest.raises(TaskDirProblems, match=r"no document matches '\*\.rst'"):
        build_task_dir(docs, questions, tmp_path / "other", globs=["*.rst"])


def problems_of(docs: Path, questions: Path, out: Path) -> list[str]:
    with pytest.raises(TaskDirProblems) as caught:
        build_task_dir(docs, questions, out)
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    return caught.value.problems


def test_every_bad_row_is_named_by_file_and_line_and_nothing_is_written(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    questions = jsonl(tmp_path / "q.jsonl", [
        GOOD_ROWS[0],                                                      # 1 fine
        {"question": "Who barks?", "document": "dogs.txt"},                # 2 missing document
        {"question": "   ", "document": "d.txt"},                          # 3 empty question
        {"question": "what  COLOUR are apples?", "document": "d.txt"},     # 4 duplicate question (case, spaces)
        {"question": "What colour are apples?", "document": "a.txt"},      # 5 duplicate pair
        {"question": "Who sleeps?", "documents": ["d.txt", "d.txt"]},      # 6 pair twice in one row
        "{not json",                                                       # 7
        {"question": "Where?", "document": "c.txt"},                       # 8 missing, with a hint
        {"question": "No document?"},                                      # 9
    ])
    problems = problems_of(docs, questions, tmp_path / "task")
    where = [p.split(": ", 1)[0] for p in problems]
    assert where == [f"{questions}:{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9)]
    text = "\n".join(problems)
    assert f"{questions}:2: document 'dogs.txt' is not in the documents folder" in text
    assert f"{questions}:3: the question is empty" in text
    assert f"{questions}:4: duplicate question: the question of line 1 again" in text
    assert f"{questions}:5: duplicate pair (question and document 'a.txt'): the question of line 1 again" in text
    assert f"{questions}:6: duplicate pair: document(s) ['d.txt'] named twice" in text
    assert f"{questions}:7: not valid JSON" in text
    assert "did you mean 'notes/deep/c.txt'?" in problems[6]
    assert f"{questions}:9: no document" in text


def test_bad_documents_are_all_named(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    (docs / "empty.txt").write_text("  \n\n")
    (docs / "latin1.txt").write_bytes("first line\ncaf\xe9\n".encode("latin-1"))
    unreadable = docs / "locked.txt"
    unreadable.write_text("secret")
    unreadable.chmod(0)
    (docs / "dangling.txt").symlink_to(docs / "moved-away.txt")  # unreadable for any user, root too
    questions = jsonl(tmp_path / "q.jsonl", [GOOD_ROWS[0], {"question": "Hm?", "document": "nope.txt"}])
    readable = can_read(unreadable)
    try:
        problems = problems_of(docs, questions, tmp_path / "task")
    finally:
        unreadable.chmod(0o644)
    assert f"{docs / 'empty.txt'}: the document is empty" in problems
    assert (f"{docs / 'dangling.txt'}: cannot be read (No such file or directory; a symbolic link to "
            f"{docs / 'moved-away.txt'})") in problems
    assert any(p.startswith(f"{docs / 'latin1.txt'}:2: not UTF-8 text (byte 0xe9") for p in problems)
    if not readable:  # root reads any file: this case only runs as another user
        assert any(p.startswith(f"{unreadable}: cannot be read") for p in problems)
    assert problems[-1].startswith(f"{questions}:2: document 'nope.txt'")  # the rows' problems too, at once


def can_read(path: Path) -> bool:
    try:
        path.read_bytes()
    except OSError:
        return False
    return True


def test_non_utf8_and_malformed_table_rows_are_named(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    questions = tmp_path / "q.tsv"
    questions.write_bytes(b"question\tdocument\nOk?\ta.txt\nCaf\xe9?\td.txt\nToo\tmany\tfields\n\tnotes/b.md\n")
    problems = problems_of(docs, questions, tmp_path / "task")
    assert [p.split(": ", 1)[0] for p in problems] == [f"{questions}:{n}" for n in (3, 4, 5)]
    assert "not UTF-8 text (byte 0xe9" in problems[0] and "3 fields where the header has 2" in problems[1]
    assert "the question is empty" in problems[2]
    headless = tmp_path / "h.csv"
    headless.write_text("What colour are apples?,a.txt\n")
    assert "the header line must name the columns" in problems_of(docs, headless, tmp_path / "task")[0]


def test_an_existing_output_needs_overwrite_and_must_be_a_task_folder(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    first = jsonl(tmp_path / "q1.jsonl", GOOD_ROWS[:1])
    out = tmp_path / "task"
    build_task_dir(docs, first, out)
    with pytest.raises(FileExistsError, match="give --overwrite"):
        build_task_dir(docs, jsonl(tmp_path / "q2.jsonl", GOOD_ROWS), out)
    build_task_dir(docs, tmp_path / "q2.jsonl", out, overwrite=True)
    assert len(TaskDirTask(out).load().queries) == 3
    bad = jsonl(tmp_path / "q3.jsonl", [{"question": "", "document": "a.txt"}])
    with pytest.raises(TaskDirProblems):
        build_task_dir(docs, bad, out, overwrite=True)
    assert len(TaskDirTask(out).load().queries) == 3  # a failed build leaves the old task as it was
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a task folder's files"):
        build_task_dir(docs, first, out, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("suffix, delimiter", [(".tsv", "\t"), (".csv", ",")])
def test_an_unbalanced_quote_is_named_not_merged_into_one_question(tmp_path: Path, suffix: str, delimiter: str) -> None:
    """Issue 51: a stray quote made two rows one wrong question and exited 0 ("1 questions"); the csv
    module's strict mode names a quote left open, and a row spanning lines is refused."""
    docs = docs_folder(tmp_path / "docs")
    questions = tmp_path / f"q{suffix}"
    d = delimiter
    cases = {
        # the quote never closes: every later row swallowed (non-strict csv read it as one row)
        f"document{d}question\na.txt{d}\"What colour are apples?\nd.txt{d}Do dogs bark?\n": (2, "unexpected end of data"),
        # closed by a later stray quote: two rows merged into one with the right number of fields
        f"question{d}document\n\"What colour{d}a.txt\nDo dogs bark?\"{d}d.txt\nOk?{d}a.txt\n": (2, "runs over lines 2-3"),
        # text after a closing quote
        f"question{d}document\n\"What\" colour?{d}a.txt\n": (2, "expected after"),
    }
    for text, (line, said) in cases.items():
        questions.write_text(text, encoding="utf-8")
        problems = problems_of(docs, questions, tmp_path / "task")
        assert len(problems) == 1 and problems[0].startswith(f"{questions}:{line}: ") and said in problems[0], problems
        assert not (tmp_path / "task").exists()


def test_the_output_inside_the_documents_and_a_folder_of_questions_are_refused(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    questions = jsonl(tmp_path / "q.jsonl", GOOD_ROWS)
    for out in (docs / "task", docs, docs / "notes" / ".." / "task"):
        with pytest.raises(UserError, match="is inside the documents folder"):
            build_task_dir(docs, questions, out)
        assert not (docs / "task").exists()
    with pytest.raises(UserError, match=f"questions file {docs} is a folder"):
        build_task_dir(docs, docs, tmp_path / "task")


def test_a_beir_queries_file_with_documents_named_without_their_extension(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    questions = jsonl(tmp_path / "queries.jsonl", [
        {"_id": "apples", "text": "What colour are apples?", "document": "a"},
        {"_id": "bees", "text": "Who makes honey?", "documents": ["notes/b", "d.txt"]},
    ])
    build_task_dir(docs, questions, tmp_path / "task")
    data = TaskDirTask(tmp_path / "task").load()
    assert data.queries == {"apples": "What colour are apples?", "bees": "Who makes honey?"}
    assert data.qrels == {"apples": {"a.txt": 1}, "bees": {"notes/b.md": 1, "d.txt": 1}}


def test_a_name_without_extension_that_fits_two_documents_is_one_line_naming_both(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    (docs / "a.md").write_text("Apples, again.", encoding="utf-8")
    questions = jsonl(tmp_path / "q.jsonl", [{"question": "What colour are apples?", "document": "a"}])
    assert problems_of(docs, questions, tmp_path / "task") == [
        f"{questions}:1: document 'a' may be 'a.md' or 'a.txt': name it with its extension"]


@pytest.mark.parametrize("rows, looks", [
    ([{"_id": "q1", "text": "What colour are apples?"}, {"_id": "q2", "text": "Who barks?"}], "a BEIR queries.jsonl"),
    ([{"_id": "a.txt", "title": "", "text": "Apples grow on trees."}], "a BEIR corpus.jsonl"),
    ([{"prompt": "What colour are apples?", "answer": "red"}], "the fields answer, prompt and none names a document"),
])
def test_a_file_of_another_format_is_one_problem_saying_what_was_expected(tmp_path: Path, rows: list, looks: str) -> None:
    docs = docs_folder(tmp_path / "docs")
    problems = problems_of(docs, jsonl(tmp_path / "queries.jsonl", rows), tmp_path / "task")
    assert len(problems) == 1 and 'expected one question per line with the document that answers it' in problems[0]
    assert looks in problems[0]


def test_a_qrels_file_given_as_questions_says_what_it_looks_like(tmp_path: Path) -> None:
    docs = docs_folder(tmp_path / "docs")
    qrels = tmp_path / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\ta.txt\t1\n", encoding="utf-8")
    (problem,) = problems_of(docs, qrels, tmp_path / "task")
    assert "must name the columns" in problem and "looks like BEIR qrels" in problem
