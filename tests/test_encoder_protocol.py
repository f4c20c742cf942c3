"""The Encoder protocol (longembed.encoder_protocol): met by the encoder, the caching wrapper and a test
fake; the one prompt lookup of retrieval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from encoder_fakes import FakeEncoderMembers
from test_runner import HashEncoder

from longembed import load_encoder
from longembed.encoder_protocol import Encoder, check_encoder, retrieval_prompts
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.provenance import resolved_settings


@pytest.fixture(scope="module")
def tiny_bert(tiny_models: dict[str, Path]):
    return load_encoder(tiny_models["bert"], method="pi", max_length=64, prompts={"query": "q: ", "passage": "p: "})


def test_the_encoder_the_cache_wrapper_and_the_fake_meet_the_protocol(tiny_bert, tmp_path):
    fake = HashEncoder(tmp_path / "model")
    cached = CachedEncoder(tiny_bert, tmp_path / "cache", show_progress=False, log=None)
    for encoder in (tiny_bert, cached, fake, CachedEncoder(fake, tmp_path / "cache", log=None)):
        assert isinstance(encoder, Encoder)
        assert check_encoder(encoder) is encoder


def test_the_cache_wrapper_answers_as_the_encoder_it_wraps(tiny_bert, tmp_path):
    cached = CachedEncoder(tiny_bert, tmp_path / "cache", show_progress=False, log=None)
    assert (cached.config, cached.tokenizer, cached.prompts) == (tiny_bert.config, tiny_bert.tokenizer, tiny_bert.prompts)
    assert (cached.method, cached.max_length, cached.original_length) == ("pi", 64, tiny_bert.original_length)
    assert resolved_settings(cached) == resolved_settings(tiny_bert)
    assert cached.resolve_prompt(prompt_name="query") == "q: "
    assert cached.retrieval_prompts() == tiny_bert.retrieval_prompts() == {"query": "q: ", "document": "p: "}
    vectors = cached.encode(["a short text"], shard="t", prompt="q: ").vectors
    np.testing.assert_allclose(vectors, tiny_bert.encode(["a short text"], prompt="q: ", normalize_embeddings=True),
                               atol=1e-6)


def test_an_object_with_only_encode_is_an_encoder_and_one_without_is_named(tmp_path):
    class OnlyEncode:
        def encode(self, texts):
            return np.zeros((len(texts), 2), np.float32)

    cached = CachedEncoder(OnlyEncode(), tmp_path, log=None)
    assert isinstance(OnlyEncode(), Encoder) and cached.cache is None  # no model folder: uncached
    assert cached.config.model.endswith("OnlyEncode") and cached.tokenizer is None and cached.max_length is None
    with pytest.raises(TypeError, match="NoEncode is not an Encoder: it has no encode"):
        check_encoder(type("NoEncode", (), {})())


def test_retrieval_prompts_take_query_and_document_else_passage():
    assert retrieval_prompts({"query": "q: ", "document": "d: ", "passage": "p: "}) == {"query": "q: ", "document": "d: "}
    assert retrieval_prompts({"passage": "p: "}) == {"query": "", "document": "p: "}
    fake = FakeEncoderMembers()
    assert fake.retrieval_prompts() == {"query": "", "document": ""}
