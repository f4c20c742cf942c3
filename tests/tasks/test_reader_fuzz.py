"""Property-based tests of every reader of a user's files (issue 40, "a test for the whole class"): the
task folder (corpus.jsonl, queries.jsonl, qrels/test.tsv, qrels.jsonl, gzipped or not), the corpus shards
``longembed embed DIR`` reads (.txt/.md by file or by line, .jsonl) and the single file ``longembed embed
FILE`` reads.

Whatever the bytes, lines or JSON values, a reader either returns documents or raises a ValueError (the
family the CLI turns into ``longembed CMD: error: ...`` and exit 2) whose message names the file, and the
line for an error that belongs to one line; never another exception, which would be a traceback.

Deterministic and bounded for CI: ``derandomize=True`` (examples derived from the test, not a random
seed), no example database, a fixed number of examples per property.
"""

from __future__ import annotations

import gzip
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longembed.cli.embed import read_documents
from longembed.corpus.shards import Shard, ShardReader
from longembed.tasks.task_dir import TaskDirTask

FUZZ = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Errors that concern a whole file, not one of its lines (they name the file only).
WHOLE_FILE = re.compile(r"no documents|no queries|no judgements|none of the \d+ queries|the file is empty|"
                        r"no documents found|not a gzip|cut short|gzip")

GOOD_CORPUS = b'{"_id": "d1", "title": "", "text": "the cat sat"}\n{"_id": "d2", "text": "a dog ran"}\n'
GOOD_QUERIES = b'{"_id": "q1", "text": "cat"}\n'
GOOD_QRELS = b"query-id\tcorpus-id\tscore\nq1\td1\t1\n"

# ----------------------------------------------------------------------------- strategies
ID_KEYS = ["_id", "id", "doc_id", "qid", "query-id", "corpus-id", "title", "text", "score", "x"]
texts = st.text(st.characters(codec=None), max_size=12)  # any code point, lone surrogates included
scalars = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | texts
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner,
                                                                                                   max_size=3),
                           max_leaves=8)
rows = st.dictionaries(st.sampled_from(ID_KEYS) | texts, json_values, max_size=5)


def json_line(value: Any) -> bytes:
    """``value`` as a JSON line (NaN and Infinity as Python writes them; lone surrogates escaped)."""
    return json.dumps(value).encode("utf-8") + b"\n"


#: A line that is not a JSON object, or not JSON at all: truncated, deeply nested, huge numbers, NUL ...
odd_lines = st.sampled_from([
    b"{", b"[]\n", b"null\n", b'"text"\n', b"\x00\n", b"\xff\xfe\n", b"[" * 5000 + b"\n", b"1" * 5000 + b"\n",
    b'{"_id": ' + b"9" * 5000 + b', "text": "x"}\n', b'{"_id": "a", "text": "\\ud800"}\n', b"\r\n", b"\x0c\n",
    b'{"_id": "a", "text": "x"}\x85\n',
])
lines = st.lists(rows.map(json_line) | odd_lines | st.binary(max_size=20), max_size=6).map(b"".join)
tsv_fields = st.sampled_from(["q1", "d1", "d2", "1", "0", "-1", "1.0", "2.5", "", " ", '"', '"q1', "\x00", "é",
                              "x" * 5000, "9" * 5000, "query-id", "corpus-id", "score"])
tsv_lines = st.lists(st.lists(tsv_fields, min_size=1, max_size=4).map(lambda f: "\t".join(f)), max_size=5).map(
    lambda ls: ("\n".join(ls) + "\n").encode("utf-8", "surrogatepass"))


