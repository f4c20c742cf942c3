"""longembed index: incremental builds, refused strategy changes, crash safety, bad input (issue 42)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import lancedb
import numpy as np
import pytest
from conftest import build_tiny, words

from longembed.cli.main import main
from longembed.documents import location_of, read_document
from longembed.retrieval.strategy import Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.sources import Document, SourceOptions, read_sources


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def chunked(model: Path) -> Strategy:
    return Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=False)


def documents(n: int, seed: int = 0, length: int = 60) -> list[Document]:
    return [Document(f"doc{i:04d}", f"doc{i:04d}.txt", words(length + i % 7, seed + i)) for i in range(n)]


def table_rows(index: Path) -> dict[str, list]:
    """Every row of the index's complete version, as columns (vectors as lists)."""
    table = lancedb.connect(str(index)).open_table("chunks")
    table.checkout("complete")
    return table.to_arrow().to_pydict()


def test_a_rerun_embeds_only_what_changed_and_counts_it(model: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    docs = documents(6)
    first = build_index(index, docs, chunked(model), show_progress=False, log=None)
    assert first.plan.counts() == {"added": 6, "changed": 0, "removed": 0, "unchanged": 0}
    changed = [docs[0], Document(docs[1].id, docs[1].source, "the new text of it"), *docs[3:], documents(7)[6]]
    second = build_index(index, changed, chunked(model), show_progress=False, log=None)
    assert second.plan.counts() == {"added": 1, "changed": 1, "removed": 1, "unchanged": 4}
    assert [d.id for d in second.plan.to_embed] == ["doc0001", "doc0006"]
    fresh = build_index(tmp_path / "fresh", changed, chunked(model), show_progress=False, log=None)
    assert fresh.chunks == second.chunks
    rerun, rebuilt = table_rows(index), table_rows(tmp_path / "fresh")
    order = sorted(range(len(rerun["id"])), key=lambda r: (rerun["id"][r], rerun["chunk"][r]))
    fresh_order = sorted(range(len(rebuilt["id"])), key=lambda r: (rebuilt["id"][r], rebuilt["chunk"][r]))
    for column in rerun:  # the same rows, whichever order the updates left them in
        got, expected = [rerun[column][r] for r in order], [rebuilt[column][r] for r in fresh_order]
        if column == "vector":  # batched with other neighbours: equal up to float noise
            np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-5)
        else:
            assert got == expected, column


def test_another_strategy_or_model_is_refused_unless_rebuild(model: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    build_index(index, documents(3), chunked(model), show_progress=False, log=None)
    with pytest.raises(ValueError, match="built with another strategy.*granularity.*--rebuild"):
        build_index(index, documents(3), Strategy(str(model), "pi", 128), show_progress=False, log=None)
    other = build_tiny("bert", tmp_path / "other", hidden_dropout_prob=0.2)  # another model folder's files
    with pytest.raises(ValueError, match="model"):
        build_index(index, documents(3), Strategy(str(other), "pi", 128, granularity="chunks",
                                                        chunking="tokens:16", late=False), show_progress=False, log=None)
    assert open_index(index).facts()["documents"] == 3  # nothing lost
    report = build_index(index, documents(3), Strategy(str(model), "pi", 128), rebuild=True,
                         show_progress=False, log=None)
    assert report.chunks == 3 and open_index(index).strategy.name == "pi-128"


@pytest.mark.slow
def test_a_killed_build_reruns_to_the_uninterrupted_builds_rows_and_vectors(model: Path, tmp_path: Path) -> None:
    """kill -9 a build as soon as it has appended a batch, rerun it: the table equals an uninterrupted
    build's, row for row (in order) and vector for vector; a search meanwhile sees no half build."""
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i:04d}", "text": words(80 + i % 13, i)}) + "\n" for i in range(1500)))
    flags = ["--model", str(model), "--method", "pi", "--max-length", "128", "--granularity", "chunks",
             "--chunking", "tokens:16", "--late", "--no-estimate"]
    killed = tmp_path / "killed"
    versions = killed / "chunks.lance" / "_versions"
    command = [sys.executable, "-m", "longembed.cli.main", "index", str(corpus), "--index", str(killed), *flags]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 600
    while process.poll() is None and time.monotonic() < deadline:
        if versions.is_dir() and len(list(versions.glob("*.manifest"))) >= 3:  # created + two appends
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    assert process.wait() == -signal.SIGKILL, "the build finished before it could be killed"
    with pytest.raises(FileNotFoundError, match="no build of this index has finished"):
        open_index(killed)
    assert main(["index", str(corpus), "--index", str(killed), *flags]) == 0
    assert main(["index", str(corpus), "--index", str(tmp_path / "whole"), *flags]) == 0
    rerun, whole = table_rows(killed), table_rows(tmp_path / "whole")
    assert rerun.keys() == whole.keys()
    for column in rerun:
        if column == "vector":
            np.testing.assert_array_equal(np.asarray(rerun[column]), np.asarray(whole[column]))
        else:
            assert rerun[column] == whole[column], column


