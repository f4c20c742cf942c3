"""Issue 40 over HTTP: a refusal comes early, as 429/503 with a JSON error and Retry-After, and a
SIGTERM shutdown keeps its promise (at most --shutdown-seconds; work that can finish finishes; the
rest gets a clean 503, never a 500 or a traceback)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from conftest import real_model_folder, words
from fastapi.testclient import TestClient

from longembed import load_encoder
from longembed.serving import ServerSettings, bound_port, build_server, create_app
from longembed.serving.service import QUEUE_SECONDS_HEADER

pytestmark = pytest.mark.slow  # the real all-MiniLM-L6-v2, a server process and live servers

SLOW_SERVER = Path(__file__).with_name("slow_server.py")


@pytest.fixture(scope="module")
def minilm():
    return real_model_folder("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def encoder(minilm):
    return load_encoder(minilm, "pi", max_length=1024)


def test_refusals_come_at_once_with_retry_after_and_a_json_error(encoder) -> None:
    """The model is held on a first request.  A short request with a 0.5 s limit and nothing measured
    yet is accepted, then answered 503 queue_timeout when its limit passes; once 100 tokens/s are
    measured, a long request with a 1 s limit is refused 429 at once (the running batch alone needs
    about 7 s) with Retry-After; a malformed limit is a 400 naming the header.  All of it while the
    first request is still in the model."""
    app = create_app(encoder, ServerSettings(max_batch_tokens=1024, queue_seconds=0, allowed_hosts=("testserver",)))
    batcher = app.state.service.batcher
    release, real_encode = threading.Event(), batcher.encode

    def held(*args):
        release.wait(60)
        return real_encode(*args)

    batcher.encode = held
    long_text = words(600, 3)
    with TestClient(app) as http, ThreadPoolExecutor(1) as pool:
        first = pool.submit(http.post, "/embed", json={"inputs": [long_text]})
        while batcher.batches_formed == 0:
            time.sleep(0.01)
        expired = http.post("/embed", json={"inputs": ["hello"]}, headers={QUEUE_SECONDS_HEADER: "0.5"})
        assert expired.status_code == 503 and expired.json()["error_type"] == "Unhealthy"
        assert "waited its whole limit" in expired.json()["error"] and int(expired.headers["Retry-After"]) >= 1
        batcher.throughput.record(100, 1.0)  # as if measured: 100 tokens/s
        refused = http.post("/v1/embeddings", json={"model": "m", "input": long_text},
                            headers={QUEUE_SECONDS_HEADER: "1"})
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "queue_full"
        assert "would wait about" in refused.json()["error"]["message"]
        assert int(refused.headers["Retry-After"]) >= 2
        bad = http.post("/v1/embeddings", json={"model": "m", "input": "x"}, headers={QUEUE_SECONDS_HEADER: "soon"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == QUEUE_SECONDS_HEADER
        assert not first.done()  # every answer above came while the model was busy
        release.set()
        answer = first.result(60)
    assert answer.status_code == 200
    np.testing.assert_allclose(np.array(answer.json(), dtype=np.float32), encoder.encode([long_text]), atol=1e-6)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_with_work_queued_ends_within_shutdown_seconds_with_clean_answers(minilm, encoder) -> None:
    """A server subprocess whose model takes 1.5 s a batch gets eight one-batch requests (12 s of
    work), then SIGTERM with --shutdown-seconds 4.  It must exit within 4 s (plus the interpreter's
    exit), every client must get a 200 with its vectors or a 503 JSON error with Retry-After, never a
    500, and no traceback may reach the log.  Before issue 40, uvicorn waited its own 120 s first."""
    shutdown_seconds, port = 4.0, free_port()
    command = [sys.executable, str(SLOW_SERVER), str(minilm), str(port), str(shutdown_seconds), "1.5"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    texts = [words(500, 40 + i) for i in range(8)]
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        with ThreadPoolExecutor(len(texts)) as pool:
            pending = [pool.submit(httpx.post, base + "/embed", json={"inputs": [t]}, timeout=60) for t in texts]
            time.sleep(2.5)  # the first batch has run, the second is in the model, six wait
            start = time.monotonic()
            server.send_signal(signal.SIGTERM)
            output = server.communicate(timeout=shutdown_seconds + 20)[0]
            elapsed = time.monotonic() - start
            responses = [p.result(10) for p in pending]
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert elapsed < shutdown_seconds + 3, (elapsed, output)
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 503} and 200 in statuses and 503 in statuses, statuses
    for text, response in zip(texts, responses, strict=True):
        if response.status_code == 200:
            np.testing.assert_allclose(np.array(response.json(), dtype=np.float32), encoder.encode([text]), atol=1e-5)
        else:
            assert response.json()["error_type"] == "Unhealthy" and "shut" in response.json()["error"]
            assert int(response.headers["Retry-After"]) >= 1
    assert "Traceback" not in output and "Exception in ASGI application" not in output, output


def test_a_request_still_tokenizing_at_the_shutdown_deadline_gets_503_not_500(encoder) -> None:
    """Tokenizing takes 4 s (the planner is slowed down); shutdown begins while it runs, with
    --shutdown-seconds 1.  The client must get a 503 JSON error with Retry-After within the promise,
    not the bare 500 uvicorn sent when its graceful timeout cancelled the request (the old code)."""
    shutdown_seconds = 1.0
    server = build_server(encoder, ServerSettings(shutdown_seconds=shutdown_seconds), port=0, log_level="warning")
    service = server.config.app.state.service
    real_plan, planning = service.planner.plan, threading.Event()

    def slow_plan(*args):
        planning.set()
        time.sleep(4.0)
        return real_plan(*args)

    service.planner.plan = slow_plan
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{bound_port(server)}/v1/embeddings"
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, url, json={"model": "m", "input": "hello"}, timeout=30)
        assert planning.wait(30)
        start = time.monotonic()
        server.should_exit = True
        response = pending.result(30)
        answered = time.monotonic() - start
    thread.join(30)
    assert response.status_code == 503, (response.status_code, response.text)
    assert response.json()["error"]["code"] == "shutting_down" and "shut down" in response.json()["error"]["message"]
    assert int(response.headers["Retry-After"]) >= 1
    assert answered < shutdown_seconds + 1.0  # within the promise (uvicorn's own timeout is 1 s here)
    assert not thread.is_alive()