def maybe_gzip(data: bytes, kind: str) -> bytes:
    """The bytes as written to a file of ``kind``: ".gz" gzip-compressed, "cut.gz" compressed then cut short,
    "raw.gz" the bytes themselves under a .gz name (not gzip at all)."""
    if kind == ".gz":
        return gzip.compress(data, mtime=0)
    if kind == "cut.gz":
        return gzip.compress(data, mtime=0)[: max(1, len(data) // 2)]
    return data


gz_kinds = st.sampled_from(["", "", ".gz", "cut.gz", "raw.gz"])


# ----------------------------------------------------------------------------- the property
def assert_clean(read: Callable[[], Any], path: Path) -> None:
    """``read()`` returns valid text (ids and texts that encode as UTF-8), or raises a ValueError that names
    ``path`` (and a line, unless whole-file)."""
    try:
        for value in read():
            "".join(value if isinstance(value, tuple) else (value,)).encode("utf-8")
    except ValueError as exc:
        message = str(exc)
        assert str(path) in message, message
        assert re.search(re.escape(str(path)) + r":\d+", message) or WHOLE_FILE.search(message), message
        assert "\n" not in message.strip(), message


def task_folder(root: Path, corpus: bytes, queries: bytes, qrels: bytes, gz: str = "",
                qrels_name: str = "qrels/test.tsv") -> dict[str, Path]:
    """A task folder of the three files (each possibly gzipped: ``gz``) under a fresh folder of ``root``."""
    folder = Path(tempfile.mkdtemp(dir=root))
    suffix = ".gz" if gz else ""
    paths = {"corpus": folder / f"corpus.jsonl{suffix}", "queries": folder / f"queries.jsonl{suffix}",
             "qrels": folder / f"{qrels_name}{suffix}"}
    paths["qrels"].parent.mkdir(parents=True, exist_ok=True)
    for key, data in (("corpus", corpus), ("queries", queries), ("qrels", qrels)):
        paths[key].write_bytes(maybe_gzip(data, gz) if gz else data)
    paths["folder"] = folder
    return paths


def assert_task_folder_clean(paths: dict[str, Path]) -> None:
    try:
        TaskDirTask(paths["folder"]).load().fingerprint()  # what a run hashes: valid UTF-8 throughout
    except ValueError as exc:
        message = str(exc)
        named = [p for key, p in paths.items() if key != "folder" and str(p) in message]
        assert named, message
        assert any(re.search(re.escape(str(p)) + r":\d+", message) for p in named) or WHOLE_FILE.search(message), (
            message)
        assert "\n" not in message.strip(), message


# ----------------------------------------------------------------------------- task folders
@FUZZ
@given(corpus=lines, gz=gz_kinds)
def test_any_corpus_jsonl_reads_or_names_file_and_line(tmp_path_factory, corpus: bytes, gz: str) -> None:
    root = tmp_path_factory.getbasetemp()
    assert_task_folder_clean(task_folder(root, corpus, GOOD_QUERIES, GOOD_QRELS, gz))


@FUZZ
@given(queries=lines, gz=gz_kinds)
def test_any_queries_jsonl_reads_or_names_file_and_line(tmp_path_factory, queries: bytes, gz: str) -> None:
    root = tmp_path_factory.getbasetemp()
    assert_task_folder_clean(task_folder(root, GOOD_CORPUS, queries, GOOD_QRELS, gz))


@FUZZ
@given(qrels=tsv_lines | st.binary(max_size=40), gz=gz_kinds)
def test_any_beir_qrels_reads_or_names_file_and_line(tmp_path_factory, qrels: bytes, gz: str) -> None:
    root = tmp_path_factory.getbasetemp()
    assert_task_folder_clean(task_folder(root, GOOD_CORPUS, GOOD_QUERIES, qrels, gz))


@FUZZ
@given(qrels=lines)
def test_any_longembed_qrels_jsonl_reads_or_names_file_and_line(tmp_path_factory, qrels: bytes) -> None:
    root = tmp_path_factory.getbasetemp()
    assert_task_folder_clean(task_folder(root, GOOD_CORPUS, GOOD_QUERIES, qrels, qrels_name="qrels.jsonl"))


# ----------------------------------------------------------------------------- embed's inputs
@FUZZ
@given(data=lines | st.binary(max_size=60), suffix=st.sampled_from([".txt", ".md", ".jsonl"]),
       unit=st.sampled_from([None, "file", "line"]))
def test_any_corpus_shard_reads_or_names_file_and_line(tmp_path_factory, data: bytes, suffix: str,
                                                       unit: str | None) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    path = folder / f"shard{suffix}"
    path.write_bytes(data)
    if suffix == ".jsonl" and unit == "file":
        unit = None  # --unit file on a .jsonl is refused before any reading (tested in tests/cli)
    assert_clean(lambda: list(ShardReader(Shard(path, path.name), unit=unit).documents()), path)


@FUZZ
@given(data=lines | st.binary(max_size=60), suffix=st.sampled_from([".txt", ".md", ".jsonl"]),
       unit=st.sampled_from([None, "line"]))
def test_any_embed_input_file_reads_or_names_file_and_line(tmp_path_factory, data: bytes, suffix: str,
                                                           unit: str | None) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    path = folder / f"docs{suffix}"
    path.write_bytes(data)
    assert_clean(lambda: read_documents(path, unit=unit), path)


# ----------------------------------------------------------------------------- what the fuzzing found, pinned
def test_the_inputs_fuzzing_found_are_one_line_errors_naming_file_and_line(tmp_path: Path) -> None:
    """Before: a gzip file cut short raised EOFError, a deeply nested line RecursionError, an integer of
    5000 digits a ValueError naming neither file nor line, and a ``\\ud800`` escape passed the reader and
    broke the run later (hashing the task); now each names the file and the line (and the field)."""
    cases = {
        "cut.gz": (gzip.compress(GOOD_CORPUS * 50, mtime=0)[:60], "corpus.jsonl.gz:1: not a readable gzip file"),
        "nested": (b"[" * 5000 + b"\n", "corpus.jsonl:1: not valid JSON (nested too deeply)"),
        "digits": (b'{"_id": ' + b"9" * 5000 + b', "text": "x"}\n', "corpus.jsonl:1: not valid JSON (Exceeds"),
        "surrogate": (b'{"_id": "d1", "text": "a \\ud800 b"}\n', "corpus.jsonl:1: the 'text' holds a lone surrogate"),
    }
    for name, (corpus, expected) in cases.items():
        gz = ".gz" if name.endswith(".gz") else ""
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"corpus.jsonl{gz}").write_bytes(corpus)
        (folder / "queries.jsonl").write_bytes(GOOD_QUERIES)
        (folder / "qrels").mkdir()
        (folder / "qrels" / "test.tsv").write_bytes(GOOD_QRELS)
        try:
            TaskDirTask(folder).load()
        except ValueError as exc:
            assert expected in str(exc), (name, str(exc))
        else:
            raise AssertionError(f"{name}: no error")
    shard = tmp_path / "shard.jsonl"
    shard.write_bytes(b'{"id": "a \\udc00", "text": "fine"}\n')
    try:
        list(ShardReader(Shard(shard, shard.name)).documents())
    except ValueError as exc:
        assert "shard.jsonl:1: the id holds a lone surrogate" in str(exc)
    else:
        raise AssertionError("a lone surrogate in an id passed")


# ----------------------------------------------------------------------------- task-dir questions (issue 51)
#: Cells of a questions table: documents that exist, text, and the quotes, delimiters and line breaks that
#: used to merge rows silently.
question_cells = st.sampled_from(["a.txt", "b.txt", "a.txt|b.txt", "What about tides?", "moons", "", " ", '"', '""',
                                  '"quoted"', 'say "hi"', "x,y", "x\ty", "\r", "é", "\x00", "q1", "id",
                                  '"What', 'tides"', '"a.txt', 'b.txt"'])  # quotes opened on one row, closed on another
#: Rows that are right but for a stray quote (the issue's case: two rows merged into one question, exit 0).
question_rows = st.lists(st.tuples(st.sampled_from(["What about tides?", '"What about tides?', 'moons"', "Why?",
                                                    'a "quoted" word']),
                                   st.sampled_from(["a.txt", "b.txt", "a.txt|b.txt"])).map(list), min_size=1, max_size=4)
question_tables = st.tuples(st.just("question,document"), question_rows) | st.tuples(
    st.sampled_from(["question,document", "document,question", "id,question,document", "question,documents,kind"]),
    st.lists(st.lists(question_cells, min_size=1, max_size=4), max_size=5),
)


@FUZZ
@given(table=question_tables, suffix=st.sampled_from([".csv", ".tsv"]), jsonl_rows=st.lists(rows, max_size=4))
def test_any_questions_file_builds_a_task_or_one_error_and_writes_nothing(tmp_path_factory, table, suffix: str,
                                                                        jsonl_rows) -> None:
    """build_task_dir either writes a task whose every question is one line of the file (no rows merged:
    as many questions as non-empty rows), or raises a UserError naming the file, and writes nothing."""
    from longembed.errors import UserError
    from longembed.tasks.task_dir_builder import build_task_dir

    root = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("the tides of the sea")
    (root / "docs" / "b.txt").write_text("the moons of the planets")
    header, cells = table
    delimiter = "\t" if suffix == ".tsv" else ","
    text = "\n".join([header.replace(",", delimiter), *(delimiter.join(row) for row in cells)]) + "\n"
    files = {root / f"q{suffix}": text.encode("utf-8"),
             root / "q.jsonl": b"".join(json_line(r) for r in jsonl_rows)}
    for questions, data in files.items():
        questions.write_bytes(data)
        out = root / f"task-{questions.suffix[1:]}"
        try:
            built = build_task_dir(root / "docs", questions, out)
        except UserError as exc:
            assert str(questions) in str(exc), str(exc)
            assert not out.exists() and sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == []
            continue
        task = TaskDirTask(out).load()
        assert all("\n" not in q and "\r" not in q for q in task.queries.values()) or questions.suffix == ".jsonl"
        if questions.suffix != ".jsonl":
            data_rows = [line for line in data.decode("utf-8").splitlines()[1:] if line.strip(" \t,")]
            assert built.queries == len(data_rows), (data, task.queries)
