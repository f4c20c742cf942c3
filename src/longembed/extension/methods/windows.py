"""The methods that keep the model's own positions: ``Truncate`` (one Lo-token window, the baseline)
and ``PCW`` (parallel context windows: the average of the input's Lo-token windows).

Neither changes a position; PCW's windows are cut by the encoder (``longembed.extension.pcw``).
"""

from __future__ import annotations

from dataclasses import dataclass

from longembed.extension.methods.base import ExtensionMethod, register
from longembed.extension.methods.schemes import POSITION_SCHEMES


@register
@dataclass(frozen=True)
class Truncate(ExtensionMethod):
    """Keep the first max_length tokens: the model as it is."""

    name = "truncate"
    summary = "keep the first max_length tokens (the baseline)"
    schemes = frozenset(POSITION_SCHEMES)
    extends_context = False
    export_refusal = "truncate extends nothing: the original folder is its plain model"

    def default_max_length(self, original_length: int, model_length: int | None) -> int | None:
        return original_length


@register
@dataclass(frozen=True)
class PCW(ExtensionMethod):
    """Parallel context windows: the input's Lo-token windows encoded apart and averaged."""

    name = "pcw"
    summary = "parallel context windows: average of Lo-token windows"
    schemes = frozenset(POSITION_SCHEMES)
    export_refusal = "PCW averages several forward passes per input; a plain model makes one"
