"""Tests of longembed.tasks.task_dir: a retrieval task read from a user's folder (BEIR layout, or
LongEmbed's qrels.jsonl), its validation errors (file:line), and write_task_dir's round trip."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from longembed.tasks import RetrievalData, TaskDirTask, get_task, write_task_dir
from longembed.tasks.base import Passage
from longembed.tasks.hf_hub import load_hub_config
from longembed.tasks.task_dir import task_dir_tasks

CORPUS = [
    {"_id": "d1", "title": "Volcanoes", "text": "Lava flows downhill."},
    {"_id": "d2", "title": "", "text": "Penguins live on ice."},
    {"_id": "d3", "text": "Chess openings: the gambit."},
    {"_id": 4, "title": None, "text": "Rockets reach orbit."},  # an integer id, a null title
]
QUERIES = [
    {"_id": "q1", "text": "where does lava go?"},
    {"_id": "q2", "text": "what is a gambit?"},
    {"_id": "q3", "text": "how do rockets fly?"},
    {"_id": "q-unjudged", "text": "a query of another split"},
    {"_id": "q-zero", "text": "judged, but nothing relevant"},
]
QRELS_TSV = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td3\t1\nq-zero\td2\t0\nq3\t4\t1\n"


def write_jsonl(path: Path, rows: list, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def beir_folder(root: Path, gz: bool = False) -> Path:
    write_jsonl(root / "corpus.jsonl", CORPUS, gz)
    write_jsonl(root / "queries.jsonl", QUERIES, gz)
    qrels = root / "qrels" / "test.tsv"
    qrels.parent.mkdir(parents=True)
    if gz:
        (root / "qrels" / "test.tsv.gz").write_bytes(gzip.compress(QRELS_TSV.encode()))
    else:
        qrels.write_text(QRELS_TSV)
    return root


# --------------------------------------------------------------------------- reading a BEIR folder
@pytest.mark.parametrize("gz", [False, True])
def test_a_beir_folder_gives_what_its_files_say(tmp_path: Path, gz: bool) -> None:
    folder = beir_folder(tmp_path / "my-task", gz)
    task = TaskDirTask(folder)
    data = task.load()
    assert data.corpus == {  # a non-empty title is prepended with a space (mteb's rule)
        "d1": "Volcanoes Lava flows downhill.",
        "d2": "Penguins live on ice.",
        "d3": "Chess openings: the gambit.",
        "4": "Rockets reach orbit.",
    }
    assert list(data.queries) == ["q1", "q2", "q3"]  # file order; unjudged and all-zero queries left out
    assert data.queries["q2"] == "what is a gambit?"
    assert data.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}, "q3": {"4": 1}}
    assert task.metadata.name == "my-task" and task.metadata.main_score == "ndcg@10"
    assert task.metadata.lengths is None
    record = task.record
    suffix = ".gz" if gz else ""
    assert record.qrels == f"qrels/test.tsv{suffix}" and record.path == str(folder.resolve())
    assert (record.documents, record.queries, record.queries_left_out) == (4, 3, 2)
    assert record.left_out_by_reason == {"unjudged": 1, "no_relevant": 1}
    files = [f"corpus.jsonl{suffix}", f"queries.jsonl{suffix}", f"qrels/test.tsv{suffix}"]
    assert record.sha256 == {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in files}
    assert "2 left out: 1 without judgements in the qrels, 1 whose judgements are all <= 0" in record.describe("x")


def test_longembed_qrels_jsonl_and_hub_field_names(tmp_path: Path) -> None:
    """qrels.jsonl as LongEmbed's hub layout writes it (score optional), with its doc_id/qid names."""
    folder = tmp_path / "hubby"
    write_jsonl(folder / "corpus.jsonl", [{"doc_id": "a", "text": "x"}, {"doc_id": "b", "text": "y"}])
    write_jsonl(folder / "queries.jsonl", [{"qid": "1", "text": "?"}, {"qid": "2", "text": "!"}])
    write_jsonl(folder / "qrels.jsonl", [{"qid": "1", "doc_id": "b"}, {"qid": "2", "doc_id": "a", "score": 3.0}])
    data = TaskDirTask(folder, name="hub-style").load()
    assert data.corpus == {"a": "x", "b": "y"} and data.qrels == {"1": {"b": 1}, "2": {"a": 3}}


def test_both_qrels_forms_are_ambiguous_until_one_is_named(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path / "both")
    write_jsonl(folder / "qrels.jsonl", [{"qid": "q2", "doc_id": "d1"}])
    with pytest.raises(ValueError, match="holds qrels/test.tsv and qrels.jsonl: say which"):
        TaskDirTask(folder)
    by_argument = TaskDirTask(folder, qrels="qrels.jsonl")
    by_path = TaskDirTask(folder / "qrels.jsonl")
    for task in (by_argument, by_path):
        assert task.load().qrels == {"q2": {"d1": 1}}
        assert task.record.qrels == "qrels.jsonl" and task.record.queries_left_out == 4
        assert task.metadata.name == "both"
    assert TaskDirTask(folder / "qrels" / "test.tsv").load().qrels["q1"] == {"d1": 2, "d2": 0}