def test_a_search_during_a_build_sees_the_last_complete_version(model: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    build_index(index, documents(4), chunked(model), show_progress=False, log=None)
    table = lancedb.connect(str(index)).open_table("chunks")
    table.delete("id = 'doc0000'")  # what a build in progress does before it appends
    assert open_index(index).facts()["documents"] == 4


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff not text", r"bad\.txt:1: not UTF-8"),
    (b"\xff\xfe not text", r"bad\.txt: not UTF-16 text although it starts with a UTF-16 byte-order mark"),
    (b"   \n", r"bad\.txt: the document is empty"),
])
def test_bad_files_are_listed_with_their_reason_and_the_rest_is_indexed(model: Path, tmp_path: Path, content: bytes,
                                                                        message: str, capsys) -> None:
    """A file that cannot be read is listed (on stdout and in reading-report.json), the others are
    indexed, the exit code is 3; once fixed, a rerun embeds that file alone."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(words(30))
    index = tmp_path / "index"
    assert main(["index", str(docs), "--index", str(index), "--model", "bm25"]) == 0
    (docs / "bad.txt").write_bytes(content)
    (docs / "new.txt").write_text(words(20))
    capsys.readouterr()
    assert main(["index", str(docs), "--index", str(index), "--model", "bm25"]) == 3
    out = capsys.readouterr().out
    assert "could not read 1 file(s)" in out and re.search(message, out), out
    report = json.loads((index / "reading-report.json").read_text())
    assert [f["id"] for f in report["failed"]] == ["bad.txt"] and re.search(message, report["failed"][0]["reason"])
    assert open_index(index).facts()["documents"] == 2
    (docs / "bad.txt").write_text(words(10))
    assert main(["index", str(docs), "--index", str(index), "--model", "bm25"]) == 0
    assert "1 added, 0 changed, 0 removed, 2 unchanged" in capsys.readouterr().out
    assert json.loads((index / "reading-report.json").read_text())["failed"] == []
    assert open_index(index).facts()["documents"] == 3


def test_duplicate_ids_unreadable_files_and_bad_lines_name_the_place(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps({"id": "x", "text": "one"}) + "\n" + json.dumps({"id": "y", "text": "two"}) + "\n")
    second.write_text("\n" + json.dumps({"id": "x", "text": "three"}) + "\n")
    with pytest.raises(ValueError, match=r"b\.jsonl: document id 'x' is given twice \(first by .*a\.jsonl\)"):
        read_sources([first, second])
    second.write_text(json.dumps({"id": "z", "body": "three"}) + "\n")
    with pytest.raises(ValueError, match=r"b\.jsonl:1: no 'text' field \(set --text-field\)"):
        read_sources([second])
    assert [d.text for d in read_sources([second], SourceOptions(text_field="body"))] == ["three"]
    second.write_text(json.dumps({"id": "z", "text": ""}) + "\n")
    with pytest.raises(ValueError, match=r"b\.jsonl:1: field 'text' is empty"):
        read_sources([second])
    if os.geteuid() != 0:  # root reads anything
        second.chmod(0)
        with pytest.raises(OSError, match=r"b\.jsonl: cannot be read"):
            read_sources([second])
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        read_sources([tmp_path / "missing"])


def test_a_folder_gives_one_document_per_text_file_with_its_relative_path(tmp_path: Path) -> None:
    (tmp_path / "essays").mkdir()
    (tmp_path / "essays" / "one.txt").write_text("first essay")
    (tmp_path / "notes.md").write_text("a note")
    (tmp_path / "skip.csv").write_text("not read")
    (tmp_path / "lines.jsonl").write_text(json.dumps({"_id": "j1", "text": "a line"}) + "\n")
    found = read_sources([tmp_path])
    assert [(d.id, d.text) for d in found] == [("essays/one.txt", "first essay"), ("j1", "a line"), ("notes.md", "a note")]
    assert [d.id for d in read_sources([tmp_path], SourceOptions(glob="**/*.txt"))] == ["essays/one.txt"]


def test_a_beir_task_folder_gives_its_corpus_not_its_queries() -> None:
    folder = Path(__file__).parent / "data" / "tiny_beir"
    assert [d.id for d in read_sources([folder])] == [d.id for d in read_sources([folder / "corpus.jsonl"])]


def test_a_missing_index_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert main(["search", "--index", str(tmp_path / "nowhere"), "a question"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("longembed search: error: --index") and "no index there" in error


FIXTURES = Path(__file__).resolve().parents[1] / "documents" / "fixtures"


def mixed_folder(folder: Path) -> Path:
    """PDF, HTML, Word, Markdown and text files, three PDFs that cannot be read, and a file of no document type."""
    folder.mkdir()
    for name in ("manual.pdf", "handbook.docx", "docs-page.html", "encrypted.pdf", "scanned.pdf", "truncated.pdf"):
        (folder / name).write_bytes((FIXTURES / name).read_bytes())
    (folder / "locks.md").write_text("# Lock gates\n\n## Maintenance\n\nThe lock gates are greased every March.\n")
    (folder / "notes.txt").write_text("Buoys are painted red and green.\n")
    (folder / "budget.xlsx").write_bytes(b"PK\x03\x04 not read")
    return folder


def test_a_mixed_folder_is_indexed_with_each_chunks_page_or_heading_path(model: Path, tmp_path: Path, capsys) -> None:
    docs = mixed_folder(tmp_path / "docs")
    index = tmp_path / "index"
    flags = ["--model", str(model), "--method", "pi", "--max-length", "128", "--granularity", "chunks",
             "--chunking", "tokens:16", "--naive"]
    assert main(["index", str(docs), "--index", str(index), *flags]) == 3
    out = capsys.readouterr().out
    assert "skipped 1 file(s) that are not documents longembed reads (1 .xlsx)" in out
    for name in ("encrypted.pdf: encrypted", "scanned.pdf: no text layer", "truncated.pdf: not a readable PDF"):
        assert name in out
    rows = table_rows(index)
    manual = read_document(docs / "manual.pdf")
    for doc_id, start, end, location, page in zip(rows["id"], rows["start"], rows["end"], rows["location"],
                                                  rows["page"], strict=True):
        if doc_id == "manual.pdf":
            assert (location, page) == location_of(manual.locations, start, end) and page is not None
        elif doc_id in ("notes.txt",):
            assert (location, page) == (None, None)
        elif doc_id == "handbook.docx":
            assert location.startswith("Ferry Operations Handbook") and page is None
    pages = {p for i, p in zip(rows["id"], rows["page"], strict=True) if i == "manual.pdf"}
    assert pages == {1, 2, 3}
    result = next(r for r in open_index(index).search("Port Ellen spring range", k=10).results if r.id == "manual.pdf")
    assert result.passage.location.startswith("page") and result.passage.page in (1, 2, 3)
    assert main(["index", "--index", str(index), "--show-text", "manual.pdf"]) == 0
    assert capsys.readouterr().out == manual.text + "\n"


def test_a_document_that_becomes_unreadable_keeps_its_rows(model: Path, tmp_path: Path) -> None:
    """A file indexed once and damaged since is listed, not removed: no finished work is lost."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "manual.pdf").write_bytes((FIXTURES / "manual.pdf").read_bytes())
    (docs / "notes.txt").write_text(words(20))
    index = tmp_path / "index"
    assert main(["index", str(docs), "--index", str(index), "--model", "bm25"]) == 0
    (docs / "manual.pdf").write_bytes((FIXTURES / "truncated.pdf").read_bytes())
    assert main(["index", str(docs), "--index", str(index), "--model", "bm25"]) == 3
    assert open_index(index).facts()["documents"] == 2
