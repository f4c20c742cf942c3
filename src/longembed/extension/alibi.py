"""ALiBi (Press et al., 2022) in its symmetric encoder form (Jina Embeddings v2, section 4.1).

ALiBi has no position embeddings.  Head h adds a fixed linear penalty to its attention logits,

    logits[h, i, j] = q_i . k_j * scale  -  m_h * |i - j|,

so tokens attend less to far-away tokens, at a per-head rate m_h (the head's *slope*).  The causal
original only ever sees j <= i; JinaBERT's encoder mirrors the bias so that it depends on the
distance |i - j| in both directions (paper Figure 1a).  Because nothing is learned per position,
the same formula applies to any length: this is how a model trained at 512 tokens runs at 8192.

This module holds only the two pure functions; the attention code (``longembed.models.jina_bert``
for plain attention, the longembed attention function for blockwise attention) adds the bias.
"""

from __future__ import annotations

import torch

from longembed.errors import UserError


def _geometric_slopes(n: int) -> list[float]:
    """Press et al.'s slopes for a power-of-two n: m_i = 2^(-8 i / n), i = 1..n."""
    return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of every head, float32 of shape (num_heads,), head 0 first.

    This is the rule of the released code, which the checkpoints were trained with:
    ``_get_alibi_head_slopes`` in Jina's jina-bert-implementation (copied from MosaicML's BERT,
    which follows Press et al.'s ``get_slopes`` in ofirpress/attention_with_linear_biases,
    fairseq/models/transformer.py):

    - n a power of two: m_i = 2^(-8 i / n), i = 1..n (a geometric sequence from 2^(-8/n) down
      to 2^-8; 8 heads give 1/2, 1/4, ..., 1/256);
    - otherwise, with a = 2^floor(log2 n): the a slopes of the power-of-two rule for a heads,
      followed by the first n - a of every other slope for 2a heads (the odd powers of
      2^(-4/a): 2^(-4/a), 2^(-12/a), ...), which interleave with the first ones.

    How this relates to Jina's eq. (1), m_i = b^(2i) if i < a, else b^(1 + 2(i - a)), with
    a = 2^floor(log2 n) and b = 2^(-8 / 2^ceil(log2 n)): read literally, it does not give these
    slopes with either indexing.  For n not a power of two, b = 2^(-4/a) is right, but the
    branches need different indexings: the first with i = 1..a (i <= a, not i < a), the second
    with a 0-based offset (b^(1 + 2k), k = 0..n-a-1).  Literal 1-indexing (i = 1..n) gives,
    for n = 12, 2^-1..2^-7 then 2^-0.5..2^-4.5, so it loses 2^-8 and adds 2^-4.5 (the code:
    2^-1..2^-8 then 2^-0.5..2^-3.5); literal 0-indexing gives head 0 the slope 2^0 = 1 and shifts
    the first branch by one.  For n a power of two, ceil(log2 n) = log2 n makes b = 2^(-8/n),
    so b^(2i) = 2^(-16 i / n): the squares of the code's slopes (8 heads: 1/4, 1/16, ...).
    Eq. (1) matches the code for every n only when read as b = 2^(-4/a) (ceil replaced by
    floor + 1) with the indexing above.  The tests check these statements.
    """
    if num_heads < 1:
        raise UserError(f"num_heads must be positive, got {num_heads}")
    closest = 1 << (num_heads.bit_length() - 1)  # 2^floor(log2 n), exact for ints
    slopes = _geometric_slopes(closest)
    if closest < num_heads:
        slopes += _geometric_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """The symmetric ALiBi bias -m_h * |i - j|, float32 of shape (H, len(q), len(k)).

    ``q_positions`` and ``k_positions`` are 1-D position indices (int or float) of the queries
    and keys, so that a caller can build the bias for one block of a long attention matrix
    (e.g. q = positions 1024..1535, k = positions 0..511) without the full n x n matrix.
    The result is on the positions' device and is meant to be added to the scaled logits.
    """
    if q_positions.ndim != 1 or k_positions.ndim != 1:
        raise UserError("q_positions and k_positions must be 1-D position vectors")
    q = q_positions.to(torch.float32)
    k = k_positions.to(device=q.device, dtype=torch.float32)
    distance = (q[:, None] - k[None, :]).abs()  # |i - j|, (len q, len k)
    m = slopes.to(device=q.device, dtype=torch.float32)
    return -m[:, None, None] * distance[None, :, :]
