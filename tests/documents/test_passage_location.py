"""The location beside a result ("page 3", "Handbook > Timetables > Night sailings") is where the SHOWN
passage is (the best sentence window for the query), not where the chunk that scored the document starts:
a chunk that spans page breaks or sections must not move the label away from the passage.

A BM25 index has one chunk per document (the whole document), so every multi-page PDF's chunk spans its
page breaks; the expected label is the reader's own map at the passage's span (``location_of``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.documents import location_of, read_document
from longembed.search import open_index

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("passage-location")
    docs = root / "docs"
    docs.mkdir()
    for name in ("manual.pdf", "handbook.docx"):
        shutil.copy(FIXTURES / name, docs / name)
    (docs / "recipes.md").write_text("# Kitchen recipes\n\n## Breads\n\nFeed the starter twice a day with rye flour "
                                     "and water.\n\n## Soups\n\nRed lentils cook in twenty minutes; add cumin and "
                                     "lemon at the end.\n", encoding="utf-8")
    index = root / "index"
    assert main(["index", str(docs), "--index", str(index), "--model", "bm25"]) == 0
    return docs, index


QUESTIONS = [  # (question, the document that answers it, the label of the sentence that does)
    ("never rely on the predictions in a storm surge", "manual.pdf", "page 3"),
    ("mean spring range at Port Ellen gauge", "manual.pdf", "page 2"),
    ("how many certified deck officers on night sailings", "handbook.docx",
     "Ferry Operations Handbook > Timetables > Night sailings"),
    ("how long do red lentils cook", "recipes.md", "Kitchen recipes > Soups"),
]


@pytest.mark.parametrize(("question", "doc_id", "label"), QUESTIONS)
def test_the_label_is_the_shown_passages(indexed, question: str, doc_id: str, label: str) -> None:
    docs, index = indexed
    top = open_index(index).search(question, k=1).results[0]
    assert top.id == doc_id
    passage = top.passage
    expected, page = location_of(read_document(docs / doc_id).locations, passage.start, passage.end)
    assert expected == label  # the window chosen is the one that answers (else the test says nothing)
    assert (passage.location, passage.page) == (expected, page)


def test_search_prints_the_passages_page_in_text_and_json(indexed, capsys) -> None:
    _, index = indexed
    question = "never rely on the predictions in a storm surge"
    assert main(["search", "--index", str(index), question, "-k", "1"]) == 0
    assert "[page 3, characters " in capsys.readouterr().out
    assert main(["search", "--index", str(index), question, "-k", "1", "--json"]) == 0
    passage = json.loads(capsys.readouterr().out)["results"][0]["passage"]
    assert (passage["location"], passage["page"]) == ("page 3", 3)
