"""Attention with SelfExtend, ALiBi or a local window through fused kernels, in linear memory.

Each path costs about what plain attention costs at the same length, because the fused kernel gets
whole ranges of keys with no mask, or with its own causal flag, and masks only where a band of
keys needs one (benchmarks/RESULTS.md: a CPU kernel reading a mask runs about 1.3x slower per
score, and building a (rows x n) mask per query block cost more than the attention itself).
Rows are query positions i, keys positions j.  A batch goes in groups of consecutive documents
with the same key length L (padding at the end: keys L..n are sliced off, never masked) and, for
SelfExtend, the same window w.

- SelfExtend (Jin et al. 2024) with neighbour window w and group size g: query i attends to the
  keys j <= i - w with grouped positions (q at floor(i/g) + w - floor(w/g), k at floor(j/g)), to
  the keys |i - j| < w with exact positions, and to the keys j >= i + w with grouped positions (q at
  floor(i/g) - (w - floor(w/g))).  The two grouped sets are triangles: one call each of a causal
  kernel (on rows shifted by w; the right one on reversed rows and keys), which skips the blocks
  above the diagonal.  The exact set is a band: one masked call over blocks of rows with their
  band of keys (``_Band``).  The softmax over the union is recovered from each call's
  log-sum-exp, which only a kernel that returns it can give (``LseKernel``).
- ALiBi: the bias -m_h |i - j| depends on i - j only.  With the keys in reverse order
  (j' = L - 1 - j) it depends on i + j', so one vector per head of n + L - 1 values, viewed with
  strides (1, 1) over (rows, keys), is the whole bias matrix without materializing it; the public
  ``scaled_dot_product_attention`` takes it as its additive mask.
- Local windows (|i - j| <= W, or 0 <= i - j < W when causal): a band, as SelfExtend's exact part,
  through the public kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

#: A fused attention kernel that also returns the log-sum-exp of each row's scores:
#: (q, k, v, causal, scale, additive mask or None) -> (output (B, H, rows, d), lse (B, H, rows));
#: ``causal`` allows key j for row i when j <= i, counted from the first row and key (top-left).
LseKernel = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, bool, float, torch.Tensor | None],
    tuple[torch.Tensor, torch.Tensor],
]

# A relation between local row index i and key index j within one rectangle:
# ("all", 0): every key; ("lower", o): j <= i - o; ("upper", o): j >= i + o.
Relation = tuple[str, int]

#: Fewest query rows per call of the public kernel with an ALiBi bias view.  The CPU kernel reads
#: the view in place; a kernel that copies it (other devices) copies one block.  Smaller calls cost
#: more per score (at 8k tokens on CPU, 256-row blocks took 1.35x the time of one call, 1024 1.07x).
MIN_BIAS_ROWS = 2048


def band_rows(w: int) -> int:
    """Query rows per block of a band of half-width w: w / 4 within 32..256.

    A block of R rows reads R + 2(w - 1) keys, 2w - 1 of them in each row's band; smaller blocks
    waste fewer keys, larger ones keep the kernel efficient (measured on CPU, w = 512: R = 128 took
    0.185 of full attention at 8k tokens, R = 512 0.232; w = 65: R = 32 0.034, R = 256 0.053).
    """
    return min(256, max(32, w // 4))


def document_groups(
    lengths: list[int], windows: list[int] | None = None
) -> Iterator[tuple[int, int, int, int]]:
    """(first, stop, L, w) for each run of consecutive documents with equal length L and window w."""
    windows = windows if windows is not None else [0] * len(lengths)
    start = 0
    for b in range(1, len(lengths) + 1):
        if b == len(lengths) or (lengths[b], windows[b]) != (lengths[start], windows[start]):
            yield start, b, lengths[start], windows[start]
            start = b


class LseMerge:
    """Softmax attention over disjoint key sets, combined exactly from their (output, lse) pairs.

    For row i with partial results (o_p, lse_p): out = sum_p o_p exp(lse_p - lse), where
    lse = log sum_p exp(lse_p).  Rows that never receive a part stay 0.  Accumulates in the
    kernel's lse precision (float32 for reduced-precision inputs).
    """

    def __init__(self, like: torch.Tensor):
        self.like = like
        self.out: torch.Tensor | None = None
        self.lse: torch.Tensor | None = None

    def add(self, row0: int, out: torch.Tensor, lse: torch.Tensor) -> None:
        if self.out is None:
            dtype = torch.promote_types(out.dtype, lse.dtype)
            self.out = torch.zeros(self.like.shape, dtype=dtype, device=self.like.device)
            self.lse = torch.full(self.like.shape[:-1], float("-inf"), dtype=lse.dtype, device=lse.device)
        rows = slice(row0, row0 + out.shape[2])
        acc, before = self.out[:, :, rows], self.lse[:, :, rows]
        total = torch.logaddexp(before, lse)
        acc.mul_(torch.exp(before - total).unsqueeze(-1))
        acc.add_(out * torch.exp(lse - total).unsqueeze(-1))
        before.copy_(total)

    def add_pieces(self, pieces: list[tuple[int, torch.Tensor, torch.Tensor]]) -> None:
        """Add (first row, output, lse) pieces, as ``attend`` returns them."""
        for row0, out, lse in pieces:
            self.add(row0, out, lse)

    def result(self) -> torch.Tensor:
        return torch.zeros_like(self.like) if self.out is None else self.out.to(self.like.dtype)


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, relation: Relation, scale: float, kernel: LseKernel
) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """(first row, output, lse) pieces of rows q attending to keys k under ``relation``.

    Rows with no allowed key are left out, so the kernel never sees an empty softmax.
    """
    kind, offset = relation
    if kind == "all":
        return [(0, *kernel(q, k, v, False, scale, None))]
    if kind == "lower":
        return _lower(q, k, v, offset, scale, kernel)
    # j >= i + o: with rows and keys reversed (i' = R - 1 - i, j' = S - 1 - j) this is
    # j' <= i' - (R - S + o), a lower triangle; the pieces are reversed back.
    rows, keys = q.shape[2], k.shape[2]
    pieces = _lower(q.flip(2), k.flip(2), v.flip(2), rows - keys + offset, scale, kernel)
    return [(rows - r0 - o.shape[2], o.flip(2), lse.flip(-1)) for r0, o, lse in pieces]


def _lower(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset: int, scale: float, kernel: LseKernel
) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """Rows attending to keys j <= i - offset, as calls of the kernel's top-left causal mask."""
    rows, keys = q.shape[2], k.shape[2]
    if offset < 0:  # keys 0..-offset are allowed for every row; after them, j <= i - 1 again
        split = min(keys, 1 - offset)
        pieces = [(0, *kernel(q, k[:, :, :split], v[:, :, :split], False, scale, None))]
        if split < keys:
            pieces += _lower(q, k[:, :, split:], v[:, :, split:], 1, scale, kernel)
        return pieces
    if offset >= rows or keys == 0:
        return []
    # row i >= offset sees keys 0..i - offset: the causal mask on rows shifted by `offset`
    stop = min(keys, rows - offset)
    return [(offset, *kernel(q[:, :, offset:], k[:, :, :stop], v[:, :, :stop], True, scale, None))]


