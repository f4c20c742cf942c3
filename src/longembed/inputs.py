"""Texts -> the token-id sequences a model runs: checks, prompt, truncation and PCW windows.

Everything here happens before the model: which texts are valid (a clear error names the first bad
one), how the prompt is prepended, how an input longer than max_length is cut (the closing special
tokens are kept), and, for PCW, how a long input becomes Lo-token windows (``extension.pcw``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longembed.extension.pcw import split_into_windows


@dataclass
class EncodeStats:
    """What the last ``encode`` call did to its inputs (reported by the CLI)."""

    n_inputs: int = 0
    n_sequences: int = 0
    n_truncated: int = 0
    truncated_indices: list[int] = field(default_factory=list)
    longest_input_tokens: int = 0


@dataclass
class PreparedInputs:
    """Token-id sequences to run and, for each, the index of the text it belongs to."""

    sequences: list[list[int]]
    owners: list[int]
    n_texts: int
    stats: EncodeStats


def special_token_layout(tokenizer: Any) -> tuple[int, int]:
    """How many special tokens the tokenizer puts before and after the content (e.g. (1, 1) for BERT)."""
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    for head in range(len(with_special) - len(plain) + 1):
        if with_special[head : head + len(plain)] == plain:
            return head, len(with_special) - head - len(plain)
    raise ValueError("cannot locate the content tokens among the special tokens of this tokenizer")


def common_prefix_length(prompt_ids: list[int], content: list[int]) -> int:
    """How many leading tokens of ``content`` are the prompt's own tokens.

    The prompt tokenized alone can end differently from the prompt inside prompt + text: a SentencePiece
    tokenizer turns "passage: " alone into "▁passage", ":", "▁", but in "passage: hello" the "▁" joins
    the next word. The tokens both share are the prompt's part of every input.
    """
    n = 0
    while n < min(len(prompt_ids), len(content)) and prompt_ids[n] == content[n]:
        n += 1
    return n


def check_texts(texts: Any) -> list[str]:
    """``texts`` as a list of non-empty, valid Unicode strings, else an error naming the first bad one.

    Accepts a string (one text), a sequence of strings, or a 1-D numpy array of strings (as
    sentence-transformers does).
    """
    if isinstance(texts, str):
        texts = [texts]
    elif isinstance(texts, np.ndarray):
        if texts.ndim != 1 or texts.dtype.kind not in "UO":
            raise TypeError(f"a numpy array of texts must be 1-D strings, got shape {texts.shape} {texts.dtype}")
        texts = texts.tolist()
    if not isinstance(texts, Sequence):
        raise TypeError(f"texts must be a string or a sequence of strings, got {type(texts).__name__}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, not str; convert or drop it")
        if not text.strip():
            raise ValueError(f"texts[{i}] is empty; an empty text has no meaningful embedding: drop it")
        problem = unicode_problem(text)
        if problem:
            raise ValueError(f"texts[{i}] {problem}")
    return list(texts)


def unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be tokenized as Unicode (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"holds a lone surrogate (U+{ord(text[exc.start]):04X}) at character {exc.start}: not valid "
            "Unicode; decode its source with errors='replace' or drop the character"
        )
    return None


def check_overflow(
    token_counts: Sequence[int], max_length: int, on_overflow: str = "truncate", stacklevel: int = 5
) -> EncodeStats:
    """Stats of inputs of ``token_counts`` tokens; those longer than ``max_length`` are listed and a
    warning says they will be truncated (``on_overflow="error"``: a ValueError instead)."""
    stats = EncodeStats(n_inputs=len(token_counts), longest_input_tokens=max(token_counts, default=0))
    stats.truncated_indices = [i for i, n in enumerate(token_counts) if n > max_length]
    stats.n_truncated = len(stats.truncated_indices)
    if stats.n_truncated:
        message = (
            f"{stats.n_truncated} of {len(token_counts)} inputs exceed max_length={max_length} tokens "
            f"(longest: {stats.longest_input_tokens}; first indices: {stats.truncated_indices[:5]})"
        )
        if on_overflow == "error":
            raise ValueError(message + "; raise max_length or shorten them (on_overflow='error')")
        warnings.warn(message + "; they were truncated to max_length", stacklevel=stacklevel)
    return stats


def prepare_inputs(
    texts: list[str],
    tokenizer: Any,
    prefix: str,
    max_length: int,
    layout: tuple[int, int],
    on_overflow: str = "truncate",
    window: int | None = None,
) -> PreparedInputs:
    """Tokenize ``prefix + text``; cut inputs longer than ``max_length`` (or refuse them with
    ``on_overflow="error"``); with ``window`` (PCW's Lo), split each input into windows.

    A cut keeps the first ``max_length - tail`` tokens and the closing special tokens.  PCW windows
    each carry the special tokens and the prompt (its tokens as they appear in the input, see
    :func:`common_prefix_length`), so every window looks like an ordinary input.
    """
    head, tail = layout
    if not texts:
        return PreparedInputs([], [], 0, EncodeStats())
    encoded = tokenizer([prefix + t for t in texts], add_special_tokens=True, truncation=False, verbose=False)[
        "input_ids"
    ]
    stats = check_overflow([len(ids) for ids in encoded], max_length, on_overflow)
    for i in stats.truncated_indices:
        ids = encoded[i]
        encoded[i] = ids[: max_length - tail] + ids[len(ids) - tail :]

    if window is None:
        sequences, owners = encoded, list(range(len(encoded)))
    else:
        prompt_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
        sequences, owners = [], []
        for i, ids in enumerate(encoded):
            start, tail_ids = ids[:head], ids[len(ids) - tail :] if tail else []
            content = ids[head : len(ids) - tail]
            shared = content[: common_prefix_length(prompt_ids, content)]
            windows = split_into_windows(start, shared, content[len(shared) :], tail_ids, window)
            sequences.extend(windows)
            owners.extend([i] * len(windows))
    stats.n_sequences = len(sequences)
    return PreparedInputs(sequences, owners, len(texts), stats)
