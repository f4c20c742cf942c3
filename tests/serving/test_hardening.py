"""The server's reliability cases of issue 40 and command-line traps of issue 41, as a user meets them.

An empty API key never opens the server; the documentation routes need the key like every route but
``/health``; a large request is refused at its first input over the limit without tokenizing the rest
(counted with a spy on the tokenizer, not timed); a port outside 0..65535 is an argument error; a late
chunk with no token names the input it came from, before the model runs; the 413 names the policy that
keeps the extension and gives the input's true length; ``serve`` has one overflow flag.

A tiny BERT (Lo = 32, served at Lt = 64) through FastAPI's TestClient; references are the Hugging
Face tokenizer and ``encoder.encode`` called directly.
"""

from __future__ import annotations

import argparse
import types

import numpy as np
import pytest
from conftest import LO, build_tiny, words
from fastapi.testclient import TestClient
from transformers import AutoTokenizer

import longembed.cli.serve as serve_command
from longembed import load_encoder
from longembed.cli.main import build_parser, main
from longembed.cli.options import encoder_options
from longembed.serving import ServerSettings, create_app
from longembed.serving.overflow_planner import CHARS_PER_TOKEN, COUNT_WHOLE_FACTOR

LT = 2 * LO
KEY = "s3cret"
MODEL = ("--model", "m", "--method", "truncate")  # replaced by no_server: never loaded


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return build_tiny("bert", tmp_path_factory.mktemp("hardening") / "bert")


@pytest.fixture(scope="module")
def encoder(bert):
    return load_encoder(bert, "pi", max_length=LT)


@pytest.fixture(scope="module")
def tokenizer(bert):
    return AutoTokenizer.from_pretrained(bert)


def app_of(encoder, **settings):
    return create_app(encoder, ServerSettings(max_batch_tokens=4 * LT, allowed_hosts=("testserver",), **settings))


# ------------------------------------------------------------------ 1. an empty key never opens the server
@pytest.fixture
def no_server(monkeypatch):
    """``longembed serve`` with the model and the server replaced: what it would serve, and with what."""
    served: list[ServerSettings] = []
    monkeypatch.setattr(serve_command, "load_encoder", lambda *a, **k: "an encoder")
    monkeypatch.setattr(serve_command.serving, "build_server",
                        lambda encoder, settings, **k: served.append(settings) or types.SimpleNamespace(run=lambda: None))
    monkeypatch.delenv(serve_command.API_KEY_ENV, raising=False)
    return served


@pytest.mark.parametrize(("flags", "env", "source"), [
    (["--api-key", ""], None, "--api-key"),
    (["--api-key", "   "], None, "--api-key"),
    ([], "", "$LONGEMBED_API_KEY"),
    ([], " \t", "$LONGEMBED_API_KEY"),
])
def test_an_empty_or_blank_key_is_an_error_not_an_open_server(no_server, monkeypatch, capsys, flags, env, source):
    if env is not None:
        monkeypatch.setenv(serve_command.API_KEY_ENV, env)
    assert main(["serve", *MODEL, *flags]) == 2
    error = capsys.readouterr().err
    assert error.startswith("longembed serve: error: ") and f"{source} is empty" in error and "--no-auth" in error
    assert no_server == []  # nothing was served


def test_no_auth_serves_without_a_key_on_purpose_and_a_key_is_kept(no_server, monkeypatch, capsys) -> None:
    monkeypatch.setenv(serve_command.API_KEY_ENV, "")
    assert main(["serve", *MODEL, "--no-auth"]) == 0
    assert no_server[-1].api_key is None and "no API key (--no-auth)" in capsys.readouterr().out
    monkeypatch.setenv(serve_command.API_KEY_ENV, "from-env")
    assert main(["serve", *MODEL]) == 0 and no_server[-1].api_key == "from-env"
    assert main(["serve", *MODEL, "--api-key", "flag"]) == 0 and no_server[-1].api_key == "flag"
    monkeypatch.delenv(serve_command.API_KEY_ENV)
    assert main(["serve", *MODEL]) == 0 and no_server[-1].api_key is None  # no key given at all: as before
    with pytest.raises(SystemExit) as exited:
        main(["serve", *MODEL, "--no-auth", "--api-key", "k"])
    assert exited.value.code == 2


@pytest.mark.parametrize("key", [" k", "k\n", "clé", "a\tb"])
def test_a_key_no_client_can_send_is_refused(key) -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        ServerSettings(api_key=key)


