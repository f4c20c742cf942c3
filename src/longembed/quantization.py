"""Dynamic int8 quantization of a transformer's linear layers, for CPU users (off by default).

``quantization="int8"`` replaces the weight of every ``nn.Linear`` in the transformer with int8
values and one float scale per output channel (symmetric), and quantizes each layer's input on the
fly to int8 with one scale per token (symmetric); the product runs as an int8 matmul and is
rescaled to float.  Attention itself (scores, softmax, every extension method) stays in the
model's dtype, so every method behaves as without quantization, only with rounded projections.

The kernels are torchao's (``Int8DynamicActivationInt8WeightConfig``), the maintained successor
of ``torch.ao.quantization.quantize_dynamic`` (which PyTorch now warns is deprecated).  The older
path is faster on CPU but scales each layer's input per tensor, and its vectors drift far from
float32 (cosine 0.85 to 0.89 on MiniLM and nomic at 2k tokens, against 0.998 and 0.984 here).

Measured on a CPU with bfloat16 arithmetic (benchmarks/RESULTS.md, "Reduced precision on CPU"),
``dtype="bfloat16"`` is both faster and closer to float32 than int8; int8 is for CPUs without it.
torchao is an optional extra: ``pip install 'longembed[quantization]'``.
"""

from __future__ import annotations

import importlib.util

import torch

from longembed.config import QUANTIZATION_SCHEMES
from longembed.errors import MissingExtraError, UserError


def torchao_installed() -> bool:
    """Whether torchao can be imported (found without importing it: its import is slow)."""
    return importlib.util.find_spec("torchao") is not None


def require_quantization_backend() -> None:
    """Fail with the install command when torchao is missing."""
    if not torchao_installed():
        raise MissingExtraError(
            "quantization='int8' needs torchao: pip install 'longembed[quantization]' "
            "(or pip install torchao)"
        )


def quantize_linear_layers(model: torch.nn.Module, scheme: str) -> torch.nn.Module:
    """Quantize every ``nn.Linear`` of ``model`` in place under ``scheme``; returns the model.

    Only float32 models are quantized: the int8 scales are computed from float32 weights, and a
    model already in reduced precision would be rounded twice.
    """
    if scheme not in QUANTIZATION_SCHEMES:
        raise UserError(f"quantization must be one of {', '.join(QUANTIZATION_SCHEMES)}, got {scheme!r}")
    require_quantization_backend()
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if dtypes != {torch.float32}:
        raise UserError(f"int8 quantization starts from float32 weights; this model holds {sorted(map(str, dtypes))}")
    linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    if linear == 0:
        raise UserError(f"{type(model).__name__} has no nn.Linear layer to quantize")
    # torchao (an optional extra, slow to import) is imported when a model is quantized, not before.
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    return model
