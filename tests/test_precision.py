"""Reduced precision and lazy loading: every method runs in bfloat16 and float16 (on CPU, through public
PyTorch APIs) close to float32, vectors come back as float32, the cache keeps precisions apart, and a
lazily built encoder reads its weights only when a vector has to be computed.

Tolerances (max abs difference of unit vectors against float32): bfloat16 keeps 8 bits of mantissa,
so about 4e-3 relative error per operation; over the tiny 2-layer models that gives at most ~2e-2
(measured worst: the last-token-pooled Llama, 2.2e-2), float16 (11 bits) ten times less.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch
from conftest import LO, fast_sample, real_model_folder, words
from test_encoder import CASES, FAST_CASES, encoder_for

from longembed import load_encoder
from longembed.cli.main import main
from longembed.evaluation.provenance import cache_fingerprint, library_versions, model_identity
from longembed.evaluation.runner import evaluate_model
from longembed.model_runner import ModelRunner

TOLERANCE = {"bfloat16": 3e-2, "float16": 5e-3}
TEXTS = [words(3 * LO, 1), words(10, 2), words(2 * LO + 5, 3)]  # past Lo, short, and padded together


@pytest.mark.parametrize(("family", "method"), fast_sample(CASES, FAST_CASES))
def test_every_method_runs_in_bfloat16_close_to_float32(tiny_models, family, method) -> None:
    reference = encoder_for(tiny_models, family, method).encode(TEXTS)
    reduced = encoder_for(tiny_models, family, method, dtype="bfloat16")
    assert next(reduced.model.parameters()).dtype == torch.bfloat16
    vectors = reduced.encode(TEXTS)
    assert vectors.dtype == np.float32
    difference = np.abs(vectors - reference).max()
    assert 0 < difference < TOLERANCE["bfloat16"]  # really reduced precision, and still close


@pytest.mark.parametrize("family", ["bert", "nomic", "modernbert", "llama", "jina"])
def test_float16_on_cpu(tiny_models, family) -> None:
    method = {"bert": "pi", "jina": "native"}.get(family, "selfextend")
    reference = encoder_for(tiny_models, family, method).encode(TEXTS)
    vectors = encoder_for(tiny_models, family, method, dtype="float16").encode(TEXTS)
    assert 0 < np.abs(vectors - reference).max() < TOLERANCE["float16"]


def test_token_embeddings_and_late_chunks_come_back_as_float32(tiny_models) -> None:
    encoder = encoder_for(tiny_models, "nomic", "ntk", dtype="bfloat16")
    states = encoder.encode(TEXTS[0], output_value="token_embeddings")
    assert states.dtype == np.float32
    (vectors, spans), = encoder.encode_chunks([TEXTS[0]], chunking="tokens:16")
    assert vectors.dtype == np.float32 and len(vectors) == len(spans)


def test_a_bad_dtype_is_a_clear_error(tiny_models) -> None:
    with pytest.raises(ValueError, match="dtype must be one of .*bfloat16.*got .int8."):
        load_encoder(tiny_models["bert"], dtype="int8")


def test_precisions_never_share_cached_vectors(tiny_models) -> None:
    versions = library_versions()

    def key(**options) -> dict:
        encoder = load_encoder(tiny_models["bert"], lazy=True, **options)
        return cache_fingerprint(encoder, model_identity(encoder), "", 1.0, versions)

    keys = {dtype: key(dtype=dtype) for dtype in ("float32", "bfloat16", "float16")}
    assert key() == keys["float32"]  # float32 is the default: the same vectors, the same key
    for first, second in itertools.combinations(keys, 2):  # every pair, float32 vs float16 included
        assert keys[first] != keys[second], (first, second)
    for dtype, got in keys.items():  # the dtype is what tells them apart, and nothing else
        expected = copy.deepcopy(keys["float32"])
        expected["config"]["dtype"] = dtype
        assert got == expected


@pytest.mark.slow
def test_real_minilm_in_bfloat16_is_within_5e_3() -> None:
    folder = real_model_folder("all-MiniLM-L6-v2")
    text = ["the meeting turned to the budget and the schedule for the next quarter " * 60]
    reference = load_encoder(folder, "pi", max_length=2048).encode(text)
    vectors = load_encoder(folder, "pi", max_length=2048, dtype="bfloat16").encode(text)
    assert 0 < np.abs(vectors - reference).max() < 5e-3


# ------------------------------------------------------------------ lazy weights
def test_a_lazy_encoder_loads_its_weights_at_the_first_forward(tiny_models) -> None:
    lazy = encoder_for(tiny_models, "nomic", "selfextend", lazy=True)
    assert not lazy.model_loaded
    assert (lazy.embedding_dim, lazy.max_length, lazy.runner.num_layers) == (32, 4 * LO, 2)  # known without weights
    vectors = lazy.encode(TEXTS)
    assert lazy.model_loaded
    np.testing.assert_array_equal(vectors, encoder_for(tiny_models, "nomic", "selfextend").encode(TEXTS))


def test_a_fully_cached_evaluation_never_loads_the_weights(tiny_models, tmp_path, monkeypatch) -> None:
    """The second run of the same evaluation is answered from the cache: no weights are read."""
    encoder = load_encoder(tiny_models["bert"], "pi", max_length=512, lazy=True)
    first = evaluate_model(encoder, ["passkey"], lengths=[256], output_dir=tmp_path / "a", cache_dir=tmp_path / "c",
                           estimate=False, queries_per_length=5)
    assert encoder.model_loaded

    loads = []
    monkeypatch.setattr(ModelRunner, "_load_model", lambda self: loads.append(1) or pytest.fail("loaded"))
    again = load_encoder(tiny_models["bert"], "pi", max_length=512, lazy=True)
    second = evaluate_model(again, ["passkey"], lengths=[256], output_dir=tmp_path / "b", cache_dir=tmp_path / "c",
                            estimate=False, queries_per_length=5)
    assert not loads and not again.model_loaded
    assert second.tasks["passkey"].metrics == first.tasks["passkey"].metrics


def test_the_cli_takes_dtype_and_a_cached_eval_rerun_loads_no_weights(tiny_models, tmp_path, monkeypatch) -> None:
    command = ["eval", "--model", str(tiny_models["bert"]), "--method", "pi", "--max-length", "512",
               "--tasks", "passkey", "--lengths", "256", "--queries-per-length", "5", "--dtype", "bfloat16",
               "--cache-dir", str(tmp_path / "c"), "--no-estimate"]
    assert main([*command, "--output", str(tmp_path / "a")]) == 0
    monkeypatch.setattr(ModelRunner, "_load_model", lambda self: pytest.fail("the weights were loaded"))
    assert main([*command, "--output", str(tmp_path / "b")]) == 0
    recorded = (tmp_path / "b" / "results.json").read_text()
    assert '"dtype": "bfloat16"' in recorded
