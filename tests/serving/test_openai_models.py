"""OpenAI clients find the served model (``GET /v1/models``, issue 51), ``serve --help``'s curl examples
work as printed (each parsed as curl reads it, sent to a test server), and every 429/503 has Retry-After.
A tiny BERT through FastAPI's TestClient; the ``openai`` package itself lists and retrieves the model.
"""

from __future__ import annotations

import re
import shlex

import numpy as np
import openai
import pytest
from conftest import build_tiny
from fastapi.testclient import TestClient

from longembed import load_encoder
from longembed.cli.main import build_parser
from longembed.serving import ServerSettings, create_app
from longembed.serving.app import refusal
from longembed.serving.batcher import QueueFull
from longembed.serving.service import RetryLater
from longembed.serving.validation import ApiError, openai_error, tei_error

KEY = "s3cret"


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return load_encoder(build_tiny("bert", tmp_path_factory.mktemp("models") / "bert"), "pi", max_length=64)


def app_of(encoder, **settings):
    return create_app(encoder, ServerSettings(allowed_hosts=("testserver",), **settings))


def test_v1_models_answers_as_openai_does(encoder) -> None:
    """A list of the one served model ({id, object "model", created, owned_by}), the model by its id,
    a 404 in OpenAI's error shape for another id, and the API key required as on every OpenAI route."""
    app = app_of(encoder, served_model_name="tiny-bert", api_key=KEY)
    auth = {"Authorization": f"Bearer {KEY}"}
    with TestClient(app) as http:
        listed = http.get("/v1/models", headers=auth)
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert body["object"] == "list" and len(body["data"]) == 1
        model = body["data"][0]
        assert set(model) == {"id", "object", "created", "owned_by"}
        assert (model["id"], model["object"], model["owned_by"]) == ("tiny-bert", "model", "longembed")
        assert isinstance(model["created"], int) and model["created"] > 1_600_000_000
        assert http.get("/v1/models/tiny-bert", headers=auth).json() == model
        missing = http.get("/v1/models/gpt-4", headers=auth)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "model_not_found" and missing.json()["error"]["param"] == "model"
        assert http.get("/v1/models").status_code == 401
        assert http.get("/v1/models/tiny-bert").status_code == 401


def test_the_openai_client_lists_and_retrieves_the_model(encoder) -> None:
    with TestClient(app_of(encoder, served_model_name="tiny-bert")) as http:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http, max_retries=0)
        assert [m.id for m in client.models.list()] == ["tiny-bert"]
        assert client.models.retrieve("tiny-bert").owned_by == "longembed"
        vectors = client.embeddings.create(model="tiny-bert", input=["a short text"], encoding_format="float")
    np.testing.assert_allclose(vectors.data[0].embedding, encoder.encode(["a short text"])[0], atol=1e-5)


def serve_help_examples() -> list[str]:
    """The examples of ``longembed serve --help``, continuation lines joined."""
    subparsers = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    epilog = subparsers.choices["serve"].format_help().split("examples:", 1)[1]
    return [line.strip() for line in re.sub(r"\\\n\s*", " ", epilog).splitlines() if line.strip()]


def as_curl_sends(command: str) -> tuple[str, str, dict[str, str], str | None]:
    """(method, path, headers, body) of a curl command, as curl sends it: ``-d`` makes a POST whose
    Content-Type is application/x-www-form-urlencoded unless a ``-H`` says otherwise.  An option this
    does not read fails the test, so an example cannot grow one that goes unchecked."""
    words, url, headers, body = shlex.split(command)[1:], None, {}, None
    while words:
        word = words.pop(0)
        if word == "-s":
            continue
        if word == "-H":
            name, _, value = words.pop(0).partition(":")
            headers[name.strip().lower()] = value.strip()
        elif word == "-d":
            body = words.pop(0)
            headers.setdefault("content-type", "application/x-www-form-urlencoded")
        elif not word.startswith("-") and url is None:
            url = word
        else:
            raise AssertionError(f"the test does not read curl's {word!r}: {command}")
    assert url is not None, command
    return ("POST" if body is not None else "GET"), "/" + url.split("/", 1)[1], headers, body


def test_every_curl_example_of_serve_help_works_as_printed(encoder) -> None:
    """Each curl example goes to a server set up as the serve example above it (its API key from
    LONGEMBED_API_KEY, none under --no-auth) and gets a 200 with what it asked for.  Before issue 51
    the example sent no Content-Type (415) and no model (400)."""
    examples, serve_command, checked = serve_help_examples(), None, 0
    for example in examples:
        if example.startswith(("longembed serve", "LONGEMBED_API_KEY=")):
            serve_command = example
            continue
        if not example.startswith("curl "):
            continue
        assert serve_command is not None, f"a curl example before any serve example: {example}"
        key = re.match(r"LONGEMBED_API_KEY=(\S+) ", serve_command)
        app = app_of(encoder, api_key=key.group(1) if key else None)
        method, path, headers, body = as_curl_sends(example)
        with TestClient(app) as http:
            response = http.request(method, path, headers=headers, content=body)
        assert response.status_code == 200, (example, response.status_code, response.text)
        answer = response.json()
        assert answer["object"] == "list" and answer["data"], example
        if path == "/v1/embeddings":
            assert len(answer["data"][0]["embedding"]) == encoder.embedding_dim
        checked += 1
    assert checked >= 2  # the examples hold curl commands to check


@pytest.mark.parametrize("status", [429, 503])
def test_every_refusal_to_retry_later_carries_retry_after(status) -> None:
    """A 429 or 503 raised as a plain ApiError (no estimate of its own) still says when to retry, in
    either route's shape; the batcher's refusals keep their estimate."""
    for shape in (openai_error, tei_error):
        assert refusal(ApiError(status, "busy"), shape).headers["Retry-After"] == "1"
        estimated = RetryLater(status, QueueFull("busy", 7.2), "queue_full")
        assert refusal(estimated, shape).headers["Retry-After"] == "8"
    assert "retry-after" not in refusal(ApiError(400, "bad"), openai_error).headers
