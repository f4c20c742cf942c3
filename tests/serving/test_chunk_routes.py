"""Chunks and tokens through the server: ``late_chunking`` on ``/v1/embeddings`` (the real ``openai``
client), ``/embed_chunks``, ``/embed_all``, ``/tokenize``, their limits and bad bodies, and the batcher's
token-state work.

References are independent of the server: chunk vectors and spans from ``encoder.encode_chunks``
called directly, token states from ``encoder.encode(output_value="token_embeddings")``, token ids
and offsets from the Hugging Face tokenizer, cut chunks from the plain model at Lo (method truncate).
A tiny BERT (Lo = 32, served at Lt = 64) keeps every "long" input cheap: a text of a few hundred
tokens runs as several windows.
"""

from __future__ import annotations

import base64
import threading
import time

import httpx
import numpy as np
import openai
import pytest
from conftest import LO, build_tiny, words
from fastapi.testclient import TestClient
from transformers import AutoTokenizer

from longembed import load_encoder
from longembed.serving import ServerSettings, bound_port, build_server, create_app
from longembed.serving.batcher import DynamicBatcher

pytestmark = pytest.mark.slow  # a live uvicorn server (on a tiny model)

LT = 2 * LO
PROMPTS = {"document": "the doc , ", "query": "is it "}
LIMITS = dict(max_client_batch_size=64, max_document_tokens=600, max_chunks_per_request=40, max_token_vectors=200)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return build_tiny("bert", tmp_path_factory.mktemp("chunk-routes") / "bert")


@pytest.fixture(scope="module")
def encoder(bert):
    return load_encoder(bert, "pi", max_length=LT, prompts=PROMPTS)


@pytest.fixture(scope="module")
def live(encoder):
    settings = ServerSettings(max_batch_tokens=4 * LT, allow_any_dimensions=True, max_body_bytes=200_000, **LIMITS)
    server = build_server(encoder, settings, port=0, log_level="warning")
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{bound_port(server)}"
    server.should_exit = True
    thread.join(60)


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live + "/v1", api_key="unused", max_retries=0, timeout=120)


def sentences(n: int, seed: int) -> str:
    """n sentences of tiny-vocabulary words, each ending in a period."""
    return " ".join(words(4 + (seed + i) % 7, seed * 100 + i) + " ." for i in range(n))


def pieces_of(text: str, sizes: list[int]) -> list[str]:
    """``text`` cut into consecutive pieces of the given character sizes (the last takes the rest)."""
    bounds = np.cumsum([0, *sizes]).tolist()
    return [text[a:b] for a, b in zip(bounds, [*bounds[1:], len(text)], strict=True)]


def vectors_of(response) -> np.ndarray:
    return np.array([d.embedding for d in sorted(response.data, key=lambda d: d.index)], dtype=np.float32)


def joined_spans(pieces: list[str]) -> list[tuple[int, int]]:
    bounds = np.cumsum([0] + [len(p) for p in pieces]).tolist()
    return [(bounds[i], bounds[i + 1]) for i in range(len(pieces))]