class _Band:
    """Rows i of a group of documents with their keys |i - j| < w (causal: 0 <= i - j < w), j < L.

    Rows 0..``rows`` (those with at least one such key) go in blocks of R rows; block t reads the
    keys tR - (w - 1)..tR + R + (w - 1) (causal: ..tR + R).  Queries are copied once into blocks;
    keys and values once into one padded sequence for the whole group, of which each block's keys
    are an overlapping strided view (no copy per block).  ``allowed`` (blocks, 1, R, S) marks the
    band and drops keys outside 0..L (padding, or a neighbouring document's keys in the view).
    """

    def __init__(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, length: int, w: int, causal: bool
    ):
        docs, heads, n, dim = query.shape
        self.rows = min(n, length + w - 1)  # row i has a key when i - (w - 1) <= L - 1
        before = min(w - 1, self.rows - 1)  # a wider reach would only add keys before 0
        after = 0 if causal else min(w - 1, length - 1)
        size = min(band_rows(w), self.rows)
        blocks = -(-self.rows // size)
        span = size + before + after
        self.shape = (docs, blocks * size)
        device = query.device

        q = query.new_zeros(docs, blocks * size, heads, dim)
        q[:, : self.rows] = query[:, :, : self.rows].transpose(1, 2)
        self.query = q.view(docs * blocks, size, heads, dim).transpose(1, 2)
        self.key, self.value = (self._keys(x, length, before, after, size, span) for x in (key, value))

        rel = torch.arange(size, device=device)[:, None] - torch.arange(span, device=device) + before  # i - j
        inside = (rel <= before) & (rel >= -after)
        j = torch.arange(blocks, device=device)[:, None] * size - before + torch.arange(span, device=device)
        real = (j >= 0) & (j < length)
        self.allowed = (inside[None] & real[:, None, :]).repeat(docs, 1, 1).unsqueeze(1)

    def _keys(
        self, x: torch.Tensor, length: int, before: int, after: int, size: int, span: int
    ) -> torch.Tensor:
        """Blocks (docs x blocks, H, span, d) of keys: views into one padded copy of the group's keys."""
        docs, heads, _, dim = x.shape
        padded = x.new_zeros(before + self.shape[0] * self.shape[1] + after, heads, dim)
        padded[before : before + docs * self.shape[1]].view(docs, self.shape[1], heads, dim)[:, :length] = x[
            :, :, :length
        ].transpose(1, 2)
        count = self.query.shape[0]
        return padded.as_strided((count, heads, span, dim), (size * heads * dim, dim, heads * dim, 1))

    def unblock(self, x: torch.Tensor) -> torch.Tensor:
        """Block results (docs x blocks, H, R, ...) back to (docs, H, rows, ...)."""
        heads = x.shape[1]
        x = x.transpose(1, 2).reshape(*self.shape, heads, *x.shape[3:])[:, : self.rows]
        return x.transpose(1, 2)

    def additive_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """``allowed`` as logits to add: 0 where allowed, the dtype's most negative value elsewhere."""
        return torch.zeros(self.allowed.shape, dtype=dtype, device=self.allowed.device).masked_fill_(
            ~self.allowed, torch.finfo(dtype).min
        )


def selfextend_attention(
    queries: dict[str, torch.Tensor],
    keys: dict[str, torch.Tensor],
    value: torch.Tensor,
    lengths: list[int],
    windows: list[int],
    causal: bool,
    scale: float,
    kernel: LseKernel,
) -> torch.Tensor:
    """SelfExtend attention (B, H, n, d) from rotated queries and keys by kind.

    ``queries``: "exact" (q at i), "left" (q at floor(i/g) + w - floor(w/g)), "right" (q at
    floor(i/g) - (w - floor(w/g))); ``keys``: "exact" (k at j), "grouped" (k at floor(j/g)); all
    (B, H, n, d).  ``windows`` holds w per document (0: SelfExtend off, all positions exact).
    """
    out = torch.empty_like(queries["exact"])
    for first, stop, length, w in document_groups(lengths, windows):
        docs = slice(first, stop)
        k, v = keys["exact"][docs, :, :length], value[docs, :, :length]
        merged = LseMerge(out[docs])
        if w <= 0:  # SelfExtend off for these documents: every position exact
            merged.add_pieces(
                attend(queries["exact"][docs], k, v, ("lower", 0) if causal else ("all", 0), scale, kernel)
            )
        else:
            grouped = keys["grouped"][docs, :, :length]
            merged.add_pieces(attend(queries["left"][docs], grouped, v, ("lower", w), scale, kernel))
            if not causal:
                merged.add_pieces(attend(queries["right"][docs], grouped, v, ("upper", w), scale, kernel))
            band = _Band(queries["exact"][docs], k, v, length, w, causal)
            o, lse = kernel(
                band.query, band.key, band.value, False, scale, band.additive_mask(band.query.dtype)
            )
            merged.add(0, band.unblock(o), band.unblock(lse))
        out[docs] = merged.result()
    return out


def alibi_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    slopes: torch.Tensor,
    lengths: list[int],
    scale: float,
    max_bias_elements: int,
) -> torch.Tensor:
    """Bidirectional ALiBi attention: softmax_j(q_i . k_j * scale - m_h |i - j|) over keys 0..L.

    The bias of a group of documents is one vector per head, T_h[t] = -m_h |t - (L - 1)| for
    t = 0..n + L - 2; with keys reversed, bias[h, i, j'] = T_h[i + j'], a strided view.  Rows go
    in blocks of at least ``MIN_BIAS_ROWS``, more while the block's bias has at most
    ``max_bias_elements`` entries.
    """
    out = torch.empty_like(query)
    heads, n = query.shape[1], query.shape[2]
    # at least float32 before rounding to the query's dtype: integer distances up to 2^24 are exact
    m = slopes.to(device=query.device, dtype=torch.promote_types(slopes.dtype, torch.float32))
    for first, stop, length, _ in document_groups(lengths):
        k_rev, v_rev = key[first:stop, :, :length].flip(2), value[first:stop, :, :length].flip(2)
        distance = (torch.arange(n + length - 1, device=query.device) - (length - 1)).abs()
        table = (-m[:, None] * distance[None, :]).to(query.dtype)
        step = max(MIN_BIAS_ROWS, max_bias_elements // max(1, (stop - first) * heads * length))
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            bias = table.as_strided(
                (stop - first, heads, r1 - r0, length),
                (0, table.stride(0), 1, 1),
                table.storage_offset() + r0,
            )
            out[first:stop, :, r0:r1] = F.scaled_dot_product_attention(
                query[first:stop, :, r0:r1], k_rev, v_rev, attn_mask=bias, scale=scale
            )
    return out


def local_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    window: int,
    causal: bool,
    lengths: list[int],
    scale: float,
) -> torch.Tensor:
    """Sliding-window attention: keys |i - j| <= W (bidirectional) or 0 <= i - j < W (causal).

    The band of ``_Band`` with w = W + 1 (causal: w = W), through the public kernel with a boolean
    mask.  Padding rows beyond the last key's window have no key and give 0.
    """
    out = torch.zeros_like(query)
    w = window if causal else window + 1
    for first, stop, length, _ in document_groups(lengths):
        band = _Band(
            query[first:stop], key[first:stop, :, :length], value[first:stop, :, :length], length, w, causal
        )
        attended = F.scaled_dot_product_attention(
            band.query, band.key, band.value, attn_mask=band.allowed, scale=scale
        )
        out[first:stop, :, : band.rows] = band.unblock(attended)
    return out
