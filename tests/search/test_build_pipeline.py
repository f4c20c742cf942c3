"""The index build's pipeline (issue 53, item 5): stage times in the report, tokenizing overlapped with
encoding, appends grouped, and the rows bit for bit those of the sequential build."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import lancedb
import numpy as np
import pytest
from conftest import build_tiny, words

from longembed.cli.main import main
from longembed.retrieval.strategy import Strategy
from longembed.search.build import build_index
from longembed.search.embedding import DocumentEmbedder
from longembed.search.sources import Document
from longembed.search.stages import STAGES
from longembed.search.strategy_encoder import load_strategy_encoder


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


STRATEGIES = {
    "naive chunks": dict(granularity="chunks", chunking="tokens:16", late=False),
    "late chunks": dict(granularity="chunks", chunking="tokens:16", late=True),
    "documents": {},
}


def strategy(model: Path, kind: str = "naive chunks") -> Strategy:
    return Strategy(str(model), "pi", 128, **STRATEGIES[kind])


def documents(n: int, length: int = 60) -> list[Document]:
    return [Document(f"doc{i:04d}", f"doc{i:04d}.txt", words(length + i * 5 % 41, i)) for i in range(n)]


def table_rows(index: Path) -> dict[str, list]:
    table = lancedb.connect(str(index)).open_table("chunks")
    table.checkout("complete")
    return table.to_arrow().to_pydict()


def appends(index: Path) -> int:
    """The Lance versions the build's appends made (the first version is the empty table)."""
    table = lancedb.connect(str(index)).open_table("chunks")
    return sum(1 for v in table.list_versions() if v["version"] > 1)


def test_the_report_says_where_the_wall_time_went(model: Path, tmp_path: Path) -> None:
    report = build_index(tmp_path / "index", documents(12), strategy(model), batch_documents=4,
                         show_progress=False, log=None)
    times = report.times
    assert set(times.seconds) == set(STAGES)
    for stage in ("loading", "planning", "encoding", "writing", "finishing"):
        assert times.seconds[stage] > 0, stage
    assert times.tokens > 12 * 60  # every token the model read, prompt and special tokens included
    # the stages are timed on the build's thread, one after another: together they are its wall time
    assert sum(times.seconds.values()) == pytest.approx(times.wall, rel=0.05, abs=0.05)
    assert "encoding" in report.summary() and "tokens/s" in report.summary()


def test_the_cli_times_reading_and_prints_the_breakdown(model: Path, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for document in documents(5):
        (folder / document.source).write_text(document.text, encoding="utf-8")
    assert main(["index", str(folder), "--index", str(tmp_path / "index"), "--model", str(model), "--method", "pi",
                 "--max-length", "128", "--no-estimate"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("time "))
    assert float(re.search(r"reading ([0-9.e-]+) s", line).group(1)) > 0
    assert "encoding" in line and "tokens/s" in line


@pytest.mark.parametrize("prefetch", [0, 2])
def test_the_next_batch_is_tokenized_while_the_model_encodes_this_one(model: Path, tmp_path: Path,
                                                                       monkeypatch, prefetch: int) -> None:
    """The first batch's encoding waits (a bounded time) for the second batch's tokenizing to start: it
    starts only when tokenizing runs beside encoding (prefetch >= 1), never in the sequential build."""
    second_started, first_encoding = threading.Event(), threading.Event()
    prepare, embed = DocumentEmbedder.prepare, DocumentEmbedder.embed
    seen: list[bool] = []

    def watched_prepare(self, batch):
        if batch[0].id == "doc0004":
            second_started.set()
        return prepare(self, batch)

    def waiting_embed(self, prepared):
        if not first_encoding.is_set():
            first_encoding.set()
            seen.append(second_started.wait(timeout=5 if prefetch == 0 else 60))
        return embed(self, prepared)

    monkeypatch.setattr(DocumentEmbedder, "prepare", watched_prepare)
    monkeypatch.setattr(DocumentEmbedder, "embed", waiting_embed)
    report = build_index(tmp_path / "index", documents(12), strategy(model), batch_documents=4, prefetch=prefetch,
                         show_progress=False, log=None)
    assert seen == [prefetch > 0]
    assert report.documents == 12
    assert (report.times.background > 0) == (prefetch > 0)


@pytest.mark.parametrize("kind", list(STRATEGIES))
def test_the_pipelined_build_writes_the_sequential_builds_rows_bit_for_bit(model: Path, tmp_path: Path,
                                                                           kind: str) -> None:
    docs = documents(23)
    sequential = build_index(tmp_path / "sequential", docs, strategy(model, kind), batch_documents=3, prefetch=0,
                             write_rows=1, show_progress=False, log=None)
    pipelined = build_index(tmp_path / "pipelined", docs, strategy(model, kind), batch_documents=3,
                            show_progress=False, log=None)
    one, other = table_rows(tmp_path / "sequential"), table_rows(tmp_path / "pipelined")
    assert one.keys() == other.keys() and len(one["id"]) == sequential.chunks == pipelined.chunks
    for column in one:
        if column == "vector":
            np.testing.assert_array_equal(np.asarray(one[column]), np.asarray(other[column]))
        else:
            assert one[column] == other[column], column
    # and they are the vectors the encoder gives the documents in one call, as eval computes them
    encoder = load_strategy_encoder(strategy(model, kind))
    rows = DocumentEmbedder(strategy(model, kind), encoder).rows(docs)
    np.testing.assert_allclose(np.asarray(other["vector"]), rows.vectors, atol=1e-6)
    assert other["text"] == rows.texts


def test_appends_are_grouped_into_large_ones_of_whole_documents(model: Path, tmp_path: Path) -> None:
    docs = documents(23)
    build_index(tmp_path / "one-per-batch", docs, strategy(model), batch_documents=3, write_rows=1,
                show_progress=False, log=None)
    build_index(tmp_path / "grouped", docs, strategy(model), batch_documents=3, show_progress=False, log=None)
    assert appends(tmp_path / "one-per-batch") == 8
    assert appends(tmp_path / "grouped") == 1  # 23 short documents: fewer rows than one group holds


def test_bad_pipeline_settings_are_one_line_errors(model: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        build_index(tmp_path / "index", documents(2), strategy(model), prefetch=-1, show_progress=False, log=None)
    with pytest.raises(ValueError, match="write_rows"):
        build_index(tmp_path / "index", documents(2), strategy(model), write_rows=0, show_progress=False, log=None)
