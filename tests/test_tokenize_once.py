"""Tokenize once: one TokenizedInput per text, one overflow policy with one name per meaning.

References are independent of ``longembed.inputs``: ids and offsets come from the tokenizer called
directly, a cut input from slicing those ids, and the policies' effects from the plain model (method
truncate, Lo = max_length) and from the tokenizer's own counts.
"""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch
from conftest import LO, words
from fastapi.testclient import TestClient

from longembed import load_encoder
from longembed.cli.main import build_parser
from longembed.config import OVERFLOW_MODES, EncoderConfig
from longembed.inputs import cut, cut_text, resolve_overflow, tokenize
from longembed.model_runner import RunOptions
from longembed.overflow import (
    ERROR_OVER_WINDOW,
    EXTEND,
    OVERFLOW_POLICIES,
    TRUNCATE_TO_MAX,
    TRUNCATE_TO_WINDOW,
    overflow_names,
)
from longembed.serving import OVERFLOW_POLICIES as SERVER_NAMES
from longembed.serving import ServerSettings, create_app

LT = 4 * LO


@pytest.fixture(scope="module")
def bert(tiny_models):
    return tiny_models["bert"]


@pytest.fixture(scope="module")
def pi(bert):
    return load_encoder(bert, method="pi", max_length=LT)


@pytest.fixture(scope="module")
def plain(bert):
    return load_encoder(bert, method="truncate")  # max_length = Lo: cuts at the window itself


