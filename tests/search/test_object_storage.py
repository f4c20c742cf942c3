"""The index on S3 (issue 53, item 6), against a real S3 API server the tests start on 127.0.0.1
(``moto_server``): incremental, crash-safe and exact as on disk, one build at a time (a lock left by
a killed build is taken over once it expires), and servers that follow each complete build."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import boto3
import httpx
import lancedb
import numpy as np
import pytest
from conftest import build_tiny, words
from test_exactness import STRATEGIES, TASK, strategy_flags

import longembed.search
from longembed.cli.main import main
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.strategy import Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.following import FollowingIndex
from longembed.search.snapshot import MANIFEST
from longembed.search.sources import Document
from longembed.search.store import IndexBusyError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def chunked(model: Path) -> Strategy:
    return Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=True)


def documents(n: int, seed: int = 0) -> list[Document]:
    return [Document(f"doc{i:04d}", f"doc{i:04d}.txt", words(40 + i % 7, seed + i)) for i in range(n)]


def table_rows(index: str | Path) -> dict[str, list]:
    table = lancedb.connect(str(index)).open_table("chunks")
    table.checkout("complete")
    return table.to_arrow().to_pydict()


def objects(uri: str, under: str) -> list[str]:
    parsed = urlparse(uri)
    listed = boto3.client("s3").list_objects_v2(Bucket=parsed.netloc, Prefix=f"{parsed.path.strip('/')}/{under}")
    return [o["Key"] for o in listed.get("Contents", [])]


def test_a_build_on_s3_is_incremental_and_searches_as_the_same_index_on_disk(model: Path, s3_index: str,
                                                                            tmp_path: Path) -> None:
    docs = documents(8)
    first = build_index(s3_index, docs, chunked(model), batch_documents=3, show_progress=False, log=None)
    assert first.plan.counts() == {"added": 8, "changed": 0, "removed": 0, "unchanged": 0}
    changed = [docs[0], Document(docs[1].id, docs[1].source, "the new text of it"), *docs[3:], documents(9)[8]]
    second = build_index(s3_index, changed, chunked(model), batch_documents=3, show_progress=False, log=None)
    assert second.plan.counts() == {"added": 1, "changed": 1, "removed": 1, "unchanged": 6}
    assert [d.id for d in second.plan.to_embed] == ["doc0001", "doc0008"]
    assert objects(s3_index, "build.lock") == []  # released
    local = tmp_path / "local"
    build_index(local, docs, chunked(model), batch_documents=3, show_progress=False, log=None)
    build_index(local, changed, chunked(model), batch_documents=3, show_progress=False, log=None)
    on_s3, on_disk = table_rows(s3_index), table_rows(local)
    for column in on_disk:
        if column == "vector":
            np.testing.assert_array_equal(np.asarray(on_s3[column]), np.asarray(on_disk[column]))
        else:
            assert on_s3[column] == on_disk[column], column
    question = words(5, 3)
    assert open_index(s3_index).search(question, k=5).to_dict()["results"] == \
        open_index(local).search(question, k=5).to_dict()["results"]


def test_search_on_s3_writes_the_run_file_search_on_disk_writes_for_every_strategy(model: Path, s3_index: str,
                                                                                   tmp_path: Path, capsys) -> None:
    """On disk the run file scores what eval scored (test_exactness); on S3 it is that very file, searched
    from the version's saved files (downloaded into an empty cache: no table row read, no BM25 indexed)."""
    queries = str(TASK / "queries.jsonl")
    for name in STRATEGIES:
        flags = [*strategy_flags(name, model), "--no-estimate"]
        uri, folder = f"{s3_index}-{name}", tmp_path / name
        for index, run in ((uri, tmp_path / f"{name}.s3.trec"), (str(folder), tmp_path / f"{name}.disk.trec")):
            assert main(["index", str(TASK / "corpus.jsonl"), "--index", index, *flags]) == 0
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("LONGEMBED_INDEX_CACHE", str(tmp_path / f"{name}-cache"))  # another machine's
                patch.setattr(longembed.search, "read_table_snapshot", refuse)
                patch.setattr(BM25Model, "index", refuse)
                assert main(["search", "--index", index, "--queries", queries, "--run", str(run)]) == 0
        assert (tmp_path / f"{name}.s3.trec").read_text() == (tmp_path / f"{name}.disk.trec").read_text(), name
        assert len(list((tmp_path / f"{name}-cache").glob(f"*/*/{MANIFEST}"))) == 1, name  # the S3 index's
    assert "not written to object storage" in capsys.readouterr().out


def refuse(*args: object) -> None:
    raise AssertionError("a search read the table's rows or indexed BM25 again")


BUILD = """
import sys
from longembed.retrieval.strategy import Strategy
from longembed.search.build import build_index
from longembed.search.sources import Document
from conftest import words
docs = [Document(f"d{i:04d}", f"d{i:04d}.txt", words(60 + i % 13, i)) for i in range(int(sys.argv[3]))]
strategy = Strategy(sys.argv[2], "pi", 128, granularity="chunks", chunking="tokens:16", late=True)
build_index(sys.argv[1], docs, strategy, batch_documents=4, write_rows=8, show_progress=False, log=None,
            lock_expiry=float(sys.argv[4]))  # write_rows: an append per batch, so it can be killed between two
"""


