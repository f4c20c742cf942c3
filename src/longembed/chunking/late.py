"""Late chunking (Günther et al., 2024): a chunk's vector is the mean of its tokens' states, the
states computed once over the whole text, so every chunk vector has seen the whole document.

Which tokens a chunk pools: every text token whose character offsets overlap the chunk's span; the
chunk that holds the text's first token also pools the lead (opening special tokens and prompt), and
the one holding the last token also the trail (closing special tokens).  So a single chunk covering
the whole text pools every token, and its vector is the document's mean-pooled embedding exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from longembed.chunking.tokens import TokenEmbeddings
from longembed.errors import UserError


class EmptyChunk(UserError):
    """A chunk span that covers no token of its text (``index``: its place among the spans), e.g. a
    span of zero-width characters, which tokenizers drop."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def chunk_token_indices(tokens: TokenEmbeddings, spans: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """For each (start, end) character span, the indices of the tokens it pools (see the module)."""
    return span_token_indices(tokens.offsets, spans)


def span_token_indices(offsets: np.ndarray, spans: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """:func:`chunk_token_indices` from the tokens' (n, 2) character offsets alone ((-1, -1) for special
    and prompt tokens), so that a server can check the spans before it runs the model; a span over no
    token raises :class:`EmptyChunk`."""
    starts, ends = offsets[:, 0], offsets[:, 1]
    in_text = np.flatnonzero(starts >= 0)
    if len(in_text) == 0:
        raise EmptyChunk("this text has no tokens of its own to chunk", 0)
    first, last = int(in_text[0]), int(in_text[-1])
    lead, trail = np.arange(0, first), np.arange(last + 1, len(starts))
    out = []
    for k, (start, end) in enumerate(spans):
        overlaps = (starts < end) & (ends > start)
        empty_inside = (starts == ends) & (starts >= start) & (starts < end)
        index = np.flatnonzero((starts >= 0) & (overlaps | empty_inside))
        if len(index) == 0:
            raise EmptyChunk(f"chunk span ({start}, {end}) covers no token of the text", k)
        if index[0] == first:
            index = np.concatenate([lead, index])
        if index[-1] == last:
            index = np.concatenate([index, trail])
        out.append(index)
    return out


def late_chunk_vectors(tokens: TokenEmbeddings, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """(len(spans), dim) float32: the mean token state of each chunk (not normalized)."""
    return pool_token_states(tokens.embeddings, chunk_token_indices(tokens, spans))


def pool_token_states(states: np.ndarray, indices: Sequence[np.ndarray]) -> np.ndarray:
    """(len(indices), dim) float32: the mean of ``states``' rows at each index array (float64 sums)."""
    rows = [states[index].mean(axis=0, dtype=np.float64) for index in indices]
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), states.shape[1])
