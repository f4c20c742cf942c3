"""``Native``: ALiBi's bias -m_h |i - j| is the same formula at every length, so the whole input is fed."""

from __future__ import annotations

from dataclasses import dataclass

from longembed.extension.methods.base import ExtensionMethod, register
from longembed.extension.methods.schemes import ALIBI


@register
@dataclass(frozen=True)
class Native(ExtensionMethod):
    """ALiBi models (JinaBERT) extrapolate natively: Lt defaults to the model's own limit."""

    name = "native"
    summary = "ALiBi extrapolates natively: feed the whole input"
    schemes = frozenset({ALIBI})
    export_refusal = "ALiBi extrapolates natively: the original folder already takes long inputs"

    def default_max_length(self, original_length: int, model_length: int | None) -> int | None:
        return model_length
