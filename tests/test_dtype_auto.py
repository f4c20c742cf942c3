"""``--dtype auto`` (issue 53, item 4): bfloat16 where the device computes it natively, float32 elsewhere, decided
in ``longembed.precision`` with its reason; the CPU's support is injected (this machine may have none)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import build_tiny, words

import longembed.precision as precision
from longembed import load_encoder
from longembed.cli.main import main
from longembed.errors import UserError
from longembed.precision import cpu_bf16_support, min_cosine, resolve_dtype


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def cpu_with(monkeypatch: pytest.MonkeyPatch, instructions: str | None) -> None:
    monkeypatch.setattr(precision, "cpu_bf16_support", lambda: instructions)


@pytest.mark.parametrize(("instructions", "dtype"), [("AMX", "bfloat16"), ("AVX-512 BF16", "bfloat16"), (None, "float32")])
def test_auto_follows_the_cpus_native_bfloat16(monkeypatch, instructions, dtype) -> None:
    cpu_with(monkeypatch, instructions)
    chosen = resolve_dtype("auto", "cpu")
    assert chosen.dtype == dtype
    assert chosen.reason.startswith(f"{dtype} (auto: ")
    if instructions is not None:
        assert instructions in chosen.reason
    else:
        assert "no native bfloat16" in chosen.reason and "\n" not in chosen.reason


def test_auto_on_a_gpu_asks_torch_whether_it_has_bfloat16_units(monkeypatch) -> None:
    monkeypatch.setattr(precision, "resolve_device", lambda device: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    for native, dtype in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(precision, "cuda_bf16_support", lambda device, native=native: native)
        assert resolve_dtype("auto", "cuda").dtype == dtype


def test_auto_is_float32_under_quantization_and_an_explicit_dtype_is_kept(monkeypatch) -> None:
    cpu_with(monkeypatch, "AMX")
    assert resolve_dtype("auto", "cpu", quantization="int8").dtype == "float32"
    assert resolve_dtype("float16", "cpu") == precision.Precision("float16", "float16 (asked for)")
    with pytest.raises(UserError, match="dtype must be one of auto, float32, bfloat16, float16, got 'int4'"):
        resolve_dtype("int4")


def test_the_cpu_flags_are_read_when_torch_does_not_say(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n", encoding="utf-8")
    monkeypatch.setattr(precision, "CPUINFO", info)
    assert cpu_bf16_support() == "AVX-512 BF16"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2\n", encoding="utf-8")
    assert cpu_bf16_support() is None


def test_load_encoder_resolves_auto_into_its_config(monkeypatch, model) -> None:
    cpu_with(monkeypatch, "AMX")
    encoder = load_encoder(model, "pi", 128, device="cpu", dtype="auto")
    assert encoder.config.dtype == "bfloat16" and next(encoder.model.parameters()).dtype == torch.bfloat16
    cpu_with(monkeypatch, None)
    assert load_encoder(model, "pi", 128, device="cpu", dtype="auto").config.dtype == "float32"


def test_min_cosine_is_the_least_over_rows() -> None:
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert min_cosine(a, a) == pytest.approx(1.0)
    assert min_cosine(a, np.array([[1.0, 1.0], [0.0, 1.0]])) == pytest.approx(np.sqrt(0.5))


def test_embed_defaults_to_auto_and_eval_flags_accept_it(monkeypatch, model, tmp_path, capsys) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(f'{{"text": "{words(30, i)}"}}\n' for i in range(3)), encoding="utf-8")
    cpu_with(monkeypatch, "AMX")
    assert main(["embed", str(source), "-o", str(tmp_path / "auto.npy"), "--model", str(model), "--method", "pi",
                 "--max-length", "128", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "dtype bfloat16 (auto: this CPU computes it natively, AMX)" in out and "dtype='bfloat16'" in out
    assert main(["embed", str(source), "-o", str(tmp_path / "full.npy"), "--model", str(model), "--method", "pi",
                 "--max-length", "128", "--device", "cpu", "--dtype", "float32"]) == 0
    assert "dtype float32 (asked for)" in capsys.readouterr().out
    reduced, full = np.load(tmp_path / "auto.npy"), np.load(tmp_path / "full.npy")
    assert 0 < np.abs(reduced - full).max() < 3e-2  # really bfloat16, close to float32


def test_eval_keeps_float32_and_records_what_an_asked_for_auto_chose(monkeypatch, model, tmp_path, capsys) -> None:
    cpu_with(monkeypatch, "AMX")
    command = ["eval", "--model", str(model), "--method", "pi", "--max-length", "512", "--tasks", "passkey",
               "--lengths", "256", "--queries-per-length", "3", "--cache-dir", str(tmp_path / "c"), "--no-estimate"]
    assert main([*command, "--output", str(tmp_path / "default")]) == 0
    default = (tmp_path / "default" / "results.json").read_text()
    assert '"dtype": "float32"' in default and "bfloat16" not in default  # as published, whatever the CPU
    assert main([*command, "--dtype", "auto", "--output", str(tmp_path / "auto")]) == 0
    assert "dtype bfloat16 (auto: this CPU computes it natively, AMX)" in capsys.readouterr().out
    recorded = (tmp_path / "auto" / "results.json").read_text()
    assert '"dtype": "bfloat16"' in recorded and '"auto"' not in recorded
