"""Absolute-position-embedding (BERT-style) models: position ids per batch and extended tables.

The position maps themselves (GP, RP, PI: LongEmbed section 4.2) are methods of
``extension.methods.position_maps``; here they are applied to a right-padded batch
(``ape_position_ids``) and written into, or read from, a position table extended to T rows
(``extended_position_table``, ``extended_table_position_ids``).

The maps act through ``position_ids``, the model's own extension point.  PI needs fractional
position ids, which an ``nn.Embedding`` cannot look up; ``InterpolatedPositionEmbedding`` wraps
the model's position table (same weight, no copy) and interpolates them.  Integer ids are looked
up exactly as before, so the wrapper changes nothing for inputs the method does not act on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from longembed.errors import UserError
from longembed.extension.methods import APE, METHODS, ExtensionMethod, check_method, method_names
from longembed.extension.methods.position_maps import interpolate_rows

#: The methods that change an APE model's position ids (for callers that list them, e.g. MLM training).
APE_METHODS = tuple(name for name in method_names(extends_table=True) if APE in METHODS[name].schemes)


def ape_position_ids(
    method: ExtensionMethod | str,
    lengths: torch.Tensor,
    seq_len: int,
    scales: torch.Tensor,
    original_length: int,
    offset: int = 0,
) -> torch.Tensor | None:
    """Position ids (B, seq_len) for every document of a right-padded batch.

    ``method`` is a method object or the name of one that changes APE positions (gp, rp, pi).
    ``lengths`` (B,) are the documents' token counts and ``scales`` (B,) their scale factors; a
    document with s = 1 keeps the original positions 0..n-1 (RP leaves p < Lo unchanged anyway).
    Padding positions get id ``offset`` (they are masked out of attention and pooling).
    ``offset`` is the index of position 0 in the table (XLM-R/RoBERTa start at padding_idx + 1).
    Returns int64 ids, except for PI, which returns float32 ids when any document is extended; None
    for a method that keeps the model's own positions 0..n-1 (truncate, pcw).
    """
    if isinstance(method, str):
        method = check_method(method, APE)()
    p = torch.arange(seq_len, device=lengths.device).unsqueeze(0).expand(len(lengths), -1)
    ids = method.position_ids(p, scales.to(p.device).unsqueeze(1), original_length)
    if ids is None:
        return None
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
        extendable = method_names(extends_table=True)
        if self.method not in extendable:
            raise UserError(f"an extended position table is built by one of {extendable}, not {self.method!r}")
        if not 0 < self.original_length < self.table_length:
            raise UserError(
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
    exactly ``interpolate_rows``), gp gives E_o[floor(p / S)], rp gives E_o[p mod Lo] (each method's
    ``table_rows``).  A plain model with E_t and position ids 0..n-1 computes what the method computes
    with ``ape_position_ids`` at the fixed scale S.  The mask marks rows that equal E_o's rows by
    construction: p = i * S for pi and gp, p < Lo for rp (the rows LongEmbed's further tuning keeps
    frozen, Figure 4 right).
    """
    table = ExtendedTable(method, original.shape[0], table_length)
    rows, kept = METHODS[method]().table_rows(original, torch.arange(table_length), table.scale)
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
    floor(p / s) * S; rp is p mod T for every document (each method's ``table_position_ids``).
    ``method="truncate"`` (a method that extends nothing) is s = 1 throughout.
    """
    p = torch.arange(seq_len, device=lengths.device).unsqueeze(0).expand(len(lengths), -1)
    s = scales.to(p.device).unsqueeze(1)
    if not METHODS[method].extends_context:
        s = torch.ones_like(s)
    ids = METHODS[table.method]().table_position_ids(p, s, table.scale, table.table_length)
    ids = torch.where(p < lengths.unsqueeze(1), ids, torch.zeros_like(ids))
    return ids + offset
