"""``SelfExtend`` (Jin et al. 2024), bidirectional: exact relative positions inside the neighbour
window |i - j| < w; beyond it the grouped distance floor(max/g) - floor(min/g) + (w - floor(w/g)),
with the sign of i - j.

The method adds the grouped cos/sin tables (queries at floor(i/g) +- shift for left and right keys,
keys at floor(j/g)); longembed's attention function picks, per pair, the exact or the grouped score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from longembed.extension.methods.base import CosSin, ExtensionMethod, check_positive_int, register
from longembed.extension.methods.schemes import ROPE

if TYPE_CHECKING:
    import torch

    from longembed.extension.rope import RotaryTables


def selfextend_defaults(s: int, original_length: int) -> tuple[int, int]:
    """SelfExtend group size g and neighbour window w for scale s (Table 6).

    Table 6 uses g = s + 1 and w = Lo / s for s in {2, 4, 8} and both Lo = 512 and Lo = 4096
    (512 -> 2k: g 5, w 128; 4k -> 32k: g 9, w 512); longembed applies the same rule to any s.
    """
    s = max(1, int(s))
    return s + 1, max(1, original_length // s)


@register
@dataclass(frozen=True)
class SelfExtend(ExtensionMethod):
    """SelfExtend with group size g and window w (each defaults to Table 6 by s)."""

    name = "selfextend"
    summary = "SelfExtend: exact positions in window w, grouped (g) beyond"
    schemes = frozenset({ROPE})
    config_keys = {"group_size": "g", "window": "w"}
    export_refusal = "SelfExtend picks between two position sets per query-key pair, which no config can say"

    g: int | None = None
    w: int | None = None

    def __post_init__(self) -> None:
        check_positive_int("group_size", self.g)
        check_positive_int("window", self.w)

    def add_rotary_tables(
        self, tables: RotaryTables, p: torch.Tensor, scales: torch.Tensor, original_length: int, cos_sin: CosSin
    ) -> None:
        batch = len(scales)
        g = p.new_ones(batch)
        w = p.new_zeros(batch)  # 0: SelfExtend off for the document (s = 1)
        for b, sb in enumerate(scales.tolist()):
            if sb > 1:
                g_default, w_default = selfextend_defaults(sb, original_length)
                g[b] = self.g or g_default
                w[b] = self.w or w_default
        shift = (w - (w / g).floor()).unsqueeze(1)  # w - floor(w / g)
        grouped = (p / g.unsqueeze(1)).floor()
        tables.window = w
        tables.q_left = cos_sin(grouped + shift)
        tables.q_right = cos_sin(grouped - shift)
        tables.k_grouped = cos_sin(grouped)
