"""``serve --index``: ``POST /search``, ``GET /search/index`` and the page's files, behind the server's key,
limits and metrics.

Most tests use :class:`search_fakes.FakeSearchIndex` (the contract's API, cheap, and able to hold a search
in flight): the server must answer exactly what the index answers, refuse bad bodies with a 400/413
naming the field, and keep serving while a search runs.  A search's query is embedded by the server's
batcher like any embedding request (issue 50): it waits in the queue under the token budget, is refused
429/503 with Retry-After, and is drained or refused at shutdown; the tests hold the model to see it
there.  The last ones use a real index built by ``longembed index``: ``POST /search`` must equal
``longembed search --json`` and the index's own ``search`` bit for bit, and ``serve --index`` refuses a
missing index or model flags that are not the index's.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import real_model_folder, words
from fastapi.testclient import TestClient
from search_fakes import FakeSearchIndex
from search_support import DOCUMENTS, MAX_LENGTH, METHOD, build_real_index

from longembed import load_encoder
from longembed.cli.main import build_parser, main
from longembed.cli.serve import check_model_flags
from longembed.errors import UserError
from longembed.search import SearchIndex, open_index
from longembed.search.index_dtype import recorded_dtype
from longembed.serving import ServerSettings, create_app
from longembed.serving.search_route import add_search_routes, queued_query_vectors

pytestmark = pytest.mark.slow  # the real all-MiniLM-L6-v2 behind every app, and a real index

HOSTS = ("testserver",)


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(real_model_folder("all-MiniLM-L6-v2"), "pi", max_length=1024)


def search_app(encoder, index=None, **settings):
    app = create_app(encoder, ServerSettings(allowed_hosts=HOSTS, **settings))
    add_search_routes(app, index or FakeSearchIndex(DOCUMENTS))
    return app


@pytest.fixture(scope="module")
def http(encoder):
    with TestClient(search_app(encoder, max_body_bytes=20_000)) as client:
        yield client


def same_answer(a, b) -> bool:
    """Two JSON answers equal in every key, key order and value, floats to 1e-6: the search command embeds
    its query with the index's saved query program, the server with the model it holds, equal to 1e-5
    (tests/search/test_query_program.py): in bfloat16 (--dtype auto on a CPU with AMX) a score's last bits
    can differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_answer(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_answer(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and abs(a - b) <= 1e-6
    return a == b


def ordered(value):
    """A JSON value with every object as a list of (key, value) pairs: equal only in the same key order."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


def test_search_answers_exactly_what_the_index_answers(http) -> None:
    """The body, with its key order, is the index's ``to_dict()``; the filters reach the index."""
    index: FakeSearchIndex = http.app.state.search.index
    for body in ({"query": "who founded Y Combinator?"},
                 {"query": "which language do hackers like", "k": 2},
                 {"query": "founded", "k": 3, "ids": ["essays/founders.txt", "notes/xss.txt"]},
                 {"query": "Cambridge", "path_prefix": "essays/"}):
        response = http.post("/search", json=body)
        assert response.status_code == 200, response.text
        expected = index.search(body["query"], k=body.get("k", 10), ids=body.get("ids"),
                                path_prefix=body.get("path_prefix")).to_dict()
        assert ordered(json.loads(response.text)) == ordered(expected)
    filtered = http.post("/search", json={"query": "founded", "ids": ["notes/xss.txt"]}).json()["results"]
    assert [r["id"] for r in filtered] == ["notes/xss.txt"]
    prefixed = http.post("/search", json={"query": "Cambridge", "path_prefix": "essays/c"}).json()["results"]
    assert [r["id"] for r in prefixed] == ["essays/cities.txt"]
    assert http.post("/search", json={"query": "who founded Y Combinator?"}).json()["results"][0]["id"] \
        == "essays/founders.txt"


def test_the_passages_field_reaches_the_index(http) -> None:
    index: FakeSearchIndex = http.app.state.search.index
    for body, expected in (({"query": "founded"}, "query"), ({"query": "founded", "passages": "chunk"}, "chunk"),
                           ({"query": "founded", "passages": "query"}, "query")):
        assert http.post("/search", json=body).status_code == 200
        assert index.calls[-1]["passages"] == expected


@pytest.mark.parametrize(("body", "status", "param"), [
    ({}, 400, "query"),
    ({"query": 3}, 400, "query"),
    ({"query": "   "}, 400, "query"),
    ({"query": "x", "k": 0}, 400, "k"),
    ({"query": "x", "k": 101}, 400, "k"),
    ({"query": "x", "k": "5"}, 400, "k"),
    ({"query": "x", "k": True}, 400, "k"),
    ({"query": "x", "ids": []}, 400, "ids"),
    ({"query": "x", "ids": "essays/a.txt"}, 400, "ids"),
    ({"query": "x", "ids": ["a", 1]}, 400, "ids"),
    ({"query": "x", "path_prefix": ""}, 400, "path_prefix"),
    ({"query": "x", "path_prefix": ["essays/"]}, 400, "path_prefix"),
    ({"query": "x", "top_k": 3}, 400, "top_k"),
    ({"query": "x", "passages": "window"}, 400, "passages"),
    ({"query": "x", "passages": True}, 400, "passages"),
    ({"query": "the " * 1100}, 413, "query"),  # more than max_length (1024) tokens
])
def test_bad_bodies_get_a_4xx_naming_the_field(http, body, status, param) -> None:
    response = http.post("/search", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and f"'{param}" in error["message"]


def test_query_length_follows_the_overflow_policy_and_never_reads_a_huge_query_whole(encoder) -> None:
    """Under ``--overflow error`` a query over Lo (512) is refused, the index's query prompt included; a 5 MB
    query is refused from a prefix."""
    index = FakeSearchIndex(DOCUMENTS)
    with TestClient(search_app(encoder, index, overflow="error")) as client:
        refused = client.post("/search", json={"query": "the " * 600})
        assert refused.status_code == 413 and "512" in refused.json()["error"]["message"]
        assert client.post("/search", json={"query": "the " * 400}).status_code == 200
        huge = client.post("/search", json={"query": "the " * 1_300_000})
        assert huge.status_code == 413 and "more than 512 tokens" in huge.json()["error"]["message"]
    assert len(index.calls) == 1  # only the query that fits reached the index
    prompted = FakeSearchIndex(DOCUMENTS, prompts={"query": "the " * 200, "document": ""})
    with TestClient(search_app(encoder, prompted, overflow="error")) as client:  # the index's query prompt counts
        assert client.post("/search", json={"query": "the " * 400}).status_code == 413


def test_body_type_and_size_limits_are_the_servers(http) -> None:
    plain = http.post("/search", content=b'{"query": "x"}', headers={"content-type": "text/plain"})
    assert plain.status_code == 415
    large = http.post("/search", json={"query": "founded", "ids": ["x" * 100] * 300})  # > 20 kB
    assert large.status_code == 413 and "20000" in large.json()["error"]["message"]
    assert http.post("/search", content=b"{not json", headers={"content-type": "application/json"}).status_code == 400


def test_the_api_key_guards_search_and_facts_but_not_the_page(encoder) -> None:
    with TestClient(search_app(encoder, api_key="s3cret")) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            assert client.post("/search", json={"query": "x"}, headers=headers).status_code == 401
            assert client.get("/search/index", headers=headers).status_code == 401
        key = {"Authorization": "Bearer s3cret"}
        assert client.post("/search", json={"query": "founded"}, headers=key).status_code == 200
        assert client.get("/search/index", headers=key).json()["documents"] == len(DOCUMENTS)
        page = [client.get(path) for path in ("/", "/page/search.js", "/page/search.css")]
        assert [p.status_code for p in page] == [200, 200, 200]
        # the page says nothing about the index: no document, model or count in it
        assert not any(word in p.text for p in page for word in ("essays/", "all-MiniLM", "founders"))


def test_the_page_is_self_contained_and_confined_to_this_server(http) -> None:
    html = http.get("/")
    assert html.headers["content-type"].startswith("text/html")
    policy = html.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy and "script-src 'self'" in policy
    for name, media in (("search.js", "text/javascript"), ("search.css", "text/css")):
        assert http.get(f"/page/{name}").headers["content-type"].startswith(media)
    assert http.get("/page/index.html").status_code == 404 and http.get("/page/../app.py").status_code == 404
    # nothing but this server's own paths: no http(s) URL, no protocol-relative URL, no import
    for name in ("search.js", "search.css"):
        text = http.get(f"/page/{name}").text
        assert "http" not in text and "//" not in text.replace("// ", "") and "@import" not in text
    assert "http" not in html.text.lower().replace('http-equiv', '')


def metric(client, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def test_searches_are_counted_and_timed(http) -> None:
    ok, bad = 'longembed_requests_total{route="search",status="200"}', \
        'longembed_requests_total{route="search",status="400"}'
    timed = 'longembed_request_seconds_count{route="search"}'
    before = (metric(http, ok), metric(http, bad), metric(http, timed))
    http.post("/search", json={"query": "founded"})
    http.post("/search", json={"query": ""})
    assert (metric(http, ok), metric(http, bad), metric(http, timed)) == (before[0] + 1, before[1] + 1, before[2] + 2)


def wait_until(condition, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_running_search_does_not_block_the_server(encoder) -> None:
    """The index's search runs in a worker thread: while one is held, /health and other searches answer."""
    gate = threading.Event()
    index = FakeSearchIndex(DOCUMENTS, gate=gate)
    with TestClient(search_app(encoder, index)) as client, ThreadPoolExecutor(1) as pool:
        held = pool.submit(client.post, "/search", json={"query": "founded"})
        wait_until(lambda: index.calls)
        started = time.monotonic()  # a search run on the event loop would hold this for the gate's 30 s
        assert client.get("/health").status_code == 200 and time.monotonic() - started < 10
        gate.set()
        assert held.result(30).status_code == 200
        assert client.post("/search", json={"query": "founded"}).status_code == 200


QUERY_PROMPT = "search_query: "
QUESTION = "who founded Y Combinator?"


def embedding_index(encoder, **fields) -> FakeSearchIndex:
    """A fake index that embeds its queries, through the server's queue, with its own query prompt."""
    return FakeSearchIndex(DOCUMENTS, encoder=encoder, embed_queries=queued_query_vectors,
                           prompts={"query": QUERY_PROMPT, "document": ""}, **fields)


def hold_model(batcher) -> tuple[threading.Event, list[list[int]]]:
    """Hold the batcher's model calls until the event is set; the list gets each call's token counts."""
    release, real_encode, calls = threading.Event(), batcher.encode, []

    def held(inputs, *args):
        release.wait(60)
        calls.append([item.n_tokens for item in inputs])
        return real_encode(inputs, *args)

    batcher.encode = held
    return release, calls


def test_a_searchs_query_waits_in_the_batchers_queue_and_counts_against_its_token_budget(encoder) -> None:
    """While the model is held on an embedding request, a search's query waits in the batcher's queue
    (its tokens, the index's query prompt included, are the queue's) and the index has not searched;
    once the model is free the search answers, with the vector the encoder gives that query alone, and
    the query is counted under route="search"."""
    index = embedding_index(encoder)
    app = search_app(encoder, index)
    batcher = app.state.service.batcher
    release, calls = hold_model(batcher)
    n_query = encoder.runner.tokenize([QUESTION], QUERY_PROMPT)[0].n_tokens
    with TestClient(app) as http, ThreadPoolExecutor(2) as pool:
        first = pool.submit(http.post, "/embed", json={"inputs": [words(600, 3)]})
        wait_until(lambda: batcher.batches_formed == 1)
        search = pool.submit(http.post, "/search", json={"query": QUESTION})
        wait_until(lambda: batcher.queued_tokens == n_query)
        assert metric(http, "longembed_queue_tokens") == n_query
        time.sleep(0.3)
        assert not search.done() and not index.calls  # the index waits for the batcher's vector
        release.set()
        assert first.result(60).status_code == 200
        answer = search.result(60)
        assert answer.status_code == 200, answer.text
        assert metric(http, 'longembed_tokens_total{route="search"}') == n_query
        assert metric(http, 'longembed_inputs_total{route="search"}') == 1
        assert metric(http, "longembed_batch_tokens_sum") >= 600 + n_query  # both ran in the batcher's batches
    assert calls[-1] == [n_query]
    assert [c["query"] for c in index.calls] == [QUESTION]
    np.testing.assert_array_equal(index.vectors[0], encoder.encode([QUESTION], prompt=QUERY_PROMPT,
                                                                   normalize_embeddings=True))


def test_a_search_is_refused_429_with_retry_after_when_the_queue_is_full(encoder) -> None:
    """A search whose query would pass --max-queue-tokens, or wait longer than its
    X-Longembed-Queue-Seconds, is refused at once as an embedding request is, and never searches."""
    index = embedding_index(encoder)
    app = search_app(encoder, index, max_batch_tokens=1024, max_queue_tokens=1100, queue_seconds=0)
    batcher = app.state.service.batcher
    release, _ = hold_model(batcher)
    with TestClient(app) as http, ThreadPoolExecutor(2) as pool:
        first = pool.submit(http.post, "/embed", json={"inputs": [words(600, 3)]})
        wait_until(lambda: batcher.batches_formed == 1)
        second = pool.submit(http.post, "/embed", json={"inputs": [words(1000, 4)]})
        wait_until(lambda: batcher.queued_tokens > 1000)
        full = http.post("/search", json={"query": "who founded Y Combinator and when? " * 15})
        assert full.status_code == 429, full.text
        assert full.json()["error"]["code"] == "queue_full" and "queue holds" in full.json()["error"]["message"]
        assert int(full.headers["Retry-After"]) >= 1
        batcher.throughput.record(100, 1.0)  # as if measured: 100 tokens/s
        hurried = http.post("/search", json={"query": QUESTION}, headers={"X-Longembed-Queue-Seconds": "1"})
        assert hurried.status_code == 429 and "would wait about" in hurried.json()["error"]["message"]
        assert int(hurried.headers["Retry-After"]) >= 2
        assert not index.calls
        release.set()
        assert first.result(60).status_code == 200 and second.result(60).status_code == 200
        assert http.post("/search", json={"query": QUESTION}).status_code == 200
    assert len(index.calls) == 1


@pytest.mark.parametrize("has_time", [True, False])
def test_a_search_at_shutdown_is_drained_or_refused_503_like_an_embedding_request(encoder, has_time) -> None:
    """Shutdown begins while a search's query waits: with time for it, it is drained (200); a search or
    an embedding request arriving after is a 503 with Retry-After; without time (a slow model and a
    short deadline), the waiting query is refused 503 when its batch would start."""
    index = embedding_index(encoder)
    app = search_app(encoder, index)
    batcher = app.state.service.batcher
    release, _ = hold_model(batcher)
    n_query = encoder.runner.tokenize([QUESTION], QUERY_PROMPT)[0].n_tokens
    with TestClient(app) as http, ThreadPoolExecutor(2) as pool:
        first = pool.submit(http.post, "/embed", json={"inputs": [words(600, 3)]})
        wait_until(lambda: batcher.batches_formed == 1)
        queued = pool.submit(http.post, "/search", json={"query": QUESTION})
        wait_until(lambda: batcher.queued_tokens == n_query)
        if not has_time:
            batcher.throughput.record(1, 10_000.0)  # so slow that the query alone needs minutes
        batcher.begin_close(None if has_time else 10.0)
        late_search, late_embed = http.post("/search", json={"query": QUESTION}), http.post("/embed", json={"inputs": ["hi"]})
        for late in (late_search, late_embed):
            assert late.status_code == 503 and int(late.headers["Retry-After"]) >= 1
        assert late_search.json()["error"]["code"] == "shutting_down" and late_embed.json()["error_type"] == "Unhealthy"
        release.set()
        assert first.result(60).status_code == 200
        answer = queued.result(60)
    if has_time:
        assert answer.status_code == 200 and [c["query"] for c in index.calls] == [QUESTION]
    else:
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "shutting_down"
        assert int(answer.headers["Retry-After"]) >= 1 and not index.calls


# ------------------------------------------------------------------ a real index (longembed index / search)
@pytest.fixture(scope="module")
def minilm():
    return real_model_folder("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def real_index_dir(tmp_path_factory, minilm):
    return build_real_index(tmp_path_factory.mktemp("search"), minilm)


@pytest.fixture(scope="module")
def served_index(real_index_dir):
    """The index as ``serve --index`` opens it: its query encodes go through the server's queue."""
    return open_index(real_index_dir, embed_queries=queued_query_vectors)


@pytest.fixture(scope="module")
def own_index(real_index_dir, served_index):
    """The index embedding its queries itself, with the model the server holds (``longembed search`` uses
    the saved query program instead, equal within 1e-5: tests/search/test_query_program.py)."""
    return SearchIndex(real_index_dir, encoder=served_index.encoder)


@pytest.fixture(scope="module")
def real(served_index):
    """The app ``serve --index`` builds: the index's own encoder behind every route."""
    app = create_app(served_index.encoder, ServerSettings(allowed_hosts=HOSTS))
    add_search_routes(app, served_index)
    with TestClient(app) as client:
        yield client


def test_search_route_equals_the_search_command(real, real_index_dir, capsys) -> None:
    """``POST /search`` answers what ``longembed search --json`` prints: values and key order (scores to 1e-6)."""
    for question, k, prefix in (("who founded Y Combinator?", 10, None), ("which language do hackers like", 2, None),
                                ("Cambridge says you should be smarter", 10, "essays/")):
        capsys.readouterr()
        flags = ["--index", str(real_index_dir), question, "-k", str(k), *(["--path-prefix", prefix] if prefix else [])]
        assert main(["search", *flags, "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        answered = real.post("/search", json={"query": question, "k": k, **({"path_prefix": prefix} if prefix else {})})
        assert answered.status_code == 200, answered.text
        assert same_answer(json.loads(answered.text), printed)
        assert printed["results"] and len(printed["results"]) <= k
    capsys.readouterr()
    assert main(["search", "--index", str(real_index_dir), "who founded Y Combinator?", "--passages", "chunk",
                 "--json"]) == 0
    chunks = real.post("/search", json={"query": "who founded Y Combinator?", "passages": "chunk"})
    assert same_answer(json.loads(chunks.text), json.loads(capsys.readouterr().out))
    top = real.post("/search", json={"query": "who founded Y Combinator?"}).json()["results"][0]
    assert top["id"] == "essays/founders.txt" and "Y Combinator was founded" in top["passage"]["text"]
    # the page's facts are the command's, plus how the index makes its vectors (late chunks of 256 tokens)
    vectors = {"granularity": "chunks", "unit": "tokens", "size": 256, "overlap": 0, "late": True}
    assert real.get("/search/index").json() == {**printed["index"], "vectors": vectors}


def test_concurrent_searches_and_embeddings_on_a_real_index_equal_the_indexs_own_search(real, own_index) -> None:
    """Searches and /embed share the batcher; each search equals the index's own ``search`` (which
    embeds its query itself), whatever ran beside it."""
    questions = ["who founded Y Combinator?", "which language do hackers like", "what do cities value",
                 "script onerror", "the first batch", "Lisp"] * 2
    alone = [real.post("/search", json={"query": q}).json() for q in questions]
    assert alone == [own_index.search(q).to_dict() for q in questions]
    vectors = real.post("/embed", json={"inputs": questions}).json()

    def call(i: int):
        if i % 2:
            return real.post("/embed", json={"inputs": [questions[i // 2]]}).json()[0]
        return real.post("/search", json={"query": questions[i // 2]}).json()

    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(call, range(2 * len(questions))))
    assert together[0::2] == alone
    # a query's vector beside other batch neighbours: float32 agrees to 1e-5; bfloat16 (the index's dtype where
    # --dtype auto found it native) to its own precision, 2^-8 relative
    tolerance = 1e-5 if recorded_dtype(own_index.metadata) == "float32" else 2**-8
    np.testing.assert_allclose(np.array(together[1::2]), np.array(vectors), atol=tolerance)


def test_search_vectors_are_bit_for_bit_the_indexs_own_beside_longer_inputs_in_a_batch(served_index,
                                                                                    own_index) -> None:
    """Searches queued with embedding requests of a little longer inputs (the same prompt: a model call
    would pad the query to their length, which changes its vector's last bits) all run in one batch;
    each query runs in a call of its own, and each answer is exactly the index's own search."""
    assert served_index.prompts["query"] == ""  # the queries share the embedding requests' prompt
    app = create_app(served_index.encoder, ServerSettings(allowed_hosts=HOSTS))
    add_search_routes(app, served_index)
    batcher = app.state.service.batcher
    release, calls = hold_model(batcher)
    questions = ["who founded Y Combinator?", "Lisp", "which language do hackers like"]
    neighbours = [q + " and why, in a few words?" for q in questions]
    with TestClient(app) as http, ThreadPoolExecutor(8) as pool:
        first = pool.submit(http.post, "/embed", json={"inputs": [words(600, 3)]})
        wait_until(lambda: batcher.batches_formed == 1)
        embeds = [pool.submit(http.post, "/embed", json={"inputs": [n]}) for n in neighbours]
        searches = [pool.submit(http.post, "/search", json={"query": q}) for q in questions]
        wait_until(lambda: batcher.queued_inputs == len(neighbours) + len(questions))
        release.set()
        assert first.result(60).status_code == 200 and all(e.result(60).status_code == 200 for e in embeds)
        answers = [s.result(60) for s in searches]
    assert batcher.batches_formed == 2  # everything queued ran in one batch
    query_tokens = {served_index.encoder.runner.tokenize([q])[0].n_tokens for q in questions}
    assert all(len(call) == 1 for call in calls if set(call) & query_tokens)
    assert [ordered(json.loads(a.text)) for a in answers] == [ordered(own_index.search(q).to_dict()) for q in questions]


def test_an_index_searched_by_the_server_never_runs_the_model_beside_its_queue(real_index_dir, served_index,
                                                                                own_index) -> None:
    """The routes refuse an index that embeds its queries itself; an index opened for the server
    refuses to search outside a /search request."""
    app = create_app(own_index.encoder, ServerSettings(allowed_hosts=HOSTS))
    with pytest.raises(UserError, match="queued_query_vectors"):
        add_search_routes(app, own_index)
    with pytest.raises(RuntimeError, match="server's queue"):
        served_index.search("who founded Y Combinator?")


def test_serve_refuses_a_missing_index_and_model_flags_that_are_not_the_indexs(real_index_dir, tmp_path,
                                                                              minilm, capsys) -> None:
    """Exit 2 with one line naming the problem, before any server starts."""
    assert main(["serve", "--index", str(tmp_path / "nothing")]) == 2
    assert "no index there" in capsys.readouterr().err
    assert main(["serve", "--index", str(real_index_dir), "--method", "gp", "--max-length", "2048"]) == 2
    error = capsys.readouterr().err
    assert "--method gp (the index: pi)" in error and "--max-length 2048 (the index: 1024)" in error
    assert main(["serve", "--index", str(real_index_dir), "--temperature", "0.9"]) == 2
    assert "--temperature cannot change it" in capsys.readouterr().err
    facts = open_index(real_index_dir).facts()
    parse = build_parser(["serve"]).parse_args
    check_model_flags(parse(["serve", "--index", "i"]), facts)  # none given: the index's model
    check_model_flags(parse(["serve", "--index", "i", "--model", str(minilm), "--method", METHOD,
                             "--max-length", str(MAX_LENGTH)]), facts)  # the index's own, spelled out
    with pytest.raises(ValueError, match="--model multilingual-e5-small"):
        check_model_flags(parse(["serve", "--index", "i", "--model", "/m/multilingual-e5-small"]), facts)
