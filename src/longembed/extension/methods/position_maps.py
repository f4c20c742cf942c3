"""The position maps of LongEmbed section 4.2: ``GP``, ``RP`` and ``PI``.

With p a token's position, Lo the original context and s the scale:

- GP (grouped positions):      p -> floor(p / s)
- RP (recurrent positions):    p -> p mod Lo
- PI (position interpolation): p -> p / s; on an APE model a fractional position is the linear
  interpolation of its two neighbouring rows of E_o (``interpolate_rows``).

Each is a fixed map, so it can also be written into a position table of T rows (``table_rows``: the
folders of ``longembed tune`` and ``longembed export``), where ids 0..n-1 compute what the map computes
at the fixed scale S = ceil(T / Lo).  On RoPE, GP and PI act on the rotated positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from longembed.extension.methods.base import ExtensionMethod, register
from longembed.extension.methods.schemes import APE, ROPE

if TYPE_CHECKING:
    import torch


def interpolate_rows(table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rows of ``table`` at fractional ``positions``: (1 - f) * E[floor] + f * E[floor + 1].

    Positions past the last row are clamped to it.  Integer positions return the row exactly.
    """
    last = table.shape[0] - 1
    positions = positions.clamp(0, last)
    left = positions.floor().long()
    right = (left + 1).clamp(max=last)
    frac = (positions - left.to(positions.dtype)).unsqueeze(-1).to(table.dtype)
    return table[left] * (1 - frac) + table[right] * frac


class _PositionMap(ExtensionMethod):
    """A fixed position map: APE tables of Lt rows can hold it, so APE models export it."""

    extends_table = True
    exportable_on = frozenset({APE})


@register
@dataclass(frozen=True)
class GP(_PositionMap):
    """Grouped positions: p -> floor(p / s)."""

    name = "gp"
    summary = "grouped positions: p -> floor(p / s)"
    schemes = frozenset({APE, ROPE})
    export_refusal = "grouped positions are no rope_type a plain RoPE config can name"

    def position_ids(self, p: torch.Tensor, s: torch.Tensor, original_length: int) -> torch.Tensor:
        return p.div(s, rounding_mode="floor")

    def rotary_positions(self, p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return (p / s).floor()

    def table_rows(self, original: torch.Tensor, p: torch.Tensor, big_s: int) -> tuple[torch.Tensor, torch.Tensor]:
        return original[p.div(big_s, rounding_mode="floor")], p % big_s == 0

    def table_position_ids(self, p: torch.Tensor, s: torch.Tensor, big_s: int, table_length: int) -> torch.Tensor:
        return p.div(s, rounding_mode="floor") * big_s


@register
@dataclass(frozen=True)
class RP(_PositionMap):
    """Recurrent positions: p -> p mod Lo (positions below Lo unchanged)."""

    name = "rp"
    summary = "recurrent positions: p -> p mod Lo"
    schemes = frozenset({APE})
    export_refusal = "recurrent positions apply to APE models only"

    def position_ids(self, p: torch.Tensor, s: torch.Tensor, original_length: int) -> torch.Tensor:
        return p.remainder(original_length)

    def table_rows(self, original: torch.Tensor, p: torch.Tensor, big_s: int) -> tuple[torch.Tensor, torch.Tensor]:
        lo = original.shape[0]
        return original[p % lo], p < lo

    def table_position_ids(self, p: torch.Tensor, s: torch.Tensor, big_s: int, table_length: int) -> torch.Tensor:
        return p.remainder(table_length)


@register
@dataclass(frozen=True)
class PI(_PositionMap):
    """Linear position interpolation: p -> p / s (fractional APE ids interpolate table rows)."""

    name = "pi"
    summary = "linear position interpolation: p -> p / s"
    schemes = frozenset({APE, ROPE})
    fractional_positions = True
    exportable_on = frozenset({APE, ROPE})

    def position_ids(self, p: torch.Tensor, s: torch.Tensor, original_length: int) -> torch.Tensor:
        # integer ids while nothing is extended: the position table is then looked up bit for bit
        return p.float() / s.float() if bool((s > 1).any()) else p

    def rotary_positions(self, p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return p / s

    def table_rows(self, original: torch.Tensor, p: torch.Tensor, big_s: int) -> tuple[torch.Tensor, torch.Tensor]:
        return interpolate_rows(original, p.float() / big_s), p % big_s == 0

    def table_position_ids(self, p: torch.Tensor, s: torch.Tensor, big_s: int, table_length: int) -> torch.Tensor:
        # an original position p / s sits at row p * S / s: integer when s divides S
        if bool((big_s % s == 0).all()):
            return p * (big_s // s)
        return p.float() * big_s / s.float()

    def rope_parameters(self, params: dict[str, Any], base: float, s: int, original_length: int) -> dict[str, Any]:
        return {**params, "rope_type": "linear", "factor": float(s), "rope_theta": base}
