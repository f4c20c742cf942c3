"""A cold ``longembed search`` on a dense index pays for the query's own needs (issue 53, item 3): the model's
stack, not the build's (LanceDB, the table store, the document readers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import build_tiny, words

from longembed.retrieval.strategy import Strategy
from longembed.search.build import build_index
from longembed.search.index import SearchIndex
from longembed.search.sources import Document
from longembed.search.strategy_encoder import load_strategy_encoder

#: what only a build needs: LanceDB (and pandas behind its dataset API), the table store, the document readers
BUILD_ONLY = ("lancedb", "pandas", "longembed.search.store", "longembed.search.embedding", "longembed.documents")


@pytest.mark.slow  # a process
def test_a_dense_search_from_the_command_line_imports_nothing_only_a_build_needs(tmp_path: Path) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    docs = [Document(f"d{i}.txt", f"d{i}.txt", words(30 + 5 * i, i) + (" harvest apple" if i == 2 else ""))
            for i in range(6)]
    strategy = Strategy(str(model), "truncate", None, granularity="chunks", chunking="tokens:16", late=False)
    build_index(tmp_path / "index", docs, strategy, show_progress=False, log=None)
    script = ("import sys; from longembed.cli.main import main; "
              f"status = main(['search', '--index', {str(tmp_path / 'index')!r}, 'harvest apple', '--json']); "
              f"print(repr(sorted(m for m in {BUILD_ONLY!r} if m in sys.modules))); sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    answer, loaded = done.stdout.strip().splitlines()
    assert json.loads(answer)["results"] and json.loads(answer)["index"]["systems"] == ["dense"]
    assert loaded == "[]"


@pytest.mark.slow  # a process
def test_a_dense_search_with_a_saved_query_program_never_imports_transformers(tmp_path: Path) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    docs = [Document(f"d{i}.txt", f"d{i}.txt", words(30 + 5 * i, i) + (" harvest apple" if i == 2 else ""))
            for i in range(6)]
    strategy = Strategy(str(model), "truncate", None, granularity="chunks", chunking="tokens:16", late=False)
    build_index(tmp_path / "index", docs, strategy, show_progress=False, log=None)
    script = ("import sys; from longembed.cli.main import main; "
              f"status = main(['search', '--index', {str(tmp_path / 'index')!r}, 'harvest apple', '--json', "
              "'--passages', 'chunk']); print(repr('transformers' in sys.modules)); sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    answer, loaded = done.stdout.strip().splitlines()
    assert loaded == "False"
    in_process = SearchIndex(tmp_path / "index", encoder=load_strategy_encoder(strategy))  # the transformers path
    expected = in_process.search("harvest apple", passages="chunk").to_dict()["results"]
    got = json.loads(answer)["results"]
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    assert [r["score"] for r in got] == pytest.approx([r["score"] for r in expected], abs=1e-5)