def test_another_split_is_chosen_by_naming_its_file(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path / "splits")
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "dev.tsv")
    with pytest.raises(FileNotFoundError, match=r"no qrels/test.tsv or qrels.jsonl; it has qrels/dev.tsv"):
        TaskDirTask(folder)
    task = TaskDirTask(folder / "qrels" / "dev.tsv", name="dev")
    assert task.path == folder.resolve() and len(task.load().queries) == 3
    assert task.record.qrels == "qrels/dev.tsv"


# --------------------------------------------------------------------------- validation: file:line
def _replace_line(path: Path, line: int, text: str | None) -> None:
    lines = path.read_text().splitlines()
    if text is None:
        del lines[line - 1]
    else:
        lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


BAD_FILES = [
    ("corpus.jsonl", 3, '{"_id": "d3", "text": "unterminated', r"corpus.jsonl:3: not valid JSON"),
    ("corpus.jsonl", 2, '{"text": "no id"}', r"corpus.jsonl:2: a row has none of the fields"),
    ("corpus.jsonl", 2, '{"_id": "", "text": "empty id"}', r"corpus.jsonl:2: the id must be a non-empty"),
    ("corpus.jsonl", 2, '{"_id": "d2"}', r"corpus.jsonl:2: missing field\(s\) \['text'\]"),
    ("corpus.jsonl", 2, '{"_id": "d2", "text": "  "}', r"corpus.jsonl:2: document 'd2' is empty"),
    ("corpus.jsonl", 2, '{"_id": "d2", "text": 7}', r"corpus.jsonl:2: 'text' must be a string"),
    ("corpus.jsonl", 3, '{"_id": "d1", "text": "again"}', r"corpus.jsonl:3: id 'd1' is given twice \(first at line 1\)"),
    ("queries.jsonl", 2, '{"_id": "q2", "text": ""}', r"queries.jsonl:2: query 'q2' has an empty 'text'"),
    ("queries.jsonl", 5, '{"_id": "q1", "text": "dup"}', r"queries.jsonl:5: id 'q1' is given twice"),
    ("queries.jsonl", 1, "[1, 2]", r"queries.jsonl:1: expected a JSON object"),
    ("qrels/test.tsv", 3, "q9\td1\t1", r"test.tsv:3: query 'q9' is not in the queries file"),
    ("qrels/test.tsv", 3, "q1\td9\t1", r"test.tsv:3: document 'd9' is not in the corpus"),
    ("qrels/test.tsv", 2, "q1\td1\t1.5", r"test.tsv:2: the score must be an integer, not '1.5'"),
    ("qrels/test.tsv", 2, "q1\td1\thigh", r"test.tsv:2: the score must be an integer"),
    ("qrels/test.tsv", 2, "q1 d1 1", r"test.tsv:2: expected 3 tab-separated fields"),
    ("qrels/test.tsv", 3, "q1\td1\t1", r"test.tsv:3: query 'q1' and document 'd1' are judged twice \(first at line 2\)"),
    ("qrels/test.tsv", 1, None, r"test.tsv:1: expected BEIR's header line"),  # header missing
]


@pytest.mark.parametrize(("file", "line", "text", "message"), BAD_FILES)
def test_bad_input_is_an_error_naming_file_and_line(tmp_path: Path, file: str, line: int, text: str | None,
                                                    message: str) -> None:
    folder = beir_folder(tmp_path / "bad")
    _replace_line(folder / file, line, text)
    with pytest.raises(ValueError, match=message):
        TaskDirTask(folder).load()


def test_jsonl_qrels_scores_and_empty_files_are_checked(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path / "t")
    (folder / "qrels" / "test.tsv").unlink()
    write_jsonl(folder / "qrels.jsonl", [{"qid": "q1", "doc_id": "d1"}, {"qid": "q2", "doc_id": "d3", "score": 1.5}])
    with pytest.raises(ValueError, match=r"qrels.jsonl:2: the score must be an integer, not 1.5"):
        TaskDirTask(folder).load()
    write_jsonl(folder / "qrels.jsonl", [{"qid": "q1", "doc_id": "d1", "score": True}])
    with pytest.raises(ValueError, match=r"qrels.jsonl:1: the score must be an integer, not True"):
        TaskDirTask(folder).load()
    write_jsonl(folder / "qrels.jsonl", [{"qid": "q1", "doc_id": "d2", "score": 0}])
    with pytest.raises(ValueError, match=r"none of the 5 queries .* has a judged relevant document"):
        TaskDirTask(folder).load()
    (folder / "corpus.jsonl").write_text("\n")
    with pytest.raises(ValueError, match=r"corpus.jsonl: no documents"):
        TaskDirTask(folder).load()


