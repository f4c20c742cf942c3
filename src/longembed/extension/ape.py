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