# ------------------------------------------------------------------ late_chunking with the real OpenAI client
@pytest.mark.parametrize("n_sentences", [3, 40], ids=["within max_length", "windows past max_length"])
def test_openai_late_chunking_equals_encode_chunks_and_counts_tokens_once(client, encoder, n_sentences) -> None:
    document = sentences(n_sentences, n_sentences)
    pieces = pieces_of(document, [len(document) // 5] * 4) if n_sentences > 3 else pieces_of(document, [13, 30])
    n_document = len(encoder.tokenizer(document)["input_ids"])
    assert (n_document > LT) == (n_sentences > 3)
    (expected, spans), = encoder.encode_chunks([document], chunking=[joined_spans(pieces)], late=True)
    assert spans == joined_spans(pieces) and "".join(pieces) == document
    response = client.embeddings.create(input=pieces, model="m", encoding_format="float", user="someone",
                                        extra_body={"late_chunking": True})
    np.testing.assert_allclose(vectors_of(response), expected, atol=1e-5)
    assert response.usage.prompt_tokens == n_document == response.usage.total_tokens  # once, not per chunk
    as_base64 = client.embeddings.create(input=pieces, model="m", encoding_format="base64",
                                         extra_body={"late_chunking": True})
    decoded = np.stack([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in as_base64.data])
    np.testing.assert_allclose(decoded, expected, atol=1e-5)


def test_openai_late_chunking_with_a_prompt_and_dimensions(client, encoder) -> None:
    pieces = pieces_of(sentences(12, 5), [40, 50, 60])
    (full, _), = encoder.encode_chunks(["".join(pieces)], chunking=[joined_spans(pieces)], late=True,
                                       prompt_name="document")
    response = client.embeddings.create(input=pieces, model="m", dimensions=16,
                                        extra_body={"late_chunking": True, "prompt_name": "document"})
    cut = full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True)
    np.testing.assert_allclose(vectors_of(response), cut, atol=1e-5)
    n_prompted = len(encoder.tokenizer(PROMPTS["document"] + "".join(pieces))["input_ids"])
    assert response.usage.prompt_tokens == n_prompted
    plain = client.embeddings.create(input=pieces, model="m", encoding_format="float")  # without: one vector per text
    np.testing.assert_allclose(vectors_of(plain), encoder.encode(pieces), atol=1e-5)


# ------------------------------------------------------------------ /embed_chunks
LONG_TEXT_SENTENCES = 60  # ~500 tokens: windows of Lt = 64 for late chunks


@pytest.mark.parametrize("late", [True, False], ids=["late", "naive"])
@pytest.mark.parametrize("chunking", ["tokens:16", "tokens:24:8", "sentences:3", "spans"])
def test_embed_chunks_equals_encode_chunks(live, encoder, chunking, late) -> None:
    texts = [sentences(LONG_TEXT_SENTENCES, 1), sentences(2, 2)]
    own = [(0, 30), (25, 200)] + [(a, min(a + 150, len(texts[0]))) for a in range(200, len(texts[0]), 150)]
    given = [own, [(0, 9), (10, len(texts[1]))]] if chunking == "spans" else chunking  # each fits in Lt (naive)
    expected = encoder.encode_chunks(texts, chunking=given, late=late, normalize_embeddings=True)
    response = httpx.post(live + "/embed_chunks", json={"inputs": texts, "chunking": given, "late": late}, timeout=120)
    assert response.status_code == 200, response.text
    for chunks, (vectors, spans) in zip(response.json(), expected, strict=True):
        assert [(c["start"], c["end"]) for c in chunks] == spans
        np.testing.assert_allclose(np.array([c["vector"] for c in chunks], dtype=np.float32), vectors, atol=1e-5)
        assert not any("truncated" in c for c in chunks)


def test_embed_chunks_options_prompt_normalize_dimensions_and_a_single_string(live, encoder) -> None:
    text = sentences(20, 3)
    (raw, spans), = encoder.encode_chunks(text, chunking="tokens:20", prompt_name="query", normalize_embeddings=False)
    body = {"inputs": text, "chunking": "tokens:20", "prompt_name": "query", "normalize": False, "dimensions": 8}
    (chunks,) = httpx.post(live + "/embed_chunks", json=body, timeout=60).json()
    np.testing.assert_allclose(np.array([c["vector"] for c in chunks]), raw[:, :8], atol=1e-5)  # cut, not renormalized
    assert [(c["start"], c["end"]) for c in chunks] == spans
    bare = [[0, 20], [20, len(text)]]  # one string: its spans given directly, as encode_chunks takes them
    (chunks,) = httpx.post(live + "/embed_chunks", json={"inputs": text, "chunking": bare}, timeout=60).json()
    (vectors, _), = encoder.encode_chunks(text, chunking=[tuple(s) for s in bare], normalize_embeddings=True)
    np.testing.assert_allclose(np.array([c["vector"] for c in chunks]), vectors, atol=1e-5)


def test_naive_chunks_follow_the_overflow_policy_and_say_which_were_cut(live, encoder, bert) -> None:
    text = sentences(12, 4)
    spans = encoder.chunk_spans(text, "tokens:45")[0]  # 45 + 2 special tokens: past Lo = 32, within Lt
    response = httpx.post(live + "/embed_chunks", json={"inputs": [text], "chunking": "tokens:45", "late": False,
                                                       "truncate": True}, timeout=60)
    assert response.status_code == 200 and response.headers["x-longembed-truncated"] == "0"
    chunks = response.json()[0]
    plain = load_encoder(bert, "truncate")  # cuts each chunk at Lo itself
    with pytest.warns(UserWarning, match="truncated"):
        expected = plain.encode([text[a:b] for a, b in spans], normalize_embeddings=True)
    np.testing.assert_allclose(np.array([c["vector"] for c in chunks]), expected, atol=1e-5)
    longer = [j for j, (a, b) in enumerate(spans) if len(encoder.tokenizer(text[a:b])["input_ids"]) > LO]
    assert longer and [j for j, c in enumerate(chunks) if c.get("truncated")] == longer
    refused = httpx.post(live + "/embed_chunks", json={"inputs": [text], "chunking": "tokens:45", "late": False,
                                                      "overflow": "error"}, timeout=60)
    assert refused.status_code == 413 and "inputs[0], chunk 0 (characters" in refused.json()["error"]


# ------------------------------------------------------------------ /embed_all and /tokenize
def test_embed_all_equals_the_encoders_token_states(live, encoder) -> None:
    texts = [words(10, 1), sentences(5, 6)]  # the second between Lo and Lt: the extension method's states
    assert LO < len(encoder.tokenizer(texts[1])["input_ids"]) <= LT
    response = httpx.post(live + "/embed_all", json={"inputs": texts}, timeout=60)
    assert response.status_code == 200, response.text
    for got, expected in zip(response.json(), encoder.encode(texts, output_value="token_embeddings"), strict=True):
        np.testing.assert_allclose(np.array(got, dtype=np.float32), expected, atol=1e-5)
    prompted = httpx.post(live + "/embed_all", json={"inputs": texts[0], "prompt_name": "query"}, timeout=60).json()
    reference = encoder.encode(texts[0], prompt_name="query", output_value="token_embeddings")
    np.testing.assert_allclose(np.array(prompted[0], dtype=np.float32), reference, atol=1e-5)
    cut = httpx.post(live + "/embed_all", json={"inputs": texts, "truncate": True}, timeout=60)
    assert cut.headers["x-longembed-truncated"] == "1" and [len(x) for x in cut.json()][1] == LO


@pytest.mark.parametrize("prompt_name", [None, "document"])
@pytest.mark.parametrize("special", [True, False])
def test_tokenize_lists_the_tokenizers_ids_and_offsets(live, bert, special, prompt_name) -> None:
    texts = ["the cat, is on the mat.", "of  the   web"]
    body = {"inputs": texts, "add_special_tokens": special, **({"prompt_name": prompt_name} if prompt_name else {})}
    response = httpx.post(live + "/tokenize", json=body, timeout=60)
    assert response.status_code == 200, response.text
    tokenizer = AutoTokenizer.from_pretrained(bert)
    prompt = PROMPTS.get(prompt_name, "")
    n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    for text, tokens in zip(texts, response.json(), strict=True):
        reference = tokenizer(prompt + text, add_special_tokens=special, return_offsets_mapping=True,
                              return_special_tokens_mask=True)
        assert [t["id"] for t in tokens] == reference["input_ids"]
        assert [t["special"] for t in tokens] == [bool(m) for m in reference["special_tokens_mask"]]
        in_text = [(t["start"], t["stop"]) for t in tokens if t["start"] is not None]
        first_text_token = int(special) + n_prompt
        expected = [(a - len(prompt), b - len(prompt)) for a, b in reference["offset_mapping"][first_text_token:]
                    if (a, b) != (0, 0)]
        assert in_text == expected
        assert all(t["text"] == text[t["start"] : t["stop"]] for t in tokens if t["start"] is not None)
        assert sum(t["start"] is None and not t["special"] for t in tokens) == n_prompt  # the prompt's tokens


# ------------------------------------------------------------------ bad bodies and limits
TOO_LONG = sentences(120, 7)  # ~1000 tokens: past max_document_tokens = 600

BAD_BODIES = [
    ("/v1/embeddings", {"model": "m", "input": "x", "dimension": 8}, 400, "unknown field 'dimension'"),
    ("/v1/embeddings", {"model": "m", "input": "x", "late_chunking": "yes"}, 400, "'late_chunking' must be true"),
    ("/v1/embeddings", {"model": "m", "input": ["a b", "c"], "late_chunking": True, "overflow": "truncate"}, 400,
     "'overflow' does not apply to late chunking"),
    ("/v1/embeddings", {"model": "m", "input": ["the"] * 41, "late_chunking": True}, 413, "at most 40"),
    ("/v1/embeddings", {"model": "m", "input": [TOO_LONG], "late_chunking": True}, 413, "max_document_tokens"),
    ("/v1/embeddings", {"model": "m", "input": "x", "user": 5}, 400, "'user' must be a string"),
    ("/embed_chunks", {"inputs": "the cat", "chunk": "tokens:4"}, 422, "unknown field 'chunk'"),
    ("/embed_chunks", {"inputs": "the cat", "chunking": "words:4"}, 422, "unknown chunking 'words:4'"),
    ("/embed_chunks", {"inputs": "the cat", "chunking": "tokens:4:4"}, 422, "0 <= overlap < size"),
    ("/embed_chunks", {"inputs": "the cat", "chunking": 4}, 422, "'chunking' must be a string"),
    ("/embed_chunks", {"inputs": "the cat", "chunking": [[0, 99]]}, 422, "chunking[0], span 0"),
    ("/embed_chunks", {"inputs": "the cat", "chunking": [["0", 3]]}, 422, "pair of ints"),
    ("/embed_chunks", {"inputs": ["a", "b"], "chunking": [[[0, 1]]]}, 422, "spans for 1 inputs, but there are 2"),
    ("/embed_chunks", {"inputs": "the cat", "late": "no"}, 422, "'late' must be true or false"),
    ("/embed_chunks", {"inputs": "the cat", "truncate": True}, 422, "'truncate' does not apply to late chunking"),
    ("/embed_chunks", {"inputs": [7]}, 422, "'inputs[0]' is token ids"),
    ("/embed_chunks", {"inputs": ["x"] * 65}, 413, "at most 64"),
    ("/embed_chunks", {"inputs": TOO_LONG}, 413, "more than the 600 this server chunks"),
    ("/embed_chunks", {"inputs": sentences(30, 8), "chunking": "tokens:2"}, 413, "max_chunks_per_request"),
    ("/embed_chunks", {"inputs": "the cat", "chunking": [[0, 1]] * 41}, 413, "max_chunks_per_request"),
    ("/embed_all", {"inputs": "the cat", "normalize": True}, 422, "unknown field 'normalize'"),
    ("/embed_all", {"inputs": [sentences(5, i) for i in range(6)]}, 413, "max_token_vectors"),
    ("/embed_all", {"inputs": TOO_LONG}, 413, "more than this server's max_length"),
    ("/tokenize", {"inputs": "the cat", "add_special_tokens": "no"}, 422, "'add_special_tokens' must be true"),
    ("/tokenize", {"inputs": "the cat", "truncate": True}, 422, "unknown field 'truncate'"),
    ("/tokenize", {"inputs": TOO_LONG}, 413, "at most 600"),
    ("/tokenize", {"inputs": "x", "prompt_name": "nope"}, 422, "unknown prompt_name"),
]


@pytest.mark.parametrize(("route", "body", "status", "fragment"), BAD_BODIES,
                         ids=[f"{r}:{f}" for r, _, _, f in BAD_BODIES])
def test_bad_bodies_get_a_4xx_that_names_the_problem(live, route, body, status, fragment) -> None:
    response = httpx.post(live + route, json=body, timeout=60)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    message = error["message"] if route.startswith("/v1") else error
    assert fragment in message
    if route.startswith("/v1") and "unknown field" in fragment:
        assert error["param"] == "dimension" and error["code"] == "unknown_field"


def test_unknown_fields_are_named_on_the_older_routes_too(live) -> None:
    refused = httpx.post(live + "/embed", json={"inputs": "x", "prompt": "query: "}, timeout=30)
    assert refused.status_code == 422 and "unknown field 'prompt'" in refused.json()["error"]
    several = httpx.post(live + "/v1/embeddings", json={"model": "m", "input": "x", "a": 1, "b": 2}, timeout=30)
    assert several.status_code == 400 and "unknown fields 'a', 'b'" in several.json()["error"]["message"]


def test_late_chunking_needs_a_mean_pooling_model(bert) -> None:
    cls = load_encoder(bert, "pi", max_length=LT, pooling="cls")
    app = create_app(cls, ServerSettings(max_batch_tokens=LT, allowed_hosts=("testserver",)))
    text = sentences(6, 9)
    with TestClient(app) as http:
        openai_route = http.post("/v1/embeddings", json={"model": "m", "input": ["a b", "c"], "late_chunking": True})
        assert openai_route.status_code == 400 and "pools with 'cls'" in openai_route.json()["error"]["message"]
        assert openai_route.json()["error"]["param"] == "late_chunking"
        late = http.post("/embed_chunks", json={"inputs": text, "chunking": "tokens:8"})
        assert late.status_code == 422 and "late=false" in late.json()["error"]
        naive = http.post("/embed_chunks", json={"inputs": text, "chunking": "tokens:8", "late": False})
        (vectors, _), = cls.encode_chunks(text, chunking="tokens:8", late=False, normalize_embeddings=True)
        np.testing.assert_allclose(np.array([c["vector"] for c in naive.json()[0]]), vectors, atol=1e-5)


# ------------------------------------------------------------------ metrics, info
def _metric(live: str, name: str, labels: str = "") -> float:
    for line in httpx.get(live + "/metrics", timeout=10).text.splitlines():
        if not line.startswith("#") and line.rsplit(" ", 1)[0] == name + labels:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_the_chunk_and_token_routes(live, encoder) -> None:
    text = sentences(20, 10)
    n_text = len(encoder.tokenizer(text)["input_ids"])
    before = {route: (_metric(live, "longembed_tokens_total", f'{{route="{route}"}}'),
                      _metric(live, "longembed_requests_total", f'{{route="{route}",status="200"}}'))
              for route in ("embed_chunks", "embed_all", "tokenize", "openai")}
    httpx.post(live + "/embed_chunks", json={"inputs": text, "chunking": "tokens:16"}, timeout=60)
    httpx.post(live + "/embed_all", json={"inputs": "the cat"}, timeout=60)
    httpx.post(live + "/tokenize", json={"inputs": "the cat"}, timeout=60)
    httpx.post(live + "/v1/embeddings", json={"model": "m", "input": [text[:50], text[50:]], "late_chunking": True},
               timeout=60)
    n_cat = len(encoder.tokenizer("the cat")["input_ids"])
    added = {"embed_chunks": n_text, "embed_all": n_cat, "tokenize": 0, "openai": n_text}  # tokenize embeds nothing
    for route, (tokens, requests) in before.items():
        assert _metric(live, "longembed_tokens_total", f'{{route="{route}"}}') == tokens + added[route], route
        assert _metric(live, "longembed_requests_total", f'{{route="{route}",status="200"}}') == requests + 1, route
    assert _metric(live, "longembed_request_seconds_count", '{route="embed_chunks"}') >= 1
    info = httpx.get(live + "/info", timeout=10).json()
    assert (info["max_document_tokens"], info["max_chunks_per_request"], info["max_token_vectors"]) == (600, 40, 200)
    assert info["late_chunking"] is True


# ------------------------------------------------------------------ the batcher's token-state work
def test_the_batcher_runs_states_and_vectors_in_one_batch_each_with_its_function() -> None:
    calls: list[tuple[str, list[str]]] = []
    gate = threading.Event()

    def encode(texts, prompt, normalize, budget):
        gate.wait(10)
        calls.append(("vectors", list(texts)))
        return np.array([[len(t), 0.0] for t in texts], dtype=np.float32)

    def states(sequences, budget):
        calls.append(("states", list(sequences)))
        return [np.full((len(s), 2), len(s), dtype=np.float32) for s in sequences]

    batcher = DynamicBatcher(encode, max_batch_tokens=100, max_queue_tokens=1000, encode_states=states)
    batcher.start()
    blocker = batcher.submit(["held"], [5])
    time.sleep(0.1)
    windows = batcher.submit(["abc", "de"], [30, 20], kind="states")
    vectors = batcher.submit(["xyz"], [10])
    gate.set()
    got = windows.result(10)
    assert isinstance(got, list) and [g.shape for g in got] == [(3, 2), (2, 2)] and got[1][0, 0] == 2
    np.testing.assert_array_equal(vectors.result(10), [[3, 0]])
    assert blocker.result(10).shape == (1, 2)
    batcher.close()
    # one batch, one call per kind (the cheaper request's first: the fair scheduler's order)
    assert calls[1:] == [("vectors", ["xyz"]), ("states", ["abc", "de"])]
    with pytest.raises(ValueError, match="cannot run 'states'"):
        DynamicBatcher(encode, max_batch_tokens=10, max_queue_tokens=10).submit(["a"], [1], kind="states")
