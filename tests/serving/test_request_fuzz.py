"""Every request body a client can send, as a property (issue 40: "a test for the whole class").

Hypothesis draws bodies for every POST route: arbitrary JSON values (not only objects), each route's
own fields with right and wrong types (strings that are empty, blank, zero-width, control characters,
lone surrogates, CJK, emoji, a few hundred words or tens of thousands of characters; numbers out of
range, NaN, huge integers; lists nested wrongly; spans outside the text) and fields the route does not
know.  For each body, the server (a tiny BERT at Lo = 32 served at Lt = 64, through FastAPI's
TestClient, which re-raises any exception a route lets out) must:

* answer 200, or a 4xx (never a 5xx), and log no error or traceback;
* name what is wrong: the message names a field the route reads or the body sent (OpenAI's shape
  also puts it in ``param``), or says that the request body itself is the problem.

The examples are fixed (``derandomize``), so CI runs the same bodies every time.
"""

from __future__ import annotations

import json
import logging
import operator
import re
from typing import Any

import pytest
from conftest import LO, build_tiny, words
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longembed import load_encoder
from longembed.serving import ServerSettings, create_app
from longembed.serving.settings import OVERFLOW_POLICIES
from longembed.serving.token_validation import CHUNK_FIELDS, EMBED_ALL_FIELDS, TOKENIZE_FIELDS
from longembed.serving.validation import OPENAI_FIELDS, TEI_EMBED_FIELDS

#: Every POST route and the fields it reads (the modules' own lists: a new field is fuzzed too).
ROUTES = {
    "/v1/embeddings": OPENAI_FIELDS,
    "/embed": TEI_EMBED_FIELDS,
    "/embed_chunks": CHUNK_FIELDS,
    "/embed_all": EMBED_ALL_FIELDS,
    "/tokenize": TOKENIZE_FIELDS,
}
EXAMPLES_PER_ROUTE = 60
MAX_BODY_BYTES = 60_000
PROMPTS = {"query": "is it ", "document": "the doc , "}

# ------------------------------------------------------------------ strategies
ODD_TEXTS = ["", " ", "\n\t ", "\u200b", "\u200b\u200b\u200b", "\x00", "\ufeff", "\ud800", "a\udfffb", "é",
             "日本語のテキスト", "🙂🙂", "[CLS]", "[SEP] [PAD] [MASK]", "the cat .", "a" * 300]
texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(ODD_TEXTS),
    st.builds(words, st.integers(1, 400), st.integers(0, 9)),  # up to several windows of Lt
    st.builds(operator.mul, st.sampled_from(["x", "the ", "\u200b", " ", "日", "cat."]), st.integers(0, 15_000)),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), texts)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
text_lists = st.lists(texts, min_size=0, max_size=8)
token_ids = st.lists(st.integers(-5, 200), max_size=5) | st.lists(st.lists(st.integers(0, 200), max_size=4), max_size=3)
spans = st.lists(st.integers(-3, 80), max_size=3)
chunkings = st.one_of(
    st.sampled_from(["tokens:8", "tokens:8:2", "tokens:1", "tokens:0", "tokens:4:4", "sentences:1", "sentences:0",
                     "words:3", "tokens:99999999999999999999", ""]),
    st.lists(spans, max_size=4),  # one string's spans
    st.lists(st.lists(spans, max_size=3), max_size=4),  # spans per input
    json_values,
)
switch = st.booleans() | json_values
FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "input": texts | text_lists | token_ids | json_values,
    "inputs": texts | text_lists | token_ids | json_values,
    "model": st.just("m") | json_values,
    "encoding_format": st.sampled_from(["float", "base64", "int8"]) | json_values,
    "dimensions": st.sampled_from([1, 8, 16, 17, 0, -1, 2**64]) | json_values,
    "user": texts | json_values,
    "prompt_name": st.sampled_from(["query", "document", "nope", ""]) | json_values,
    "overflow": st.sampled_from([*OVERFLOW_POLICIES, "chunk"]) | json_values,
    "truncation_direction": st.sampled_from(["Right", "right", "Left"]) | json_values,
    "chunking": chunkings,
    **{name: switch for name in ("late_chunking", "late", "normalize", "truncate", "add_special_tokens")},
}


def bodies(route: str) -> st.SearchStrategy[Any]:
    """Mostly objects of the route's fields (its text field usually present), sometimes with fields it
    does not know, sometimes any JSON value at all."""
    fields = ROUTES[route]
    text_field = "input" if route == "/v1/embeddings" else "inputs"
    values = {name: FIELD_VALUES.get(name, json_values) for name in fields}
    usual = st.fixed_dictionaries({text_field: values[text_field]},
                                  optional={k: v for k, v in values.items() if k != text_field})
    loose = st.fixed_dictionaries({}, optional=values)
    extra = st.dictionaries(st.text(min_size=1, max_size=12), json_values, min_size=1, max_size=2)
    with_extra = st.tuples(usual, extra).map(lambda pair: {**pair[1], **pair[0]})
    return st.one_of(usual, usual, usual, loose, with_extra, json_values)


# ------------------------------------------------------------------ the server
class Errors(logging.Handler):
    """Records of level ERROR and above, and any record carrying a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)


@pytest.fixture(scope="module")
def errors():
    handler = Errors()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


@pytest.fixture(scope="module")
def http(tmp_path_factory, errors):
    folder = build_tiny("bert", tmp_path_factory.mktemp("fuzz") / "bert")
    encoder = load_encoder(folder, "pi", max_length=2 * LO, prompts=PROMPTS)
    settings = ServerSettings(
        max_batch_tokens=8 * LO, max_client_batch_size=6, max_body_bytes=MAX_BODY_BYTES, max_document_tokens=400,
        max_chunks_per_request=24, max_token_vectors=160, allow_any_dimensions=True, allowed_hosts=("testserver",),
    )
    with TestClient(create_app(encoder, settings)) as client:
        yield client


def names_the_problem(body: Any, route: str, message: str, param: str | None) -> bool:
    """The message names the request body, or a field (one the route reads or one the body sent);
    OpenAI's ``param``, when given, is such a field and appears in the message."""
    if "request body" in message:
        return True
    fields = set(ROUTES[route]) | (set(body) if isinstance(body, dict) else set())
    if param is not None and (param not in fields or not mentions(message, param)):
        return False
    return any(mentions(message, name) for name in fields if name)


def mentions(message: str, name: str) -> bool:
    """``name`` in ``message`` as a word of its own, or as its repr (an unknown field is quoted)."""
    return repr(name) in message or re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message) is not None


@pytest.mark.slow
@pytest.mark.parametrize("route", list(ROUTES))
@settings(max_examples=EXAMPLES_PER_ROUTE, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_no_body_makes_a_5xx_and_every_4xx_names_its_field(http, errors, route, data) -> None:
    body = data.draw(bodies(route), label="body")
    errors.records.clear()
    content = json.dumps(body).encode()  # NaN as JSON's NaN, lone surrogates as \\ud800 escapes
    response = http.post(route, content=content, headers={"content-type": "application/json"})
    assert not errors.records, [r.getMessage() for r in errors.records]
    assert response.status_code in (200, 400, 413, 422), (response.status_code, response.text)
    answer = response.json()
    if response.status_code == 200:
        return
    if route == "/v1/embeddings":
        message, param = answer["error"]["message"], answer["error"]["param"]
    else:
        message, param = answer["error"], None
        assert answer["error_type"] == "Validation"
    assert names_the_problem(body, route, message, param), (message, param)
