"""``NTK``: NTK-aware interpolation, RoPE's base times lambda (LongEmbed section 4.2, Table 6).

- static (the paper): base -> base * lambda, with lambda from Table 6 by the scale s (``ntk_lambda``)
  or given (``ntk_factor``); one base per scale, applied to documents with s > 1.
- dynamic: a base that grows with the document's length n beyond Lo,
  base * ((F n / Lo) - (F - 1)) ** (d / (d - 2)), as Hugging Face's ``dynamic`` rope type and
  nomic-bert's ``rotary_scaling_factor`` F compute it (but per document, not per padded batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from longembed.errors import UserError
from longembed.extension.methods.base import ExtensionMethod, is_number, register
from longembed.extension.methods.schemes import ROPE

if TYPE_CHECKING:
    import torch

    from longembed.extension.rope import RotarySpec

#: NTK: one base for the target length ("static"), or a base that grows with n ("dynamic").
NTK_VARIANTS = ("static", "dynamic")
# Table 6: NTK base multiplier lambda by scale factor s (base 10000 -> 10000 * lambda).
NTK_LAMBDA_TABLE: dict[int, float] = {1: 1.0, 2: 3.0, 4: 5.0, 8: 10.0}
#: Dynamic NTK's F when none is given: nomic's documented ``rotary_scaling_factor`` for 8k inputs.
DEFAULT_DYNAMIC_NTK_FACTOR = 2.0


def ntk_lambda(s: int) -> float:
    """NTK base multiplier for scale s: Table 6 at s = 1, 2, 4, 8.

    Between table points lambda is interpolated linearly in log-log space; beyond s = 8 it grows
    proportionally to s (lambda = 10 * s / 8), the slope of the table's last segment in log-log.
    """
    if s <= 1:
        return 1.0
    if s in NTK_LAMBDA_TABLE:
        return NTK_LAMBDA_TABLE[s]
    points = sorted(NTK_LAMBDA_TABLE.items())
    if s > points[-1][0]:
        s_last, lam_last = points[-1]
        return lam_last * s / s_last
    for (s0, l0), (s1, l1) in zip(points, points[1:], strict=False):
        if s0 < s < s1:
            t = (math.log(s) - math.log(s0)) / (math.log(s1) - math.log(s0))
            return math.exp(math.log(l0) + t * (math.log(l1) - math.log(l0)))
    raise AssertionError("unreachable")


def dynamic_ntk_multiplier(n: int, original_length: int, factor: float, rotary_dim: int) -> float:
    """Dynamic NTK's base multiplier for an input of n tokens: 1 up to Lo, then
    ((F n / Lo) - (F - 1)) ** (d / (d - 2)) (Hugging Face ``_compute_dynamic_ntk_parameters``)."""
    if n <= original_length:
        return 1.0
    return ((factor * n / original_length) - (factor - 1)) ** (rotary_dim / (rotary_dim - 2))


@register
@dataclass(frozen=True)
class NTK(ExtensionMethod):
    """NTK-aware interpolation: static lambda (default Table 6 by s) or dynamic F (default 2)."""

    name = "ntk"
    summary = "NTK-aware interpolation: RoPE base x lambda"
    schemes = frozenset({ROPE})
    config_keys = {"ntk_factor": "factor", "ntk_variant": "variant"}
    exclusive_keys = ("ntk_variant",)
    exportable_on = frozenset({ROPE})
    export_refusal = "NTK changes RoPE's base; APE models have none"

    factor: float | None = None
    variant: str = "static"

    def __post_init__(self) -> None:
        if self.factor is not None and (not is_number(self.factor) or self.factor <= 0):
            raise UserError(f"ntk_factor must be a finite positive number, got {self.factor!r}")
        if self.variant not in NTK_VARIANTS:
            raise UserError(f"ntk_variant must be one of {NTK_VARIANTS}, got {self.variant!r}")

    @property
    def dynamic_factor(self) -> float:
        """F of the dynamic variant."""
        return DEFAULT_DYNAMIC_NTK_FACTOR if self.factor is None else self.factor

    def base_multiplier(self, s: int) -> float:
        """lambda of the static variant at scale s."""
        return self.factor if self.factor is not None else ntk_lambda(s)

    def frequencies(
        self, spec: RotarySpec, s: int, n: int | None, original_length: int
    ) -> tuple[torch.Tensor, float] | None:
        if self.variant == "dynamic":
            if n is None:
                raise UserError("dynamic NTK needs the documents' lengths")
            if n <= original_length:
                return None
            return spec.inv_freq(dynamic_ntk_multiplier(n, original_length, self.dynamic_factor, spec.rotary_dim))
        return spec.inv_freq(self.base_multiplier(s)) if s > 1 else None

    def rope_parameters(self, params: dict[str, Any], base: float, s: int, original_length: int) -> dict[str, Any]:
        if self.variant == "dynamic":
            return {**params, "rope_type": "dynamic", "factor": float(self.dynamic_factor), "rope_theta": base}
        return {**params, "rope_theta": base * self.base_multiplier(s)}

    @property
    def export_raises_max_positions(self) -> bool:
        return self.variant != "dynamic"  # HF's dynamic rope type reads Lo from max_position_embeddings