class Counting:
    """A tokenizer that records the texts of every call (and is otherwise the tokenizer)."""

    def __init__(self, real, calls: list[str]):
        self.real, self.calls = real, calls

    def __call__(self, texts, *args, **kwargs):
        self.calls.extend([texts] if isinstance(texts, str) else list(texts))
        return self.real(texts, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def n_tokens(encoder, text: str) -> int:
    return len(encoder.tokenizer(text)["input_ids"])


# ----------------------------------------------------------------------------- the policy names
def test_each_name_means_one_thing_and_the_known_names_stay_as_aliases() -> None:
    assert {p.name: (p.limit, p.action) for p in OVERFLOW_POLICIES.values()} == {
        "extend": ("max", "error"), "truncate_to_max": ("max", "truncate"),
        "truncate_to_window": ("window", "truncate"), "error_over_window": ("window", "error"),
    }
    # the encoder's on_overflow: truncate cuts at Lt, error refuses above Lt
    assert resolve_overflow("truncate", "encoder") is TRUNCATE_TO_MAX
    assert resolve_overflow("error", "encoder") is EXTEND
    # the server's overflow: extend runs up to Lt, truncate cuts at Lo, error refuses above Lo
    assert resolve_overflow("extend", "server") is EXTEND
    assert resolve_overflow("truncate", "server") is TRUNCATE_TO_WINDOW
    assert resolve_overflow("error", "server") is ERROR_OVER_WINDOW
    for context in ("encoder", "server"):
        for name, policy in OVERFLOW_POLICIES.items():
            assert resolve_overflow(name, context) is policy
            assert resolve_overflow(policy, context) is policy
    assert TRUNCATE_TO_WINDOW.limit_for(window=512, max_length=4096) == 512
    assert TRUNCATE_TO_MAX.limit_for(window=512, max_length=4096) == 4096


def test_one_validation_for_the_config_the_settings_the_app_and_the_command_line(bert) -> None:
    encoder_names, server_names = overflow_names("encoder"), overflow_names("server")
    assert encoder_names[:2] == ("truncate", "error") and server_names[:3] == ("extend", "truncate", "error")
    assert encoder_names == OVERFLOW_MODES and tuple(SERVER_NAMES) == server_names
    with pytest.raises(ValueError, match="on_overflow must be one of truncate, error, extend, truncate_to_max"):
        EncoderConfig(on_overflow="chunk")
    with pytest.raises(ValueError, match="overflow must be one of extend, truncate, error, truncate_to_max"):
        ServerSettings(overflow="chunk")
    assert EncoderConfig(on_overflow="truncate_to_window").on_overflow == "truncate_to_window"  # kept as written
    assert ServerSettings(overflow="error_over_window").overflow == "error_over_window"
    app = create_app(load_encoder(bert, method="truncate"), ServerSettings(allowed_hosts=("testserver",)))
    with TestClient(app) as http:
        refused = http.post("/v1/embeddings", json={"model": "m", "input": "x", "overflow": "chunk"}).json()
        info = http.get("/info").json()
    assert refused["error"]["message"] == f"'overflow' must be one of {', '.join(server_names)}; got 'chunk'"
    assert info["overflow_policies"] == list(server_names)
    parser = build_parser(["serve"])
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--overflow", "chunk"])
    assert isinstance(parser.parse_args(["serve", "--overflow", "truncate_to_max"]), argparse.Namespace)


# ----------------------------------------------------------------------------- TokenizedInput
def test_a_tokenized_input_is_the_tokenizers_ids_offsets_and_layout(pi) -> None:
    tokenizer, prompt, text = pi.tokenizer, "query: is it ", words(20, seed=4)
    (x,) = tokenize([text], tokenizer, prompt, pi.runner.special_tokens)
    assert x.ids == tokenizer(prompt + text)["input_ids"] and x.n_tokens == x.n_original == len(x.ids)
    own = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert x.body == own["input_ids"] and x.offsets == [tuple(o) for o in own["offset_mapping"]]
    assert (x.head, x.tail) == (1, 1) and x.prompt == len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert x.ids[0] == tokenizer.cls_token_id and x.ids[-1] == tokenizer.sep_token_id
    (content,) = tokenize([text], tokenizer)  # no special-token layout: the content tokens only
    assert content.ids == own["input_ids"] and (content.head, content.prompt, content.tail) == (0, 0, 0)


def test_a_cut_keeps_the_first_tokens_and_the_closing_ones_and_maps_back_to_text(pi) -> None:
    tokenizer, text = pi.tokenizer, words(60, seed=5)
    (x,) = tokenize([text], tokenizer, "", pi.runner.special_tokens)
    ids = tokenizer(text)["input_ids"]
    assert len(ids) > LO
    short = cut(x, LO)
    assert short.ids == ids[: LO - 1] + ids[-1:] and short.truncated and short.n_original == len(ids)
    assert cut(x, len(ids)) is x and not x.truncated and cut_text(x) == text
    kept = cut_text(short)
    assert text.startswith(kept) and tokenizer(kept)["input_ids"] == short.ids  # the cut text runs as the cut ids
    assert len(short.offsets) == LO - 2 and kept.endswith(text[slice(*short.offsets[-1])])


# ----------------------------------------------------------------------------- tokenized once
def test_an_encoder_input_is_tokenized_once(bert) -> None:
    encoder = load_encoder(bert, method="pcw", max_length=LT)
    calls: list[str] = []
    encoder.runner.tokenizer = Counting(encoder.tokenizer, calls)
    text = words(100, seed=6)  # longer than Lo (PCW windows), within Lt
    vector = encoder.encode([text], prompt="query: ")
    assert [c for c in calls if text in c] == ["query: " + text]  # once; the prompt alone once more, for its layout
    assert calls == ["query: " + text, "query: "]
    calls.clear()
    again, _ = encoder.runner.encode_tokenized(encoder.runner.tokenize([text], "query: "), RunOptions())
    assert len(calls) == 2 and np.array_equal(again, vector)


def test_a_cut_server_input_is_tokenized_once_and_runs_as_the_cut_ids(bert, plain) -> None:
    encoder = load_encoder(bert, method="pi", max_length=LT)
    app = create_app(encoder, ServerSettings(max_batch_tokens=LT, allowed_hosts=("testserver",)))
    service, calls = app.state.service, []
    service.planner.tokenizer = Counting(service.planner.tokenizer, calls)
    encoder.runner.tokenizer = Counting(encoder.tokenizer, calls)
    long, short = words(90, seed=7), words(5, seed=8)
    assert n_tokens(plain, long) > LO
    with TestClient(app) as http:
        response = http.post("/embed", json={"inputs": [long, short], "truncate": True})
    assert response.status_code == 200 and response.headers["x-longembed-truncated"] == "0"
    # one call for the request, each text in it once (of the long one, a bounded prefix: see serving.overflow_planner)
    assert len(calls) == 2 and long.startswith(calls[0]) and calls[1] == short
    with pytest.warns(UserWarning, match="truncated"):
        expected = plain.encode([long, short], normalize_embeddings=True)  # the plain model cuts at Lo itself
    np.testing.assert_allclose(np.array(response.json(), dtype=np.float32), expected, atol=1e-6)


# ----------------------------------------------------------------------------- the policies' effects
def test_the_encoder_and_the_server_apply_every_policy_the_same_way(bert, plain) -> None:
    texts = [words(5, seed=9), words(60, seed=10), words(400, seed=11)]  # <= Lo, in (Lo, Lt], > Lt
    counts = [n_tokens(plain, t) for t in texts]
    assert counts[0] <= LO < counts[1] <= LT < counts[2]
    with pytest.warns(UserWarning):
        at_window = plain.encode(texts, normalize_embeddings=True)
    window_cut = load_encoder(bert, method="pi", max_length=LT, on_overflow="truncate_to_window")
    with pytest.warns(UserWarning, match="2 of 3 inputs exceed the model's window Lo=32"):
        cut, stats = window_cut.encode(texts, normalize_embeddings=True, return_stats=True)
    np.testing.assert_allclose(cut, at_window, atol=1e-6)
    assert stats.truncated_indices == [1, 2]
    refusing = load_encoder(bert, method="pi", max_length=LT, on_overflow="error_over_window")
    with pytest.raises(ValueError, match="2 of 3 inputs exceed the model's window"):
        refusing.encode(texts)
    extending = load_encoder(bert, method="pi", max_length=LT, on_overflow="extend")  # = on_overflow="error"
    with pytest.raises(ValueError, match=f"1 of 3 inputs exceed max_length={LT}"):
        extending.encode(texts)
    to_max = load_encoder(bert, method="pi", max_length=LT)
    with pytest.warns(UserWarning, match=f"1 of 3 inputs exceed max_length={LT}"):
        expected_max = to_max.encode(texts, normalize_embeddings=True)
    app = create_app(to_max, ServerSettings(max_batch_tokens=LT, allowed_hosts=("testserver",)))
    with TestClient(app) as http:
        post = lambda overflow: http.post("/embed", json={"inputs": texts, "overflow": overflow})  # noqa: E731
        as_max, as_window = post("truncate_to_max"), post("truncate")
        refused = [post(name).status_code for name in ("extend", "error", "error_over_window")]
    np.testing.assert_allclose(np.array(as_max.json(), dtype=np.float32), expected_max, atol=1e-6)
    np.testing.assert_allclose(np.array(as_window.json(), dtype=np.float32), at_window, atol=1e-6)
    assert as_max.headers["x-longembed-truncated"] == "2" and as_window.headers["x-longembed-truncated"] == "1,2"
    assert refused == [413, 413, 413]
    with torch.no_grad():  # the planner's cut is the plain model's: first Lo - 1 tokens and [SEP]
        ids = plain.tokenizer(texts[1])["input_ids"]
        reference = torch.nn.functional.normalize(plain.runner._pooled([ids[: LO - 1] + ids[-1:]]), dim=-1)[0].numpy()
    np.testing.assert_allclose(as_window.json()[1], reference, atol=1e-6)