def test_a_killed_build_on_s3_refuses_a_second_leaves_its_lock_to_expire_and_reruns_to_the_whole_build(
        model: Path, s3_index: str, tmp_path: Path) -> None:
    count, expiry = 200, 4.0
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    process = subprocess.Popen([sys.executable, "-c", BUILD, s3_index, str(model), str(count), str(expiry)], env=env,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if len(objects(s3_index, "chunks.lance/_versions/")) >= 3:  # created + two appends
            break
        time.sleep(0.05)
    assert process.poll() is None, "the build finished before it could be killed: " + process.communicate()[1]
    strategy = chunked(model)
    docs = [Document(f"d{i:04d}", f"d{i:04d}.txt", words(60 + i % 13, i)) for i in range(count)]
    with pytest.raises(IndexBusyError, match=f"--index {s3_index}: another longembed index is building"):
        build_index(s3_index, docs, strategy, batch_documents=4, show_progress=False, log=None)
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    killed_at = time.monotonic()
    with pytest.raises(FileNotFoundError, match="no build of this index has finished"):
        open_index(s3_index)
    with pytest.raises(IndexBusyError, match=r"holds .*build\.lock for \d+ s more"):  # the dead build's lock
        build_index(s3_index, docs, strategy, batch_documents=4, show_progress=False, log=None)
    time.sleep(max(0.0, expiry - (time.monotonic() - killed_at)) + 0.5)
    rerun = build_index(s3_index, docs, strategy, batch_documents=4, show_progress=False, log=None)
    assert rerun.plan.resumed > 0  # it kept the killed build's rows
    build_index(tmp_path / "whole", docs, strategy, batch_documents=4, show_progress=False, log=None)
    on_s3, whole = table_rows(s3_index), table_rows(tmp_path / "whole")
    for column in whole:
        if column == "vector":
            np.testing.assert_array_equal(np.asarray(on_s3[column]), np.asarray(whole[column]))
        else:
            assert on_s3[column] == whole[column], column


def test_a_following_index_never_reads_a_half_built_version_and_moves_to_a_complete_one(
        model: Path, s3_index: str) -> None:
    build_index(s3_index, documents(5), chunked(model), show_progress=False, log=None)
    said: list[str] = []
    following = FollowingIndex(s3_index, check_every=0, log=said.append)
    assert following.facts()["documents"] == 5
    table = lancedb.connect(s3_index).open_table("chunks")
    table.delete("id = 'doc0000'")  # what a build in progress does before it appends
    assert following.search(words(4, 1), k=10).index["documents"] == 5 and not said
    build_index(s3_index, documents(7), chunked(model), show_progress=False, log=None)
    response = following.search(words(4, 1), k=10)
    assert response.index["documents"] == 7 and len(response.results) == 7
    assert len(said) == 1 and said[0].startswith(f"{s3_index}: now searching version {following.version} (was ")
    assert following.current.encoder is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(index: str, follow_seconds: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "longembed.cli.main", "serve", "--index", index, "--port", str(port), "--no-auth",
               "--follow-seconds", str(follow_seconds)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    return server, f"http://127.0.0.1:{port}"


def wait_until_up(server: subprocess.Popen, base: str) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("longembed serve --index did not start:\n" + server.communicate()[0])
            time.sleep(0.3)


def ask(base: str, query: str) -> dict:
    answer = httpx.post(base + "/search", json={"query": query, "k": 10}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def version(base: str) -> int:
    """The index version a server searches (``GET /search/index``)."""
    return int(httpx.get(base + "/search/index", timeout=60).json()["version"])


def test_two_servers_on_one_s3_index_answer_alike_and_move_to_each_complete_build(model: Path, s3_index: str) -> None:
    build_index(s3_index, documents(5), chunked(model), show_progress=False, log=None)
    servers = [serve(s3_index, 0.5), serve(s3_index, 3600)]  # one checks by itself, one only on SIGHUP
    try:
        for server, base in servers:
            wait_until_up(server, base)
        (_, checking), (hup_process, on_signal) = servers
        question = words(4, 2)
        first = ask(checking, question)
        assert first == ask(on_signal, question) and first["index"]["documents"] == 5
        lancedb.connect(s3_index).open_table("chunks").delete("id = 'doc0000'")  # a build half done
        time.sleep(1.0)
        assert ask(checking, question) == first  # never the half-built version
        build_index(s3_index, documents(7), chunked(model), show_progress=False, log=None)
        time.sleep(1.0)
        moved = ask(checking, question)
        assert moved["index"]["documents"] == 7 and len(moved["results"]) == 7
        assert version(checking) > version(on_signal)
        assert ask(on_signal, question) == first  # no check due for an hour
        hup_process.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert ask(on_signal, question) == moved and version(on_signal) == version(checking)
    finally:
        for server, _ in servers:
            server.send_signal(signal.SIGTERM)
        outputs = [server.communicate(timeout=60)[0] for server, _ in servers]
    assert all("Traceback" not in output for output in outputs), outputs
    assert "now searching version" in outputs[0] and "now searching version" in outputs[1]


def test_a_bucket_that_does_not_exist_is_one_line_naming_the_store_not_a_damaged_index(s3_index: str, capsys) -> None:
    missing = s3_index.replace("s3://", "s3://no-such-") + "/x"
    assert main(["search", "--index", missing, "a question"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"longembed search: error: --index {missing}: the object store did not answer")
    assert "check that the bucket exists" in error and "damaged" not in error and "\n" not in error
