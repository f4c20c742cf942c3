"""longembed index --engine ray writes the local build's table (issue 42)."""

from __future__ import annotations

from pathlib import Path

import lancedb
import numpy as np
from conftest import build_tiny, words

from longembed.retrieval.strategy import Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.ray_build import RayBuild
from longembed.search.sources import Document


def rows(index: Path | str) -> dict[str, list]:
    table = lancedb.connect(str(index)).open_table("chunks")
    table.checkout("complete")
    return table.to_arrow().to_pydict()


def test_ray_with_two_actors_gives_the_local_builds_rows(ray_runtime, tmp_path: Path) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    strategy = Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=True)
    docs = [Document(f"d{i:02d}", f"d{i:02d}.txt", words(50 + 9 * i, i)) for i in range(20)]
    build_index(tmp_path / "local", docs, strategy, batch_documents=4, show_progress=False, log=None)
    build_index(tmp_path / "ray", docs, strategy, batch_documents=4, engine=RayBuild(actors=2),
                show_progress=False, log=None)
    local, on_ray = rows(tmp_path / "local"), rows(tmp_path / "ray")
    for column in local:
        if column == "vector":  # the same batches; an actor's torch runs with 1 thread
            np.testing.assert_allclose(np.asarray(on_ray[column]), np.asarray(local[column]), atol=1e-6)
        else:
            assert on_ray[column] == local[column], column
    question = words(4, 99)
    assert [r.id for r in open_index(tmp_path / "ray").search(question, k=5).results] == \
        [r.id for r in open_index(tmp_path / "local").search(question, k=5).results]


def test_ray_writes_the_local_builds_rows_to_an_index_on_s3(ray_runtime, s3_index: str, tmp_path: Path) -> None:
    """``--engine ray`` with ``--index s3://...``: the driver writes the actors' rows to the object store
    (a real S3 API server, ``moto_server``), the rows a local build writes to a folder."""
    model = build_tiny("bert", tmp_path / "bert")
    strategy = Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=True)
    docs = [Document(f"d{i:02d}", f"d{i:02d}.txt", words(50 + 9 * i, i)) for i in range(12)]
    build_index(tmp_path / "local", docs, strategy, batch_documents=4, show_progress=False, log=None)
    report = build_index(s3_index, docs, strategy, batch_documents=4, engine=RayBuild(actors=2),
                         show_progress=False, log=None)
    assert report.documents == 12
    local, on_s3 = rows(tmp_path / "local"), rows(s3_index)
    for column in local:
        if column == "vector":
            np.testing.assert_allclose(np.asarray(on_s3[column]), np.asarray(local[column]), atol=1e-6)
        else:
            assert on_s3[column] == local[column], column
