"""``YaRN`` (Peng et al. 2023): per-frequency RoPE interpolation with an attention factor.

The frequencies are transformers' own (``ROPE_INIT_FUNCTIONS["yarn"]`` through
``RotarySpec.yarn_inv_freq``) at factor s and original length Lo, with any of transformers' YaRN
parameters given as ``yarn_options``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from longembed.errors import UserError
from longembed.extension.methods.base import ExtensionMethod, is_number, register
from longembed.extension.methods.schemes import ROPE

if TYPE_CHECKING:
    import torch

    from longembed.extension.rope import RotarySpec

#: Rotary parameters transformers' YaRN implementation reads (``rope_parameters``).
YARN_OPTION_NAMES = ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate")


@register
@dataclass(frozen=True)
class YaRN(ExtensionMethod):
    """YaRN at factor s for documents with s > 1; ``options`` are extra YaRN rotary parameters."""

    name = "yarn"
    summary = "YaRN: per-frequency RoPE interpolation + attention factor"
    schemes = frozenset({ROPE})
    config_keys = {"yarn_options": "options"}
    exportable_on = frozenset({ROPE})
    export_refusal = "YaRN changes RoPE's frequencies; APE models have none"

    options: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        valid = isinstance(self.options, dict) and all(
            isinstance(k, str) and (is_number(v) or isinstance(v, bool)) for k, v in self.options.items()
        )
        if not valid:
            raise UserError(f"yarn_options must map names to values, got {self.options!r}")
        unknown = sorted(set(self.options) - set(YARN_OPTION_NAMES))
        if unknown:
            raise UserError(f"unknown yarn_options {unknown}; YaRN reads {', '.join(YARN_OPTION_NAMES)}")

    def frequencies(
        self, spec: RotarySpec, s: int, n: int | None, original_length: int
    ) -> tuple[torch.Tensor, float] | None:
        return spec.yarn_inv_freq(s, original_length, **self.options) if s > 1 else None

    def rope_parameters(self, params: dict[str, Any], base: float, s: int, original_length: int) -> dict[str, Any]:
        return {
            **params,
            "rope_type": "yarn",
            "rope_theta": base,
            "factor": float(s),
            "original_max_position_embeddings": original_length,
            **self.options,
        }
