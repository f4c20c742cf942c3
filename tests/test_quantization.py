"""int8 dynamic quantization (``quantization="int8"``): what a quantized layer computes, against a
naive formula; every method still runs; the real MiniLM stays close to float32; clear errors.

The naive reference of one quantized linear layer y = x W^T + b: weights per output channel
s_w = max|W_row| / 127.5, W_q = clamp(round(W / s_w), -128, 127); inputs per token
s_x = max|x_token| / 127.5, x_q = clamp(round(x / s_x), -128, 127); y = (x_q W_q^T) s_x s_w + b,
the integer product exact.  (Division is by multiplying with the reciprocal scale, as torchao does:
a value at exactly -127.5 steps then rounds the same way.)
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import LO, fast_sample, real_model_folder, words
from test_encoder import CASES, FAST_CASES, encoder_for

from longembed import load_encoder
from longembed import quantization as quantization_module
from longembed.cli.main import main
from longembed.evaluation.provenance import cache_fingerprint, library_versions, model_identity
from longembed.model_runner import ModelRunner
from longembed.quantization import quantize_linear_layers

TEXTS = [words(3 * LO, 1), words(10, 2), words(2 * LO + 5, 3)]
COSINE_BOUND = 0.999  # int8 against float32 on the tiny random models; measured worst 0.999993 (llama)


def naive_int8_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    def quantize(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = t.abs().amax(-1, keepdim=True) / 127.5  # float32, as the kernels compute it
        return torch.clamp(torch.round(t * (1.0 / scale)), -128, 127).double(), scale.double()

    x_q, s_x = quantize(x)
    w_q, s_w = quantize(weight)
    y = (x_q @ w_q.T) * s_x * s_w.T
    return (y if bias is None else y + bias.double()).float()


def test_a_quantized_layer_computes_the_naive_int8_formula() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(48, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16, bias=False))
    original = copy.deepcopy(model)
    quantize_linear_layers(model, "int8")
    x = torch.randn(3, 7, 48) * 3
    hidden = model[0](x)
    expected = naive_int8_linear(x, original[0].weight.detach(), original[0].bias.detach())
    assert torch.allclose(hidden, expected, rtol=1e-5, atol=1e-5)
    float_out = original[0](x)
    assert (hidden - float_out).abs().max() > 1e-3  # rounded, not the float layer
    out = model[2](torch.relu(hidden))
    assert torch.allclose(out, naive_int8_linear(torch.relu(hidden), original[2].weight.detach(), None), atol=1e-5)


@pytest.mark.parametrize(("family", "method"), fast_sample(CASES, FAST_CASES))
def test_every_method_runs_with_int8_linear_layers(tiny_models, family, method) -> None:
    reference = encoder_for(tiny_models, family, method).encode(TEXTS, normalize_embeddings=True)
    quantized = encoder_for(tiny_models, family, method, quantization="int8")
    linear = [m for m in quantized.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linear and all(m.weight.dtype == torch.float32 and m.weight.__class__ is not torch.nn.Parameter
                          for m in linear)  # every weight is torchao's int8 tensor subclass
    vectors = quantized.encode(TEXTS, normalize_embeddings=True)
    assert vectors.dtype == np.float32
    cosine = (vectors * reference).sum(1)
    assert np.abs(vectors - reference).max() > 0 and cosine.min() > COSINE_BOUND


@pytest.mark.slow
def test_real_minilm_pi_in_int8_stays_close_to_float32() -> None:
    folder = real_model_folder("all-MiniLM-L6-v2")
    text = ["the meeting turned to the budget and the schedule for the next quarter " * 60]
    reference = load_encoder(folder, "pi", max_length=2048).encode(text)
    vectors = load_encoder(folder, "pi", max_length=2048, quantization="int8").encode(text)
    assert np.abs(vectors - reference).max() > 0 and float((vectors * reference).sum()) > 0.99


def test_int8_is_part_of_the_cache_key(tiny_models) -> None:
    versions = library_versions()

    def key(**options) -> dict:
        encoder = load_encoder(tiny_models["bert"], lazy=True, **options)
        return cache_fingerprint(encoder, model_identity(encoder), "", 1.0, versions)

    plain, int8 = key(quantization=None), key(quantization="int8")
    assert key() == plain  # no quantization is the default: the same vectors, the same key
    expected = copy.deepcopy(plain)  # int8 changes the key by its quantization setting, and nothing else
    expected["config"]["quantization"] = "int8"
    assert plain["config"]["quantization"] is None and int8 == expected


def test_bad_quantization_options_are_clear_errors(tiny_models, monkeypatch) -> None:
    with pytest.raises(ValueError, match="quantization must be one of .*int8.*got 'int4'"):
        load_encoder(tiny_models["bert"], quantization="int4")
    with pytest.raises(ValueError, match="starts from float32 weights; got dtype='bfloat16'"):
        load_encoder(tiny_models["bert"], quantization="int8", dtype="bfloat16")
    with pytest.raises(ValueError, match="starts from float32 weights"):
        quantize_linear_layers(torch.nn.Linear(4, 4).to(torch.bfloat16), "int8")
    with pytest.raises(ValueError, match="no nn.Linear layer"):
        quantize_linear_layers(torch.nn.LayerNorm(4), "int8")
    monkeypatch.setattr(quantization_module, "torchao_installed", lambda: False)
    with pytest.raises(ImportError, match=r"pip install 'longembed\[quantization\]'"):
        load_encoder(tiny_models["bert"], quantization="int8").encode(["a text"])


def test_the_cli_takes_quantization_and_records_it(tiny_models, tmp_path, monkeypatch) -> None:
    loaded = []
    original = ModelRunner._load_model

    def spy(self):
        model = original(self)
        loaded.append(sum(m.weight.__class__ is not torch.nn.Parameter for m in model.modules()
                          if isinstance(m, torch.nn.Linear)))
        return model

    monkeypatch.setattr(ModelRunner, "_load_model", spy)
    command = ["eval", "--model", str(tiny_models["bert"]), "--method", "pi", "--max-length", "512",
               "--tasks", "passkey", "--lengths", "256", "--queries-per-length", "5", "--quantization", "int8",
               "--cache-dir", str(tmp_path / "c"), "--no-estimate", "--output", str(tmp_path / "a")]
    assert main(command) == 0
    assert loaded and loaded[0] > 0
    assert '"quantization": "int8"' in (tmp_path / "a" / "results.json").read_text()
