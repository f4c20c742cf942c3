"""Token-level inputs and outputs: each token's character offsets, windows over long texts, and the
token states of a text put back together from its windows.

A text's input (a :class:`~longembed.inputs.TokenizedInput`) is ``lead + body + tail``: the opening
special tokens and the prompt's tokens (``lead``), the text's own tokens (``body``, each with its
character offsets in the text) and the closing special tokens (``tail``).  A text longer than its
window is run as several windows, each ``lead + body[start:stop] + tail``, so that each one looks to
the model like an ordinary input.
Each body token's state is taken from one window, the one where it is farthest from an edge:
neighbouring windows that overlap split the overlap at its middle ("long late chunking"; with no
overlap this is exactly PCW's split).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from longembed.errors import UserError
from longembed.extension.pcw import window_spans
from longembed.inputs import TokenizedInput


@dataclass
class TokenEmbeddings:
    """One text's token states, as ``encode(..., output_value="token_embeddings")`` returns them.

    embeddings: (n, dim) float32 last-layer states of every token the model saw (special and prompt
                tokens included), in input order.
    offsets:    (n, 2) int64 character offsets in the text (``text[start:end]``); (-1, -1) for special
                and prompt tokens, which are not part of the text.
    input_ids:  (n,) the token ids.
    """

    embeddings: np.ndarray
    offsets: np.ndarray
    input_ids: np.ndarray

    @property
    def text_tokens(self) -> np.ndarray:
        """Boolean mask of the tokens that come from the text."""
        return self.offsets[:, 0] >= 0


@dataclass(frozen=True)
class Window:
    """Body tokens start..stop run together; the states of own_start..own_stop are kept."""

    start: int
    stop: int
    own_start: int
    own_stop: int


def plan_windows(n_body: int, room: int, overlap: int = 0) -> list[Window]:
    """Windows of at most ``room`` body tokens with ``overlap`` shared tokens (the last one aligned to
    the end, so it is full); each shared stretch is split at its middle between its two windows."""
    if room < 1:
        raise UserError(f"no room for the text in a window ({room} tokens left by the prompt and special tokens)")
    if not 0 <= overlap < room:
        raise UserError(f"window overlap must be in [0, {room}) tokens here, got {overlap}")
    spans = window_spans(n_body, room, overlap)
    windows = []
    for k, (start, stop) in enumerate(spans):
        own_start = 0 if k == 0 else (start + spans[k - 1][1]) // 2
        own_stop = n_body if k == len(spans) - 1 else (spans[k + 1][0] + stop) // 2
        windows.append(Window(start, stop, own_start, own_stop))
    return windows


def window_inputs(tokens: TokenizedInput, windows: Sequence[Window]) -> list[list[int]]:
    """The model inputs of a text's windows: lead + body[start:stop] + tail each."""
    body = tokens.body
    lead, tail = tokens.ids[: tokens.lead], tokens.ids[len(tokens.ids) - tokens.tail :]
    return [lead + body[w.start : w.stop] + tail for w in windows]


def assemble_tokens(tokens: TokenizedInput, windows: Sequence[Window], states: Sequence[np.ndarray]) -> TokenEmbeddings:
    """A text's token states from its windows' states (``states[k]``: window k's (len, dim) array)."""
    lead, trail = tokens.lead, tokens.tail
    parts = [states[0][:lead]]
    for window, state in zip(windows, states, strict=True):
        parts.append(state[lead + window.own_start - window.start : lead + window.own_stop - window.start])
    parts.append(states[-1][len(states[-1]) - trail :])
    embeddings = np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
    offsets = token_offsets(tokens)
    ids = np.asarray(tokens.ids, dtype=np.int64)
    if not (len(embeddings) == len(offsets) == len(ids)):
        raise AssertionError(f"{len(embeddings)} states for {len(ids)} tokens")
    return TokenEmbeddings(embeddings, offsets, ids)


def token_offsets(tokens: TokenizedInput) -> np.ndarray:
    """(n, 2) int64 character offsets of every token of an input, (-1, -1) for its special and prompt
    tokens: :attr:`TokenEmbeddings.offsets` before the model runs."""
    frame = [(-1, -1)]
    rows = frame * tokens.lead + list(tokens.offsets or []) + frame * tokens.tail
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2)
