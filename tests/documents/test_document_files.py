"""A served index hands out a PDF hit's original file at ``/search/file/<id>`` (the page links it with
``#page=N``), and nothing else on disk: not an id it does not hold, not a path spelled as an id, not a
document that is not a PDF, not a file moved, replaced or made a symlink since the build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import LO, build_tiny
from fastapi.testclient import TestClient

from longembed import load_encoder
from longembed.cli.main import main
from longembed.search import open_index
from longembed.search.document_files import DOCUMENT_FILES, read_document_files
from longembed.serving import ServerSettings, create_app
from longembed.serving.search_route import add_search_routes

FIXTURES = Path(__file__).resolve().parent / "fixtures"
KEY = "s3cret"


def make_docs(root: Path) -> Path:
    """``root/docs``: a PDF in a subfolder, an HTML page, a locked PDF, a text file, a jsonl; and a PDF
    beside the folder, not in it."""
    folder = root / "docs"
    (folder / "manuals").mkdir(parents=True)
    shutil.copy(FIXTURES / "manual.pdf", folder / "manuals" / "tide manual.pdf")
    shutil.copy(FIXTURES / "docs-page.html", folder / "page.html")
    shutil.copy(FIXTURES / "encrypted.pdf", folder / "locked.pdf")
    (folder / "notes.txt").write_text("The canteen sells tea.\n")
    (folder / "more.jsonl").write_text('{"id": "j1", "text": "a line of a jsonl file"}\n')
    (root / "secret.pdf").write_bytes((FIXTURES / "hyphenated.pdf").read_bytes())  # beside docs/, not in it
    return folder


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return make_docs(tmp_path)


def build(docs: Path, index: Path) -> int:
    return main(["index", str(docs), "--index", str(index), "--model", "bm25"])


def test_the_index_records_each_document_files_absolute_path(docs: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    assert build(docs, index) == 3  # locked.pdf could not be read
    files = read_document_files(index)
    assert files == {"manuals/tide manual.pdf": str((docs / "manuals" / "tide manual.pdf").resolve()),
                     "notes.txt": str((docs / "notes.txt").resolve()),
                     "page.html": str((docs / "page.html").resolve())}
    assert (index / DOCUMENT_FILES).is_file()


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory):
    return load_encoder(build_tiny("bert", tmp_path_factory.mktemp("bert") / "bert"), "pi", max_length=2 * LO)


def serve(docs: Path, index: Path, encoder) -> TestClient:
    build(docs, index)
    app = create_app(encoder, ServerSettings(allowed_hosts=("testserver",), api_key=KEY))
    add_search_routes(app, open_index(index))
    return TestClient(app, headers={"Authorization": f"Bearer {KEY}"})


@pytest.fixture
def served(docs: Path, tmp_path: Path, encoder):
    """A server of its own: the test changes the files under it."""
    with serve(docs, tmp_path / "index", encoder) as client:
        yield client


@pytest.fixture(scope="module")
def served_unchanged(tmp_path_factory: pytest.TempPathFactory, encoder):
    """One server for the tests that only ask it (built once for the module)."""
    root = tmp_path_factory.mktemp("served")
    with serve(make_docs(root), root / "index", encoder) as client:
        yield client


def test_a_pdf_hit_links_its_file_which_the_server_hands_out(served: TestClient, docs: Path) -> None:
    answer = served.post("/search", json={"query": "mean spring range Port Ellen gauge", "k": 10}).json()
    first = answer["results"][0]
    assert first["id"] == "manuals/tide manual.pdf"
    assert first["file"] == "/search/file/manuals/tide%20manual.pdf"
    assert all("file" not in r for r in answer["results"][1:])  # a text file, an HTML page, a jsonl line: no file
    response = served.get(first["file"])
    assert response.status_code == 200 and response.headers["content-type"] == "application/pdf"
    assert response.content == (docs / "manuals" / "tide manual.pdf").read_bytes()
    assert response.headers["x-content-type-options"] == "nosniff"
    assert served.get(first["file"], headers={"Authorization": "Bearer wrong"}).status_code == 401


@pytest.mark.parametrize("doc_id", [
    "unknown.pdf",                      # no such document
    "../secret.pdf", "..%2Fsecret.pdf",  # a path beside the folder, spelled as an id
    "%2Fetc%2Fpasswd", "manuals/../../secret.pdf",
    "page.html", "notes.txt", "j1",      # documents, but no PDF file (an HTML page would run in this origin)
    "locked.pdf",                       # a file the build could not read: not in the index
])
def test_nothing_else_on_disk_is_reachable(served_unchanged: TestClient, doc_id: str) -> None:
    response = served_unchanged.get("/search/file/" + doc_id)
    assert response.status_code == 404, response.text
    assert b"%PDF" not in response.content


def test_a_file_moved_or_replaced_since_the_build_is_not_handed_out(served: TestClient, docs: Path,
                                                                    tmp_path: Path) -> None:
    pdf = docs / "manuals" / "tide manual.pdf"
    address = "/search/file/manuals/tide%20manual.pdf"
    pdf.unlink()
    pdf.symlink_to(tmp_path / "secret.pdf")  # a symlink to a PDF outside the folder
    assert served.get(address).status_code == 404
    pdf.unlink()
    pdf.write_text("not a PDF any more")
    assert served.get(address).status_code == 404
    pdf.unlink()
    assert served.get(address).status_code == 404
    hits = served.post("/search", json={"query": "mean spring range Port Ellen gauge"}).json()["results"]
    assert all("file" not in r for r in hits)
