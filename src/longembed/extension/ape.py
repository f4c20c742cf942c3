"""Extension methods for absolute-position-embedding (BERT-style) models: GP, RP and PI.

LongEmbed section 4.2, with p a token's position, Lo the original context and s the scale:

- GP (grouped positions):     p -> floor(p / s)
- RP (recurrent positions):   p -> p mod Lo
- PI (position interpolation): p -> p / s, where a fractional position uses the linear
  interpolation of its two neighbouring rows of the original matrix E_o.  Equivalently the
  matrix is extended to E_t with E_t[i * s] = E_o[i] and rows in between interpolated.

All three act through ``position_ids``, the model's own extension point.  PI needs fractional
position ids, which an ``nn.Embedding`` cannot look up; ``InterpolatedPositionEmbedding`` wraps
the model's position table (same weight, no copy) and interpolates them.  Integer ids are looked
up exactly as before, so the wrapper changes nothing for inputs the method does not act on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

APE_METHODS = ("gp", "rp", "pi")


def ape_position_ids(
    method: str,
    lengths: torch.Tensor,
    seq_len: int,
    scales: torch.Tensor,
    original_length: int,
    offset: int = 0,
) -> torch.Tensor:
    """Position ids (B, seq_len) for every document of a right-padded batch.

    ``lengths`` (B,) are the documents' token counts and ``scales`` (B,) their scale factors; a
    document with s = 1 keeps the original positions 0..n-1 (RP leaves p < Lo unchanged anyway).
    Padding positions get id ``offset`` (they are masked out of attention and pooling).
    ``offset`` is the index of position 0 in the table (XLM-R/RoBERTa start at padding_idx + 1).
    Returns int64 ids, except for PI, which returns float32 ids when any document is extended.
    """
    p = torch.arange(seq_len, device=lengths.device).unsqueeze(0).expand(len(lengths), -1)
    s = scales.to(p.device).unsqueeze(1)
    if method == "gp":
        ids = torch.div(p, s, rounding_mode="floor")
    elif method == "rp":
        ids = torch.remainder(p, original_length)
    elif method == "pi":
        ids = p.to(torch.float32) / s.to(torch.float32) if bool((scales > 1).any()) else p
    else:
        raise ValueError(f"not an APE position method: {method!r} (choose from {APE_METHODS})")
    ids = torch.where(p < lengths.unsqueeze(1), ids, torch.zeros_like(ids))
    return ids + offset


def interpolated_position_matrix(original: torch.Tensor, s: int) -> torch.Tensor:
    """E_t (Lo * s, d) from E_o (Lo, d): E_t[i * s] = E_o[i], rows between linearly interpolated.

    The last s - 1 rows, beyond E_o[Lo - 1], have no right neighbour and repeat E_o[Lo - 1].
    This is the explicit form of what ``InterpolatedPositionEmbedding`` computes on the fly.
    """
    lo = original.shape[0]
    pos = torch.arange(lo * s, dtype=torch.float32) / s
    return interpolate_rows(original, pos)


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


class InterpolatedPositionEmbedding(nn.Module):
    """A position table that also accepts fractional position ids (for PI).

    It shares the wrapped ``nn.Embedding``'s weight.  Integer ids go through the embedding
    itself, bit for bit; floating-point ids are linearly interpolated between neighbouring rows.
    """

    def __init__(self, embedding: nn.Embedding):
        super().__init__()
        self.embedding = embedding

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding.weight

    @property
    def num_embeddings(self) -> int:
        return self.embedding.num_embeddings

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        if position_ids.is_floating_point():
            return interpolate_rows(self.embedding.weight, position_ids)
        return self.embedding(position_ids)


#: The record a position-extended model folder carries (written by ``longembed tune`` and ``export``).
EXTENDED_TABLE_FILE = "longembed_positions.json"
EXTENDABLE_METHODS = ("pi", "gp", "rp")


@dataclass(frozen=True)
class ExtendedTable:
    """What a model folder whose position table was extended from Lo to T rows needs to be read right.

    ``method`` built the extra rows (pi, gp: row p is the original position p / S; rp: p mod Lo),
    ``original_length`` is Lo, ``table_length`` is T (positions, not counting a fairseq offset),
    ``scale`` is S = ceil(T / Lo) and ``tuned`` says whether the added rows were trained (LongEmbed's
    further tuning) or are the training-free method's own values.  The original rows sit at
    multiples of S (pi, gp) or at 0..Lo-1 (rp), so a short input can still use exactly them.
    """

    method: str
    original_length: int
    table_length: int
    tuned: bool = False

    def __post_init__(self) -> None:
        if self.method not in EXTENDABLE_METHODS:
            raise ValueError(f"an extended position table is built by one of {EXTENDABLE_METHODS}, not {self.method!r}")
        if not 0 < self.original_length < self.table_length:
            raise ValueError(
                f"an extended table needs Lo < T, got Lo={self.original_length}, T={self.table_length}"
            )

    @property
    def scale(self) -> int:
        return -(-self.table_length // self.original_length)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "scale": self.scale, "format_version": 1}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> ExtendedTable:
        return cls(
            method=record["method"],
            original_length=int(record["original_length"]),
            table_length=int(record["table_length"]),
            tuned=bool(record.get("tuned", False)),
        )


def extended_position_table(
    original: torch.Tensor, method: str, table_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(E_t, original_rows): the T-row table a method implies, and a bool mask of E_o's own rows.

    With Lo = len(E_o) and S = ceil(T / Lo): pi gives E_t[p] = E_o at p / S (linear interpolation,
    exactly ``interpolate_rows``), gp gives E_o[floor(p / S)], rp gives E_o[p mod Lo].  A plain model
    with E_t and position ids 0..n-1 computes what the method computes with ``ape_position_ids`` at
    the fixed scale S.  The mask marks rows that equal E_o's rows by construction: p = i * S for pi and
    gp, p < Lo for rp (the rows LongEmbed's further tuning keeps frozen, Figure 4 right).
    """
    lo = original.shape[0]
    table = ExtendedTable(method, lo, table_length)
    p = torch.arange(table_length)
    if method == "pi":
        rows = interpolate_rows(original, p.to(torch.float32) / table.scale)
        kept = p % table.scale == 0
    elif method == "gp":
        rows = original[torch.div(p, table.scale, rounding_mode="floor")]
        kept = p % table.scale == 0
    else:
        rows = original[p % lo]
        kept = p < lo
    return rows.clone(), kept


