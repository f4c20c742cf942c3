"""The embedding server: a live uvicorn on 127.0.0.1 called with the real ``openai`` client, TEI's
route, the overflow policies, every bad input's 4xx, metrics, dynamic batching and shutdown.

References are independent of the server: vectors come from ``encoder.encode`` directly, token counts
from the tokenizer, and a truncated input is checked against the plain model (method truncate at
Lo), which cuts the input itself.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest
from conftest import real_model_folder, words
from fastapi.testclient import TestClient

from longembed import load_encoder
from longembed.serving import ServerSettings, bound_port, build_server, create_app
from longembed.serving.batcher import DynamicBatcher, QueueFull, ShuttingDown

pytestmark = pytest.mark.slow  # a live uvicorn on the real all-MiniLM-L6-v2; the serve command's process

MAX_LENGTH = 1024  # Lt; MiniLM's window Lo is 512


@pytest.fixture(scope="module")
def minilm():
    return real_model_folder("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def encoder(minilm):
    return load_encoder(minilm, "pi", max_length=MAX_LENGTH)


def start(server) -> threading.Thread:
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    return thread


@pytest.fixture(scope="module")
def live(encoder):
    settings = ServerSettings(max_client_batch_size=16, max_body_bytes=400_000, max_batch_tokens=4096,
                              sub_batch_tokens=1024)  # a batch runs as several calls: answers must not change
    server = build_server(encoder, settings, port=0, log_level="warning")
    thread = start(server)
    yield f"http://127.0.0.1:{bound_port(server)}"
    server.should_exit = True
    thread.join(60)


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live + "/v1", api_key="unused", max_retries=0, timeout=120)


def n_tokens(encoder, text: str, prefix: str = "") -> int:
    return len(encoder.tokenizer(prefix + text)["input_ids"])


def text_of(encoder, low: int, high: int, seed: int) -> str:
    """A text whose input has between low and high tokens."""
    n = (low + high) // 2
    for _ in range(20):
        text = words(n, seed)
        count = n_tokens(encoder, text)
        if low <= count <= high:
            return text
        n = max(1, int(n * (low + high) / 2 / count))
    raise AssertionError("could not size the text")


@pytest.fixture(scope="module")
def texts(encoder):
    """Short inputs and one between Lo and Lt (only the extension method can embed it whole)."""
    return ["a short one", words(40, 1), text_of(encoder, 600, 900, 2)]


# ------------------------------------------------------------------ OpenAI route with the real client
def test_openai_float_and_base64_vectors_equal_encode(client, encoder, texts) -> None:
    expected = encoder.encode(texts)
    as_float = client.embeddings.create(input=texts, model="anything", encoding_format="float")
    chosen = client.embeddings.create(input=texts, model="anything")  # the client asks for base64 and decodes
    explicit = client.embeddings.create(input=texts, model="anything", encoding_format="base64")
    for response in (as_float, chosen):
        got = np.array([d.embedding for d in sorted(response.data, key=lambda d: d.index)], dtype=np.float32)
        np.testing.assert_allclose(got, expected, atol=1e-6)
    decoded = np.stack([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in explicit.data])
    np.testing.assert_allclose(decoded, expected, atol=1e-6)
    assert [d.index for d in as_float.data] == [0, 1, 2]
    assert as_float.model == "all-MiniLM-L6-v2" and as_float.object == "list"


def test_late_chunking_on_a_real_model_equals_encode_chunks(client, encoder) -> None:
    """Jina's convention with the real client: the chunks are consecutive pieces of one text (their
    whitespace kept), joined with nothing; one vector per piece, the document's tokens counted once."""
    pieces = ["Berlin is the capital and largest city of Germany.", " Its population is about 3.8 million,",
              " the most of any city in the European Union.", "\n\nThe city lies on the Spree."]
    document = "".join(pieces)
    bounds = np.cumsum([0] + [len(p) for p in pieces]).tolist()
    spans = [(bounds[i], bounds[i + 1]) for i in range(len(pieces))]
    (expected, _), = encoder.encode_chunks([document], chunking=[spans], late=True, prompt_name=None)
    response = client.embeddings.create(input=pieces, model="m", extra_body={"late_chunking": True})
    got = np.array([d.embedding for d in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)  # MiniLM normalizes: so do its chunks
    assert response.usage.prompt_tokens == n_tokens(encoder, document)
    assert not np.allclose(got, encoder.encode(pieces), atol=1e-3)  # not the pieces embedded alone


def test_usage_counts_the_tokenizers_tokens(client, encoder, texts) -> None:
    response = client.embeddings.create(input=texts, model="m")
    expected = sum(n_tokens(encoder, t) for t in texts)
    assert response.usage.prompt_tokens == expected == response.usage.total_tokens
    single = client.embeddings.create(input=texts[1], model="m")
    assert single.usage.prompt_tokens == n_tokens(encoder, texts[1]) and len(single.data) == 1


def test_overflow_extend_refuses_past_max_length(client, encoder) -> None:
    too_long = text_of(encoder, MAX_LENGTH + 100, MAX_LENGTH + 400, 3)
    with pytest.raises(openai.APIStatusError) as caught:
        client.embeddings.create(input=["fine", too_long], model="m")
    assert caught.value.status_code == 413
    message = caught.value.body["message"]
    assert f"{n_tokens(encoder, too_long)} tokens" in message and str(MAX_LENGTH) in message and "input[1]" in message
    assert caught.value.body["code"] == "context_length_exceeded"


def test_overflow_error_refuses_past_the_window(client, texts, encoder) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.embeddings.create(input=texts, model="m", extra_body={"overflow": "error"})
    assert caught.value.status_code == 413
    assert "Lo = 512" in caught.value.body["message"] and f"{n_tokens(encoder, texts[2])} tokens" in caught.value.body["message"]
    ok = client.embeddings.create(input=texts[:2], model="m", extra_body={"overflow": "error"})
    assert len(ok.data) == 2


def test_overflow_truncate_cuts_to_the_window_like_the_plain_model(client, live, encoder, minilm) -> None:
    long_text = text_of(encoder, MAX_LENGTH + 100, MAX_LENGTH + 400, 4)
    plain = load_encoder(minilm, "truncate")  # Lo = 512: cuts the input itself
    with pytest.warns(UserWarning, match="truncated"):
        expected = plain.encode([long_text, "short"])
    before = _metric(live, "longembed_inputs_truncated_total")
    raw = client.embeddings.with_raw_response.create(
        input=[long_text, "short"], model="m", encoding_format="float", extra_body={"overflow": "truncate"}
    )
    response = raw.parse()
    got = np.array([d.embedding for d in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert raw.headers["x-longembed-truncated"] == "0"
    assert response.model_extra["truncated"] == [0]
    assert response.usage.prompt_tokens == 512 + n_tokens(encoder, "short")  # the tokens actually embedded
    assert _metric(live, "longembed_inputs_truncated_total") == before + 1


BAD_OPENAI_BODIES = [
    ({"model": "m", "input": ""}, 400, "empty"),
    ({"model": "m", "input": ["ok", "   "]}, 400, "input[1]"),
    ({"model": "m", "input": ["ok", 123]}, 400, "input[1]"),
    ({"model": "m", "input": [[101, 102]]}, 400, "token ids"),
    ({"model": "m", "input": []}, 400, "empty list"),
    ({"model": "m", "input": {"text": "x"}}, 400, "string or a list"),
    ({"model": "m", "input": ["x"] * 17}, 413, "at most 16"),
    ({"model": "m"}, 400, "'input' is required"),
    ({"input": "x"}, 400, "'model'"),
    ({"model": "m", "input": "x", "encoding_format": "int8"}, 400, "encoding_format"),
    ({"model": "m", "input": "x", "dimensions": 128}, 400, "not supported by this model"),
    ({"model": "m", "input": "x", "dimensions": 1000}, 400, "more than the model's 384"),
    ({"model": "m", "input": "x", "dimensions": 0}, 400, "positive integer"),
    ({"model": "m", "input": "x", "prompt_name": "nope"}, 400, "unknown prompt_name"),
    ({"model": "m", "input": "x", "overflow": "chunk"}, 400, "'overflow' must be one of"),
]


@pytest.mark.parametrize(("body", "status", "fragment"), BAD_OPENAI_BODIES)
def test_bad_openai_requests_get_their_4xx_in_openais_shape(live, body, status, fragment) -> None:
    response = httpx.post(live + "/v1/embeddings", json=body, timeout=60)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error["message"] and error["type"] == "invalid_request_error"


def test_malformed_and_oversized_bodies(live) -> None:
    not_json = httpx.post(live + "/v1/embeddings", content=b"{not json", timeout=60,
                          headers={"content-type": "application/json"})
    assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["error"]["message"]
    not_object = httpx.post(live + "/v1/embeddings", json=["x"], timeout=60)
    assert not_object.status_code == 400
    huge = httpx.post(live + "/v1/embeddings", json={"model": "m", "input": "word " * 100_000}, timeout=60)
    assert huge.status_code == 413 and "400000" in huge.json()["error"]["message"]
    tei_huge = httpx.post(live + "/embed", json={"inputs": "word " * 100_000}, timeout=60)
    assert tei_huge.status_code == 413 and tei_huge.json()["error_type"] == "Validation"


# ------------------------------------------------------------------ TEI route, health, info, metrics
def test_tei_embed_equals_encode_with_its_options(live, encoder, texts) -> None:
    got = httpx.post(live + "/embed", json={"inputs": texts}, timeout=120)
    assert got.status_code == 200
    np.testing.assert_allclose(np.array(got.json(), dtype=np.float32), encoder.encode(texts), atol=1e-6)
    raw = httpx.post(live + "/embed", json={"inputs": texts[1], "normalize": False}, timeout=60)
    np.testing.assert_allclose(
        np.array(raw.json(), dtype=np.float32), encoder.encode([texts[1]], normalize_embeddings=False), atol=1e-5
    )
    assert abs(np.linalg.norm(raw.json()[0]) - 1) > 1e-3  # really not normalized
    cut = httpx.post(live + "/embed", json={"inputs": [texts[2]], "truncate": True}, timeout=60)
    assert cut.status_code == 200 and cut.headers["x-longembed-truncated"] == "0"


@pytest.mark.parametrize(
    ("body", "status"),
    [({"inputs": ""}, 422), ({"inputs": [1]}, 422), ({"text": "x"}, 422), ({"inputs": "x", "truncate": "yes"}, 422),
     ({"inputs": "x", "truncation_direction": "Left"}, 422), ({"inputs": ["x"] * 17}, 413)],
)
def test_bad_tei_requests_get_teis_error_shape(live, body, status) -> None:
    response = httpx.post(live + "/embed", json=body, timeout=60)
    assert response.status_code == status
    assert set(response.json()) == {"error", "error_type"} and response.json()["error_type"] == "Validation"


def test_health_and_info(live) -> None:
    assert httpx.get(live + "/health", timeout=10).json() == {"status": "ok"}
    info = httpx.get(live + "/info", timeout=10).json()
    assert (info["method"], info["original_length"], info["max_length"], info["embedding_dim"]) == ("pi", 512, 1024, 384)
    assert info["overflow"] == "extend" and info["max_client_batch_size"] == 16 and info["max_batch_tokens"] == 4096


def _metric(live: str, name: str, labels: str = "") -> float:
    """One sample of the server's /metrics (0 when it was never recorded)."""
    for line in httpx.get(live + "/metrics", timeout=10).text.splitlines():
        if not line.startswith("#") and line.rsplit(" ", 1)[0] == name + labels:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_requests_tokens_and_overflow(live, encoder) -> None:
    before_tokens = _metric(live, "longembed_tokens_total", '{route="tei"}')
    before_refused = _metric(live, "longembed_inputs_refused_total")
    before_over = _metric(live, "longembed_inputs_over_window_total")
    mid = text_of(encoder, 600, 900, 5)
    httpx.post(live + "/embed", json={"inputs": ["one", mid]}, timeout=60)
    httpx.post(live + "/embed", json={"inputs": [mid], "overflow": "error"}, timeout=60)
    assert _metric(live, "longembed_tokens_total", '{route="tei"}') == before_tokens + n_tokens(encoder, "one") + n_tokens(encoder, mid)
    assert _metric(live, "longembed_inputs_refused_total") == before_refused + 1
    assert _metric(live, "longembed_inputs_over_window_total") == before_over + 2
    text = httpx.get(live + "/metrics", timeout=10).text
    assert 'longembed_requests_total{route="tei",status="413"}' in text
    assert "longembed_request_seconds_bucket" in text and "longembed_batch_tokens_bucket" in text


# ------------------------------------------------------------------ concurrency, batching, shutdown
def test_concurrent_requests_are_batched_together_and_answered_in_order(live, encoder) -> None:
    inputs = [[words(8 + i, 100 + i), words(300 + 10 * i, 200 + i)] for i in range(12)]
    expected = [encoder.encode(pair) for pair in inputs]
    before = _metric(live, "longembed_batch_inputs_count")
    before_inputs = _metric(live, "longembed_batch_inputs_sum")
    with ThreadPoolExecutor(12) as pool:
        responses = list(pool.map(lambda pair: httpx.post(live + "/embed", json={"inputs": pair}, timeout=300), inputs))
    for response, want in zip(responses, expected, strict=True):
        assert response.status_code == 200
        np.testing.assert_allclose(np.array(response.json(), dtype=np.float32), want, atol=1e-6)
    batches = _metric(live, "longembed_batch_inputs_count") - before
    assert _metric(live, "longembed_batch_inputs_sum") - before_inputs == 24
    assert batches < 12  # inputs of different requests shared batches


def test_graceful_shutdown_finishes_accepted_requests(encoder) -> None:
    server = build_server(encoder, ServerSettings(), port=0, log_level="warning")
    thread = start(server)
    url = f"http://127.0.0.1:{bound_port(server)}/embed"
    batcher = server.config.app.state.service.batcher
    real_encode, running, release = batcher.encode, threading.Event(), threading.Event()

    def held(*args):
        running.set()
        release.wait(60)
        return real_encode(*args)

    batcher.encode = held
    slow = [words(700, 7 + i) for i in range(3)]
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, url, json={"inputs": slow}, timeout=300)
        assert running.wait(60)  # the request is in the model when shutdown starts
        server.should_exit = True
        time.sleep(0.5)
        assert not pending.done()
        with pytest.raises(httpx.TransportError):  # nothing new is accepted
            httpx.post(url, json={"inputs": "late"}, timeout=5)
        release.set()
        response = pending.result()
    thread.join(120)
    assert response.status_code == 200 and len(response.json()) == 3
    np.testing.assert_allclose(np.array(response.json(), dtype=np.float32), encoder.encode(slow), atol=1e-6)
    assert not thread.is_alive() and batcher.closing


def test_full_queue_answers_429_and_dimensions_when_allowed(encoder) -> None:
    settings = ServerSettings(max_batch_tokens=MAX_LENGTH, max_queue_tokens=MAX_LENGTH, allow_any_dimensions=True,
                              allowed_hosts=("testserver",))
    app = create_app(encoder, settings)
    service = app.state.service
    release = threading.Event()
    real_encode = service.batcher.encode

    def held(*args):
        release.wait(60)
        return real_encode(*args)

    service.batcher.encode = held
    with TestClient(app) as http, ThreadPoolExecutor(2) as pool:
        first = pool.submit(http.post, "/embed", json={"inputs": ["first " * 10]})  # taken by the worker, held
        while service.batcher.queued_inputs or not first.running():
            time.sleep(0.01)
        time.sleep(0.2)
        second = pool.submit(http.post, "/embed", json={"inputs": ["second " * 900]})  # waits in the queue
        while service.batcher.queued_inputs == 0:
            time.sleep(0.01)
        refused = http.post("/v1/embeddings", json={"model": "m", "input": "third " * 200})
        release.set()
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "queue_full"
        assert first.result().status_code == 200 and second.result().status_code == 200
        short = http.post("/v1/embeddings", json={"model": "m", "input": "cut me", "dimensions": 64}).json()
    vector = np.array(short["data"][0]["embedding"])
    full = encoder.encode("cut me")
    np.testing.assert_allclose(vector, full[:64] / np.linalg.norm(full[:64]), atol=1e-6)


def test_matryoshka_models_accept_their_sizes_only(minilm, encoder) -> None:
    app = create_app(encoder, ServerSettings(dimensions=(256, 128), allowed_hosts=("testserver",)))
    with TestClient(app) as http:
        assert http.post("/v1/embeddings", json={"model": "m", "input": "x", "dimensions": 128}).status_code == 200
        refused = http.post("/v1/embeddings", json={"model": "m", "input": "x", "dimensions": 100})
        assert refused.status_code == 400 and "[256, 128]" in refused.json()["error"]["message"]


# ------------------------------------------------------------------ the batcher alone
def fake_encode(texts, prompt, normalize, budget):
    return np.array([[len(t), hash(t) % 1000] for t in texts], dtype=np.float32)


def test_fifo_batcher_puts_the_oldest_input_first_and_fills_the_budget_in_order() -> None:
    seen: list[list[str]] = []
    gate = threading.Event()

    def encode(texts, prompt, normalize, budget):
        gate.wait(10)
        seen.append(list(texts))
        return fake_encode(texts, prompt, normalize, budget)

    batcher = DynamicBatcher(encode, max_batch_tokens=100, max_queue_tokens=10_000, scheduler="fifo")
    batcher.start()
    blocker = batcher.submit(["blocker"], [10])
    time.sleep(0.1)  # the worker holds the blocker; the rest queue up behind it
    long = batcher.submit(["long"], [90])
    shorts = [batcher.submit([f"s{i}"], [20]) for i in range(8)]
    gate.set()
    for future in (blocker, long, *shorts):
        future.result(10)
    batcher.close()
    assert seen[0] == ["blocker"]
    assert seen[1] == ["long"]  # the oldest goes first, though 5 short ones would fill more of the budget
    assert seen[2] == ["s0", "s1", "s2", "s3", "s4"] and seen[3] == ["s5", "s6", "s7"]
    np.testing.assert_array_equal(shorts[3].result(), fake_encode(["s3"], "", True, 0))


def test_batcher_refuses_when_full_keeps_order_and_drains_on_close() -> None:
    gate = threading.Event()
    batcher = DynamicBatcher(lambda *a: (gate.wait(10), fake_encode(*a))[1], max_batch_tokens=50, max_queue_tokens=60)
    batcher.start()
    first = batcher.submit(["held"], [10])
    time.sleep(0.1)
    queued = batcher.submit(["a", "bb", "ccc"], [20, 20, 20])  # queue: 60 tokens
    with pytest.raises(QueueFull, match="retry later"):
        batcher.submit(["more"], [1])
    gate.set()
    closer = threading.Thread(target=batcher.close)
    closer.start()
    closer.join(10)
    assert first.done() and queued.done()
    np.testing.assert_array_equal(queued.result(), fake_encode(["a", "bb", "ccc"], "", True, 0))
    with pytest.raises(ShuttingDown):
        batcher.submit(["late"], [1])


def test_a_failed_batch_fails_its_requests_not_the_server() -> None:
    def encode(texts, prompt, normalize, budget):
        if "boom" in texts:
            raise RuntimeError("model failure")
        return fake_encode(texts, prompt, normalize, budget)

    batcher = DynamicBatcher(encode, max_batch_tokens=10, max_queue_tokens=100)
    batcher.start()
    bad = batcher.submit(["boom"], [5])
    with pytest.raises(RuntimeError, match="model failure"):
        bad.result(10)
    assert batcher.submit(["fine"], [5]).result(10).shape == (1, 2)
    batcher.close()


def test_the_serve_command_answers_and_stops_cleanly_on_sigterm(minilm, encoder) -> None:
    """``longembed serve`` in its own process: /info reflects the flags, a request is answered,
    SIGTERM ends it after a graceful shutdown."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "longembed.cli.main", "serve", "--model", str(minilm), "--method", "pi",
               "--max-length", "1024", "--port", str(port), "--overflow", "error", "--max-client-batch-size", "4",
               "--dtype", "float32"]  # compared with the float32 encoder (serve's default, auto, may be bfloat16)
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.3)
        info = httpx.get(base + "/info", timeout=10).json()
        assert (info["overflow"], info["max_client_batch_size"], info["max_length"]) == ("error", 4, 1024)
        response = httpx.post(base + "/embed", json={"inputs": ["hello there"]}, timeout=60)
        np.testing.assert_allclose(np.array(response.json(), dtype=np.float32), encoder.encode(["hello there"]), atol=1e-6)
    finally:
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=60)[0]
    # uvicorn shuts down gracefully, then re-raises the signal, so the exit status is the signal's
    assert server.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output and "Traceback" not in output


# ------------------------------------------------------------------ a new user's probes (issue 23)
@pytest.fixture(scope="module")
def guarded(encoder):
    """A live server with an API key and a CORS origin."""
    settings = ServerSettings(max_body_bytes=400_000, api_key="s3cret", cors_origins=("http://app.example",))
    server = build_server(encoder, settings, port=0, log_level="warning")
    thread = start(server)
    yield f"http://127.0.0.1:{bound_port(server)}"
    server.should_exit = True
    thread.join(60)


def test_api_key_is_required_everywhere_but_health(guarded) -> None:
    body = {"model": "m", "input": "hello"}
    assert httpx.get(guarded + "/health", timeout=10).status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
        refused = httpx.post(guarded + "/v1/embeddings", json=body, headers=headers, timeout=30)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        tei = httpx.post(guarded + "/embed", json={"inputs": "hello"}, headers=headers, timeout=30)
        assert tei.status_code == 401 and set(tei.json()) == {"error", "error_type"}
        assert httpx.get(guarded + "/info", headers=headers, timeout=10).status_code == 401
        assert httpx.get(guarded + "/metrics", headers=headers, timeout=10).status_code == 401
    client = openai.OpenAI(base_url=guarded + "/v1", api_key="s3cret", max_retries=0, timeout=60)
    assert len(client.embeddings.create(model="m", input="hello").data[0].embedding) == 384


def test_a_web_page_cannot_drive_the_server(guarded, live) -> None:
    """The probe: a text/plain cross-origin POST with a foreign Origin and Host was served."""
    key = {"Authorization": "Bearer s3cret"}
    blind = httpx.post(live + "/v1/embeddings", content=b'{"model": "m", "input": "x"}',
                       headers={"content-type": "text/plain", "origin": "http://evil.example"}, timeout=30)
    assert blind.status_code == 415 and "application/json" in blind.json()["error"]["message"]
    rebound = httpx.post(live + "/embed", json={"inputs": "x"}, headers={"host": "evil.example"}, timeout=30)
    assert rebound.status_code == 400 and rebound.text == "Invalid host header"
    assert httpx.get(live + "/health", headers={"host": "localhost:1"}, timeout=10).status_code == 200
    allowed = httpx.options(guarded + "/v1/embeddings", timeout=10, headers={
        "origin": "http://app.example", "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type"})
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == "http://app.example"
    foreign = httpx.options(guarded + "/v1/embeddings", timeout=10, headers={
        "origin": "http://evil.example", "access-control-request-method": "POST"})
    assert "access-control-allow-origin" not in foreign.headers
    info = httpx.get(guarded + "/info", headers=key, timeout=10).json()
    assert "/" not in json.dumps(info["model_id"]) and "model_path" not in info
    assert not any(str(v).startswith("/") for v in info["encoder_config"].values())


def test_what_a_client_sends_never_makes_a_500(live) -> None:
    huge_int = b'{"model": "m", "input": "x", "dimensions": ' + b"9" * 5000 + b"}"
    deep = b'{"model": "m", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for body in (huge_int, deep):
        response = httpx.post(live + "/v1/embeddings", content=body, timeout=60,
                              headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text
    before = _metric(live, "longembed_client_disconnects_total", '{route="openai"}')
    errors = _metric(live, "longembed_requests_total", '{route="openai",status="500"}')
    host, port = live.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:  # a client that drops mid-body
        raw.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000\r\n\r\n{\"model\": \"m\", \"input\": \"half")
    deadline = time.monotonic() + 30
    while _metric(live, "longembed_client_disconnects_total", '{route="openai"}') == before:
        assert time.monotonic() < deadline, "the dropped client was not counted"
        time.sleep(0.1)
    assert _metric(live, "longembed_requests_total", '{route="openai",status="500"}') == errors


def test_a_request_larger_than_the_queue_is_refused_not_queued(encoder) -> None:
    app = create_app(encoder, ServerSettings(max_batch_tokens=MAX_LENGTH, max_queue_tokens=2 * MAX_LENGTH,
                                             allowed_hosts=("testserver",)))
    with TestClient(app) as http:
        response = http.post("/v1/embeddings", json={"model": "m", "input": [words(300, i) for i in range(8)]})
        assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"
        assert app.state.service.batcher.queued_inputs == 0
        assert http.post("/v1/embeddings", json={"model": "m", "input": [words(300, i) for i in range(3)]}) \
            .status_code == 200


def test_a_disconnected_clients_queued_work_is_cancelled(encoder) -> None:
    server = build_server(encoder, ServerSettings(max_batch_tokens=MAX_LENGTH), port=0, log_level="warning")
    thread = start(server)
    base = f"http://127.0.0.1:{bound_port(server)}"
    service = server.config.app.state.service
    real_encode, release, calls = service.batcher.encode, threading.Event(), []

    def held(inputs, *args):
        calls.append([x.text for x in inputs])  # the batcher queues tokenized inputs
        release.wait(60)
        return real_encode(inputs, *args)

    service.batcher.encode = held
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(httpx.post, base + "/embed", json={"inputs": "first"}, timeout=120)
            while not calls:
                time.sleep(0.01)
            with pytest.raises(httpx.ReadTimeout):  # the client gives up while its inputs wait in the queue
                httpx.post(base + "/embed", json={"inputs": [words(200, i) for i in range(4)]}, timeout=1.0)
            deadline = time.monotonic() + 30
            while service.batcher.queued_inputs:
                assert time.monotonic() < deadline, "the abandoned inputs stayed queued"
                time.sleep(0.05)
            release.set()
            assert first.result().status_code == 200
        assert calls == [["first"]]  # the abandoned inputs never reached the model
        assert _metric(base, "longembed_client_disconnects_total", '{route="tei"}') == 1
    finally:
        release.set()
        server.should_exit = True
        thread.join(60)


def test_planning_reads_a_bounded_prefix_of_a_huge_input(encoder) -> None:
    """A 4 MB input is planned from a few thousand tokens: refused under extend and error, cut under
    truncate exactly as the cut of the whole text would be."""
    from longembed.serving.overflow_planner import CHARS_PER_TOKEN, OverflowPlanner

    planner = OverflowPlanner(encoder)
    tokenized: list[int] = []
    real = planner.tokenizer

    class Counting:
        def __call__(self, texts, **kwargs):
            tokenized.append(sum(len(t) for t in texts))
            return real(texts, **kwargs)

        def __getattr__(self, name):
            return getattr(real, name)

    planner.tokenizer = Counting()
    huge = words(700_000, 3)  # ~4 MB
    for policy in ("extend", "error"):
        with pytest.raises(ValueError, match="more than"):
            planner.plan([huge], "", policy)
    bound = 4 * CHARS_PER_TOKEN * (MAX_LENGTH + 2)
    assert 0 < max(tokenized) <= bound
    (cut,) = planner.plan([huge], "", "truncate")
    assert cut.truncated and cut.n_tokens <= encoder.original_length
    reference = OverflowPlanner(encoder).cut_to_tokens(huge[:200_000], "", encoder.original_length)
    assert cut.text == reference


def test_batcher_cancel_and_a_bounded_close() -> None:
    gate = threading.Event()

    def encode(texts, prompt, normalize, budget):
        gate.wait(30)
        return fake_encode(texts, prompt, normalize, budget)

    batcher = DynamicBatcher(encode, max_batch_tokens=10, max_queue_tokens=100)
    batcher.start()
    running = batcher.submit(["a"], [10])
    while batcher.queued_inputs:
        time.sleep(0.01)
    left = batcher.submit(["b", "c"], [5, 5])
    kept = batcher.submit(["d"], [5])
    assert batcher.cancel(left) == 2 and left.cancelled()
    assert (batcher.queued_inputs, batcher.queued_tokens) == (1, 5)
    start = time.monotonic()
    batcher.close(timeout=0.5)  # the worker is held: what is queued is failed, not computed
    assert time.monotonic() - start < 5
    with pytest.raises(ShuttingDown):
        kept.result(timeout=1)
    # the batch still in the model at the deadline cannot finish in time either: its client is
    # answered now (503), not when the model returns; its late result is dropped without an error
    with pytest.raises(ShuttingDown, match="before this request was finished"):
        running.result(timeout=1)
    gate.set()
    batcher._thread.join(10)
    assert not batcher._thread.is_alive()


def test_every_server_setting_is_a_serve_flag_and_round_trips(monkeypatch) -> None:
    """ServerSettings is the one place a server option is written: its fields are the flags."""
    import dataclasses

    from longembed.cli.main import build_parser
    from longembed.cli.options import settings_from_args

    def parse(*flags: str) -> ServerSettings:
        return settings_from_args(ServerSettings, build_parser(["serve"]).parse_args(["serve", *flags]))

    assert parse() == ServerSettings()
    given = parse("--overflow", "truncate", "--max-batch-tokens", "4096", "--max-queue-tokens", "9000",
                  "--max-client-batch-size", "8", "--max-body-bytes", "1000", "--max-document-tokens", "5000",
                  "--max-chunks-per-request", "99", "--max-token-vectors", "777", "--dimensions", "64,32",
                  "--allow-any-dimensions", "--served-model-name", "m", "--api-key", "k",
                  "--allowed-hosts", "a.example, *.b.example", "--cors-origins", "http://x", "--shutdown-seconds", "2.5")
    given_scheduling = parse("--scheduler", "fifo", "--queue-seconds", "12.5", "--sub-batch-tokens", "512")
    assert given == ServerSettings(
        overflow="truncate", max_batch_tokens=4096, max_queue_tokens=9000, max_client_batch_size=8,
        max_body_bytes=1000, max_document_tokens=5000, max_chunks_per_request=99, max_token_vectors=777,
        dimensions=(64, 32), allow_any_dimensions=True, served_model_name="m", api_key="k",
        allowed_hosts=("a.example", "*.b.example"), cors_origins=("http://x",), shutdown_seconds=2.5,
    )
    assert given_scheduling == ServerSettings(scheduler="fifo", queue_seconds=12.5, sub_batch_tokens=512)
    assert {f.name for f in dataclasses.fields(ServerSettings)} == {
        f.name for f in dataclasses.fields(ServerSettings)
        if getattr(given, f.name) != getattr(ServerSettings(), f.name)
        or getattr(given_scheduling, f.name) != getattr(ServerSettings(), f.name)
    }  # every field was reachable from a flag
    with pytest.raises(SystemExit):
        parse("--dimensions", "64,-1")
    with pytest.raises(SystemExit):
        parse("--scheduler", "lottery")