# ------------------------------------------------------------------ 6. the key guards every route but /health
def test_with_a_key_every_route_but_health_needs_it_the_docs_included(encoder) -> None:
    app = app_of(encoder, api_key=KEY)
    routes = {(route.path, method) for route in app.routes for method in getattr(route, "methods", ())}
    paths = {path for path, _ in routes}
    assert {"/docs", "/redoc", "/openapi.json", "/metrics", "/info", "/health"} <= paths
    with TestClient(app) as http:
        for path, method in sorted(routes):
            if method == "HEAD":
                continue
            answer = http.request(method, path, json={"inputs": "x"})
            if path == "/health":
                assert answer.status_code == 200
            else:
                assert answer.status_code == 401, (method, path, answer.status_code)
        key = {"Authorization": f"Bearer {KEY}"}
        assert http.get("/openapi.json", headers=key).json()["info"]["title"] == "longembed"
        assert http.get("/docs", headers=key).status_code == 200 and "swagger" in http.get("/docs", headers=key).text
        assert http.get("/redoc", headers=key).status_code == 200
    with TestClient(app_of(encoder)) as open_server:  # without a key the pages are open, as FastAPI's
        assert open_server.get("/docs").status_code == 200 and open_server.get("/openapi.json").status_code == 200


# ------------------------------------------------------------------ 7. a costly refusal is refused at once
class CountingTokenizer:
    """The planner's tokenizer, counting the characters it is given."""

    def __init__(self, real):
        self.real, self.chars = real, 0

    def __call__(self, texts, **kwargs):
        self.chars += sum(len(t) for t in ([texts] if isinstance(texts, str) else texts))
        return self.real(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize(("route", "body", "limit"), [
    ("/v1/embeddings", {"model": "m"}, LT),
    ("/embed", {}, LT),
    ("/embed_chunks", {}, 400),  # max_document_tokens
    ("/tokenize", {}, 400),
])
def test_a_request_is_refused_at_its_first_input_over_the_limit_without_tokenizing_the_rest(
    encoder, route, body, limit
) -> None:
    """500 inputs of 20 kB (10 MB) whose input 0 is over the limit: the tokenizer sees input 0 (at most
    its whole text, for the true count) and one scan, nothing of the 499 others."""
    texts = [words(5300, seed) for seed in range(500)]
    assert min(len(t) for t in texts) > 19_000
    app = app_of(encoder, max_client_batch_size=500, max_body_bytes=20_000_000, max_document_tokens=400)
    spy = CountingTokenizer(app.state.service.planner.tokenizer)
    app.state.service.planner.tokenizer = spy
    field = "input" if route == "/v1/embeddings" else "inputs"
    with TestClient(app) as http:
        refused = http.post(route, json={**body, field: texts})
    assert refused.status_code == 413, refused.text
    assert "[0]" in refused.text
    assert 0 < spy.chars <= len(texts[0]) + CHARS_PER_TOKEN * (limit + 2)


def test_a_request_larger_than_the_queue_stops_being_tokenized_once_it_passes_it(encoder) -> None:
    """500 inputs each within Lt but together far more than the queue holds: refused (413) once the
    inputs counted pass the queue's tokens, the rest never tokenized."""
    texts = [words(40, seed) for seed in range(500)]  # ~42 tokens each, ~21000 in all
    app = app_of(encoder, max_client_batch_size=500, max_queue_tokens=4 * LT)
    spy = CountingTokenizer(app.state.service.planner.tokenizer)
    app.state.service.planner.tokenizer = spy
    with TestClient(app) as http:
        refused = http.post("/embed", json={"inputs": texts})
    assert refused.status_code == 413 and "max_queue_tokens" in refused.json()["error"]
    assert refused.json()["error"].startswith("'inputs': the first 7 of its 500 inputs have")
    assert 0 < spy.chars < sum(len(t) for t in texts) / 20


def test_inputs_before_the_refused_one_are_planned_and_none_after(encoder) -> None:
    app = app_of(encoder, max_client_batch_size=64)
    planner = app.state.service.planner
    spy = CountingTokenizer(planner.tokenizer)
    planner.tokenizer = spy
    texts = ["a short one", words(5, 1), words(400, 2)] + [words(20, i) for i in range(40)]
    with pytest.raises(ValueError, match=r"input\[2\] has \d+ tokens"):
        planner.plan(texts, "", "extend", [f"input[{i}]" for i in range(len(texts))])
    assert spy.chars <= sum(len(t) for t in texts[:3]) + len(texts[3]) * 16  # at most the rest of one block


# ------------------------------------------------------------------ 9. a port is an argument
@pytest.mark.parametrize("port", ["70000", "65536", "-1", "8.5", "http"])
def test_a_port_outside_the_tcp_range_is_an_argument_error(port, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser(["serve"]).parse_args(["serve", "--port", port])
    assert exited.value.code == 2 and "argument --port: a port is an integer in 0..65535" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["0", "65535", "8080"])
def test_ports_in_range_are_taken(port) -> None:
    assert build_parser(["serve"]).parse_args(["serve", "--port", port]).port == int(port)


# ------------------------------------------------------------------ 10. a late chunk with no token
def test_a_late_chunk_with_no_token_names_its_input_before_the_model_runs(encoder, monkeypatch) -> None:
    ran, real = [], encoder.runner.token_states
    monkeypatch.setattr(encoder.runner, "token_states", lambda *a, **k: ran.append(1) or real(*a, **k))
    pieces = ["the cat is ", "on the ", "\u200b", "mat ."]
    with TestClient(app_of(encoder)) as http:
        refused = http.post("/v1/embeddings", json={"model": "m", "input": pieces, "late_chunking": True})
        chunks = http.post("/embed_chunks", json={"inputs": ["of the web", "the cat \u200b is"],
                                                  "chunking": [[[0, 10]], [[0, 8], [8, 9], [9, 12]]]})
        nothing = http.post("/embed_chunks", json={"inputs": ["the cat", "\u200b\u200b"], "chunking": "tokens:4"})
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["param"] == "input"
    assert error["message"].startswith("input[2] (characters 18..19, '\\u200b') has no token")
    assert chunks.status_code == 422 and chunks.json()["error"].startswith("inputs[1], chunk 1 (characters 8..9")
    assert nothing.status_code == 422 and nothing.json()["error"].startswith("inputs[1] has no token of its own")
    assert ran == []  # refused before any token states were computed


# ------------------------------------------------------------------ issue 41: the 413 and the overflow flag
def test_the_413_names_the_cut_that_keeps_the_extension_and_the_true_length(encoder, tokenizer) -> None:
    """A document longer than the planner's first scan (16 characters per token of Lt) but within
    four scans: the message gives its exact length, and the policy it names embeds it as eval does."""
    document = words(700, 5)
    n = len(tokenizer(document)["input_ids"])
    assert CHARS_PER_TOKEN * (LT + 2) < len(document) <= COUNT_WHOLE_FACTOR * CHARS_PER_TOKEN * (LT + 2)
    with TestClient(app_of(encoder)) as http:
        refused = http.post("/v1/embeddings", json={"model": "m", "input": ["fine", document]})
        message = refused.json()["error"]["message"]
        assert refused.status_code == 413 and message.startswith(f"input[1] has {n} tokens")
        assert "overflow='truncate_to_max'" in message and "counting stopped" not in message
        assert "'truncate' cuts to the model's window of 32 tokens" in message  # named for what it is
        kept = http.post("/v1/embeddings", json={"model": "m", "input": [document], "overflow": "truncate_to_max",
                                                 "encoding_format": "float"})
        error_policy = http.post("/embed", json={"inputs": words(40, 6), "overflow": "error"})
    with pytest.warns(UserWarning, match="truncated"):
        expected = encoder.encode([document])  # eval's cut: at Lt, with the extension
    np.testing.assert_allclose(np.array(kept.json()["data"][0]["embedding"]), expected[0], atol=1e-5)
    assert kept.json()["usage"]["prompt_tokens"] == LT and kept.json()["truncated"] == [0]
    assert error_policy.status_code == 413 and "ask for overflow='extend'" in error_policy.json()["error"]


def test_the_413_of_a_huge_input_gives_a_bound_that_reads_as_one(encoder, tokenizer) -> None:
    huge = words(20_000, 7)
    with TestClient(app_of(encoder, max_body_bytes=1_000_000)) as http:
        message = http.post("/embed", json={"inputs": [huge]}).json()["error"]
    bound, scanned = (int(x) for x in
                      message.removeprefix("inputs[0] has at least ").split(" characters")[0].split(" tokens in its first "))
    assert bound > LT and scanned < len(huge) / 10
    assert bound <= len(tokenizer(huge[:scanned])["input_ids"]) <= len(tokenizer(huge)["input_ids"])


def test_serve_has_one_overflow_flag_and_the_encoders_is_not_one(capsys) -> None:
    parser = build_parser(["serve"])
    help_text = parser._subparsers._group_actions[0].choices["serve"].format_help()
    assert "--overflow" in help_text and "--on-overflow" not in help_text and "truncate_to_max" in help_text

    def parse(*flags: str) -> argparse.Namespace:
        return build_parser(["serve"]).parse_args(["serve", *flags])

    assert parse().overflow == "extend" and "on_overflow" not in encoder_options(parse())
    assert parse("--overflow", "truncate").overflow == "truncate"  # the server's: cut to Lo
    assert parse("--overflow", "truncate_to_max").overflow == "truncate_to_max"
    with pytest.raises(SystemExit) as exited:
        parse("--on-overflow", "truncate")  # the encoder's flag (its "truncate" cuts at Lt) is no serve flag
    assert exited.value.code == 2 and "unrecognized arguments: --on-overflow" in capsys.readouterr().err