def test_folder_and_name_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TaskDirTask(tmp_path / "nowhere")
    folder = beir_folder(tmp_path / "qmsum")
    with pytest.raises(ValueError, match="'qmsum' .* is a built-in task's: give another with --task-name"):
        TaskDirTask(folder)
    with pytest.raises(ValueError, match="may hold only letters"):
        TaskDirTask(folder, name="my task")
    with pytest.raises(ValueError, match="not its corpus.jsonl"):
        TaskDirTask(folder / "corpus.jsonl", name="x")
    (folder / "queries.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="has no queries.jsonl or queries.jsonl.gz"):
        TaskDirTask(folder, name="x")


def test_task_dir_tasks_pairs_names_in_order_and_refuses_clashes(tmp_path: Path) -> None:
    a, b = beir_folder(tmp_path / "a" / "data"), beir_folder(tmp_path / "b" / "data")
    assert [t.metadata.name for t in task_dir_tasks([a, b], ["first", "second"])] == ["first", "second"]
    assert [t.path for t in task_dir_tasks([a, b], ["first", "second"])] == [a.resolve(), b.resolve()]
    with pytest.raises(ValueError, match="'data' is given to .* and to .*: name them with --task-name"):
        task_dir_tasks([a, b])
    with pytest.raises(ValueError, match="--task-name given 1 time"):
        task_dir_tasks([a, b], ["first"])


# --------------------------------------------------------------------------- write_task_dir
ODD = RetrievalData(
    corpus={"doc 1": "line one\nline two\u2028same record", "é": "  padded  ", "3": '{"json": "inside"}'},
    queries={"q\u00e9": "first?", "2": "second\r\n?"},
    qrels={"2": {"3": 2, "doc 1": 0}, "q\u00e9": {"é": 1}},
)


@pytest.mark.parametrize("layout", ["beir", "longembed"])
@pytest.mark.parametrize("source", ["odd", "passkey"])
def test_write_task_dir_round_trips(tmp_path: Path, layout: str, source: str) -> None:
    data = ODD if source == "odd" else get_task("passkey").load(None, 512)
    folder = write_task_dir(data, tmp_path / "out", layout=layout)
    back = TaskDirTask(folder, name="out").load()
    assert list(back.corpus.items()) == list(data.corpus.items())
    assert list(back.queries.items()) == list(data.queries.items())
    assert list(back.qrels.items()) == list(data.qrels.items())
    if layout == "longembed":  # the hub loader, written independently, reads it the same
        hub = load_hub_config(folder)
        assert (hub.corpus, hub.queries, hub.qrels) == (data.corpus, data.queries, data.qrels)


def test_write_task_dir_files(tmp_path: Path) -> None:
    beir = write_task_dir(ODD, tmp_path / "beir")
    assert (beir / "qrels" / "test.tsv").read_text() == "query-id\tcorpus-id\tscore\n2\t3\t2\n2\tdoc 1\t0\nqé\té\t1\n"
    assert json.loads((beir / "corpus.jsonl").read_text().split("\n")[1]) == {"_id": "é", "title": "", "text": "  padded  "}
    hub = write_task_dir(ODD, tmp_path / "hub", layout="longembed")
    assert [json.loads(x) for x in (hub / "qrels.jsonl").read_text().split("\n") if x] == [
        {"qid": "2", "doc_id": "3", "score": 2}, {"qid": "2", "doc_id": "doc 1", "score": 0}, {"qid": "qé", "doc_id": "é"}]
    assert json.loads((hub / "queries.jsonl").read_text().split("\n")[0]) == {"qid": "qé", "text": "first?"}


def test_write_task_dir_refusals(tmp_path: Path) -> None:
    write_task_dir(ODD, tmp_path / "once")
    with pytest.raises(FileExistsError, match="already holds corpus.jsonl"):
        write_task_dir(ODD, tmp_path / "once", layout="longembed")
    with pytest.raises(ValueError, match="layout must be one of"):
        write_task_dir(ODD, tmp_path / "x", layout="mteb")
    tab = RetrievalData({"d\t1": "x"}, {"q": "?"}, {"q": {"d\t1": 1}})
    with pytest.raises(ValueError, match="which qrels/test.tsv cannot hold: use layout='longembed'"):
        write_task_dir(tab, tmp_path / "tab")
    write_task_dir(tab, tmp_path / "tab-hub", layout="longembed")
    passages = RetrievalData({"p": "ab"}, {"q": "?"}, {"q": {"p": 1}}, contexts={"c": "abc"},
                             passages={"p": Passage("c", 0, 2)})
    with pytest.raises(ValueError, match="a passage task"):
        write_task_dir(passages, tmp_path / "passages")
