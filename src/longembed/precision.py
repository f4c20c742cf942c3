"""``--dtype auto``: which precision a model runs in, decided once here with the reason, in one line.

bfloat16 where the device computes it natively (a CPU with AMX or AVX-512 BF16, a CUDA GPU with bfloat16
units): 1.2x to 1.7x float32's speed, within cosine 0.9999 (benchmarks/RESULTS.md); float32 elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from longembed.config import DTYPE_AUTO, DTYPE_NAMES
from longembed.errors import UserError
from longembed.loading import resolve_device

#: The Linux CPU flags of native bfloat16 arithmetic, as /proc/cpuinfo spells them, and their names.
CPU_BF16_FLAGS = {"amx_bf16": "AMX", "avx512_bf16": "AVX-512 BF16"}
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Precision:
    """The dtype a model runs in and why (``reason``: one line a command prints)."""

    dtype: str
    reason: str


def cpu_bf16_support() -> str | None:
    """The CPU's native bfloat16 instructions ("AMX" or "AVX-512 BF16"), None when it has neither.

    Asks torch (the instructions its kernels dispatch to), then /proc/cpuinfo's flags on Linux."""
    cpu = torch.cpu
    if getattr(cpu, "_is_amx_tile_supported", lambda: False)():
        return "AMX"
    if getattr(cpu, "_is_avx512_bf16_supported", lambda: False)():
        return "AVX-512 BF16"
    flags = _cpuinfo_flags()
    return next((name for flag, name in CPU_BF16_FLAGS.items() if flag in flags), None)


def _cpuinfo_flags() -> set[str]:
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def cuda_bf16_support(device: torch.device) -> bool:
    """Whether the CUDA device has bfloat16 units (Ampere and later), not an emulation of them."""
    with torch.cuda.device(device):
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))


def resolve_dtype(requested: str, device: str | torch.device | None = None,
                  quantization: str | None = None) -> Precision:
    """The dtype ``requested`` names: itself, or for ``auto`` bfloat16 where ``device`` computes it
    natively and float32 elsewhere (always float32 under ``quantization``, which starts from float32
    weights).  A UserError for a name that is neither a dtype nor auto."""
    if requested in DTYPE_NAMES:
        return Precision(requested, f"{requested} (asked for)")
    if requested != DTYPE_AUTO:
        raise UserError(f"dtype must be one of {', '.join((DTYPE_AUTO, *DTYPE_NAMES))}, got {requested!r}")
    if quantization is not None:
        return Precision("float32", f"float32 (auto: {quantization} quantization starts from float32 weights)")
    resolved = resolve_device(device)
    if resolved.type == "cuda":
        if cuda_bf16_support(resolved):
            return Precision("bfloat16", f"bfloat16 (auto: {torch.cuda.get_device_name(resolved)} computes it natively)")
        return Precision("float32", f"float32 (auto: {torch.cuda.get_device_name(resolved)} has no bfloat16 units)")
    if resolved.type != "cpu":
        return Precision("float32", f"float32 (auto: bfloat16 is chosen on CPUs and CUDA GPUs, not {resolved.type})")
    instructions = cpu_bf16_support()
    if instructions is not None:
        return Precision("bfloat16", f"bfloat16 (auto: this CPU computes it natively, {instructions})")
    return Precision("float32", f"float32 (auto: this CPU has no native bfloat16 arithmetic, neither AMX nor "
                                f"AVX-512 BF16; its best is {torch.backends.cpu.get_cpu_capability()})")


def min_cosine(reference: np.ndarray, other: np.ndarray) -> float:
    """The smallest cosine between matching rows of two (n, d) matrices (1.0 for none)."""
    a, b = np.asarray(reference, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare vectors of shapes {a.shape} and {b.shape}")
    if not len(a):
        return 1.0
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return float(np.min(np.sum(a * b, axis=1) / np.where(norms > 0, norms, 1.0)))
