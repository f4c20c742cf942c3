"""Token-level inputs and outputs: each token's character offsets, windows over long texts, and the
token states of a text put back together from its windows.

A text's input is ``lead + body + trail``: the opening special tokens and the prompt's tokens
(``lead``), the text's own tokens (``body``, each with its character offsets in the text) and the
closing special tokens (``trail``).  A text longer than its window is run as several windows, each
``lead + body[start:stop] + trail``, so that each one looks to the model like an ordinary input.
Each body token's state is taken from one window, the one where it is farthest from an edge:
neighbouring windows that overlap split the overlap at its middle ("long late chunking"; with no
overlap this is exactly PCW's split).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from longembed.extension.pcw import window_spans
from longembed.inputs import common_prefix_length


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


@dataclass
class TokenLayout:
    """One text's input ids split into lead (special + prompt tokens), body (the text) and trail."""

    ids: list[int]
    offsets: list[tuple[int, int]]  # of the body tokens, in text coordinates
    lead: int
    trail: int

    @property
    def body(self) -> list[int]:
        return self.ids[self.lead : len(self.ids) - self.trail]

    def truncated(self, max_length: int) -> TokenLayout:
        """The first ``max_length`` tokens, closing special tokens kept (as ``encode`` cuts inputs)."""
        if len(self.ids) <= max_length:
            return self
        room = max_length - self.lead - self.trail
        if room < 1:
            raise ValueError(f"the prompt and special tokens ({self.lead + self.trail}) fill a {max_length}-token input")
        ids = self.ids[: self.lead + room] + self.ids[len(self.ids) - self.trail :]
        return TokenLayout(ids, self.offsets[:room], self.lead, self.trail)


def token_layouts(
    texts: Sequence[str], tokenizer: Any, prefix: str, special_layout: tuple[int, int]
) -> list[TokenLayout]:
    """Tokenize ``prefix + text`` with character offsets (a fast tokenizer is needed).

    The lead is the opening special tokens plus the prompt's tokens as they appear in the input (see
    :func:`~longembed.inputs.common_prefix_length`, the same rule PCW windows use); body offsets are
    shifted to the text's own coordinates.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"{type(tokenizer).__name__} is a slow tokenizer: token offsets (and so token embeddings and "
            "chunking) need a fast (Rust) tokenizer; save the model with its tokenizer.json"
        )
    if not texts:
        return []
    head, tail = special_layout
    encoded = tokenizer(
        [prefix + t for t in texts], add_special_tokens=True, truncation=False, verbose=False,
        return_offsets_mapping=True,
    )
    prompt_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
    shift = len(prefix)
    layouts = []
    for ids, offsets in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True):
        content = ids[head : len(ids) - tail]
        lead = head + common_prefix_length(prompt_ids, content)
        body_offsets = [
            (max(start - shift, 0), max(end - shift, 0)) for start, end in offsets[lead : len(ids) - tail]
        ]
        layouts.append(TokenLayout(list(ids), body_offsets, lead, tail))
    return layouts


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
        raise ValueError(f"no room for the text in a window ({room} tokens left by the prompt and special tokens)")
    if not 0 <= overlap < room:
        raise ValueError(f"window overlap must be in [0, {room}) tokens here, got {overlap}")
    spans = window_spans(n_body, room, overlap)
    windows = []
    for k, (start, stop) in enumerate(spans):
        own_start = 0 if k == 0 else (start + spans[k - 1][1]) // 2
        own_stop = n_body if k == len(spans) - 1 else (spans[k + 1][0] + stop) // 2
        windows.append(Window(start, stop, own_start, own_stop))
    return windows


def window_inputs(layout: TokenLayout, windows: Sequence[Window]) -> list[list[int]]:
    """The model inputs of a text's windows: lead + body[start:stop] + trail each."""
    body = layout.body
    lead, trail = layout.ids[: layout.lead], layout.ids[len(layout.ids) - layout.trail :]
    return [lead + body[w.start : w.stop] + trail for w in windows]


def assemble_tokens(layout: TokenLayout, windows: Sequence[Window], states: Sequence[np.ndarray]) -> TokenEmbeddings:
    """A text's token states from its windows' states (``states[k]``: window k's (len, dim) array)."""
    lead, trail = layout.lead, layout.trail
    parts = [states[0][:lead]]
    for window, state in zip(windows, states, strict=True):
        parts.append(state[lead + window.own_start - window.start : lead + window.own_stop - window.start])
    parts.append(states[-1][len(states[-1]) - trail :])
    embeddings = np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
    frame = [(-1, -1)]
    offsets = np.asarray(frame * lead + list(layout.offsets) + frame * trail, dtype=np.int64).reshape(-1, 2)
    ids = np.asarray(layout.ids, dtype=np.int64)
    if not (len(embeddings) == len(offsets) == len(ids)):
        raise AssertionError(f"{len(embeddings)} states for {len(ids)} tokens")
    return TokenEmbeddings(embeddings, offsets, ids)