def extended_table_position_ids(
    table: ExtendedTable,
    method: str,
    lengths: torch.Tensor,
    seq_len: int,
    scales: torch.Tensor,
    offset: int = 0,
) -> torch.Tensor:
    """Position ids (B, seq_len) on an extended table for documents with scale factors ``scales``.

    A document with s = 1 (at most Lo tokens, by default) reads the original rows: ids p * S for pi
    and gp, p for rp; so a tuned model embeds short inputs exactly as the model it came from.  A long
    document with s = S reads the rows in order (ids p).  Another s (``scale="per_document"``) maps
    through the original position axis: pi p * S / s (fractional ids interpolate between rows), gp
    floor(p / s) * S; rp is p mod T for every document.  ``method="truncate"`` is s = 1 throughout.
    """
    p = torch.arange(seq_len, device=lengths.device).unsqueeze(0).expand(len(lengths), -1)
    s = scales.to(p.device).unsqueeze(1)
    if method == "truncate":
        s = torch.ones_like(s)
    big_s = table.scale
    if table.method == "rp":
        ids = torch.remainder(p, table.table_length)
    elif table.method == "gp":
        ids = torch.div(p, s, rounding_mode="floor") * big_s
    elif bool((big_s % s == 0).all()):
        ids = p * torch.div(big_s, s, rounding_mode="floor")
    else:
        ids = p.to(torch.float32) * big_s / s.to(torch.float32)
    ids = torch.where(p < lengths.unsqueeze(1), ids, torch.zeros_like(ids))
    return ids + offset
