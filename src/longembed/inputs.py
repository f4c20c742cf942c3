"""Texts -> the token-id sequences a model runs: checks, tokenizing once, overflow, PCW windows.

Everything here happens before the model: which texts are valid (a clear error names the first bad
one), how ``prompt + text`` is tokenized, once, into a :class:`TokenizedInput` (ids, each text token's
character offsets, the special-token and prompt layout) that the encoder, chunking, the server and
collapse all count, cut and run, how an input longer than the overflow policy's limit is cut (the
closing special tokens are kept) or refused (:mod:`longembed.overflow`), and, for PCW, how a long
input becomes Lo-token windows (``extension.pcw``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from longembed.errors import UserError, UserTypeError
from longembed.extension.pcw import split_into_windows
from longembed.overflow import OverflowPolicy, overflow_names, resolve_overflow
from longembed.textfiles import unicode_problem

__all__ = [
    "EncodeStats",
    "OverflowPolicy",
    "PreparedInputs",
    "TokenizedInput",
    "apply_overflow",
    "check_texts",
    "cut",
    "cut_text",
    "overflow_names",
    "prepare_inputs",
    "resolve_overflow",
    "special_token_layout",
    "tokenize",
    "tokenize_bounded",
]

#: characters a bounded tokenization (:func:`tokenize_bounded`) first scans per token it needs; it doubles
#: the scan until the text's first tokens are settled
CHARS_PER_TOKEN = 8
#: tokens past the limit two scans of a text must both reach (and agree before) to settle its first tokens
SCAN_MARGIN_TOKENS = 16


@dataclass
class EncodeStats:
    """What one ``encode`` call did to its inputs (``return_stats=True``; reported by the CLI)."""

    n_inputs: int = 0
    n_sequences: int = 0
    n_truncated: int = 0
    truncated_indices: list[int] = field(default_factory=list)
    longest_input_tokens: int = 0
    #: True when the longest input was counted only as far as a bounded tokenization went (at least that many)
    longest_input_at_least: bool = False


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
    raise UserError("cannot locate the content tokens among the special tokens of this tokenizer")


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
            raise UserTypeError(f"a numpy array of texts must be 1-D strings, got shape {texts.shape} {texts.dtype}")
        texts = texts.tolist()
    if not isinstance(texts, Sequence):
        raise UserTypeError(f"texts must be a string or a sequence of strings, got {type(texts).__name__}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise UserTypeError(f"texts[{i}] is {type(text).__name__}, not str; convert or drop it")
        if not text.strip():
            raise UserError(f"texts[{i}] is empty; an empty text has no meaningful embedding: drop it")
        problem = unicode_problem(text)
        if problem:
            raise UserError(f"texts[{i}] {problem}")
    return list(texts)


@dataclass(frozen=True)
class TokenizedInput:
    """One text as the model runs it: ``ids`` = head special tokens + prompt tokens + the text's tokens
    (the body) + tail special tokens, tokenized once and then counted, cut and windowed as ids.

    text:       the text tokenized (without the prompt); for a bounded count, the prefix scanned.
    offsets:    each body token's (start, end) characters in ``text``; None for a slow tokenizer.
    head, tail: the opening and closing special tokens (0, 0 when tokenized without them).
    prompt:     the prompt's tokens after the head, as they appear in the input (see
                :func:`common_prefix_length`).
    n_original: the input's tokens before any cut (for a bounded count: at least this many).
    complete:   False when only a prefix of the text was tokenized (a bounded count, see
                ``longembed.serving.overflow_planner``).
    """

    text: str
    ids: list[int]
    offsets: list[tuple[int, int]] | None
    head: int
    prompt: int
    tail: int
    n_original: int
    complete: bool = True

    @property
    def n_tokens(self) -> int:
        """Tokens the model runs: special, prompt and text tokens."""
        return len(self.ids)

    @property
    def lead(self) -> int:
        """Tokens before the text's own: the opening special tokens and the prompt's."""
        return self.head + self.prompt

    @property
    def body(self) -> list[int]:
        """The text's own tokens."""
        return self.ids[self.lead : len(self.ids) - self.tail]

    @property
    def truncated(self) -> bool:
        return self.n_original > len(self.ids) or not self.complete


def tokenize(
    texts: Sequence[str], tokenizer: Any, prompt: str = "", special_tokens: tuple[int, int] | None = None
) -> list[TokenizedInput]:
    """Tokenize ``prompt + text`` for each text, once: ids, body offsets (fast tokenizers) and layout.

    ``special_tokens``: the tokenizer's (head, tail) layout (:func:`special_token_layout`); None
    tokenizes the content alone, without special tokens (how collapse counts lengths).  Nothing is
    cut here (:func:`cut` and :func:`apply_overflow` do that, on the ids).
    """
    if not texts:
        return []
    head, tail = special_tokens or (0, 0)
    fast = bool(getattr(tokenizer, "is_fast", False))
    encoded = tokenizer(
        [prompt + t for t in texts], add_special_tokens=special_tokens is not None, truncation=False,
        verbose=False, return_offsets_mapping=fast,
    )
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else []
    mappings = encoded["offset_mapping"] if fast else [None] * len(texts)
    out = []
    for text, ids, mapping in zip(texts, encoded["input_ids"], mappings, strict=True):
        n_prompt = common_prefix_length(prompt_ids, ids[head : len(ids) - tail])
        offsets = None if mapping is None else [
            (max(start - len(prompt), 0), max(end - len(prompt), 0))
            for start, end in mapping[head + n_prompt : len(ids) - tail]
        ]
        out.append(TokenizedInput(text, list(ids), offsets, head, n_prompt, tail, len(ids)))
    return out


def tokenize_bounded(
    texts: Sequence[str], tokenizer: Any, prompt: str, special_tokens: tuple[int, int] | None, limit: int
) -> list[TokenizedInput]:
    """:func:`tokenize`'s inputs, exact in their first ``limit`` tokens, however long the texts: what an
    encode that cuts at ``limit`` tokens (or refuses past it) needs, in memory and time bounded by
    ``limit``, not by the text (a 200 MB text is not tokenized whole to run its first 512 tokens).

    A text of at most :data:`CHARS_PER_TOKEN` x (``limit`` + :data:`SCAN_MARGIN_TOKENS`) characters is
    tokenized whole, with the others of its kind in one call.  A longer one is tokenized a prefix at a
    time, the prefix doubled each time, until two consecutive scans both hold more than ``limit`` +
    :data:`SCAN_MARGIN_TOKENS` tokens and agree on their first ``limit`` ids and offsets: the end of
    the scan then no longer reaches back into them.  That input has ``complete`` False (its
    ``text`` is the prefix scanned, ``n_original`` a lower bound); a text no scan settles before its
    end is tokenized whole.
    """
    window = CHARS_PER_TOKEN * (limit + SCAN_MARGIN_TOKENS)
    short = [i for i, t in enumerate(texts) if len(t) <= window]
    out: list[TokenizedInput | None] = [None] * len(texts)
    for i, tokens in zip(short, tokenize([texts[i] for i in short], tokenizer, prompt, special_tokens), strict=True):
        out[i] = tokens
    for i, text in enumerate(texts):
        if out[i] is None:
            out[i] = _tokenize_prefix(text, tokenizer, prompt, special_tokens, limit, window)
    return [x for x in out if x is not None]


def _tokenize_prefix(
    text: str, tokenizer: Any, prompt: str, special_tokens: tuple[int, int] | None, limit: int, window: int
) -> TokenizedInput:
    """One long text as :func:`tokenize_bounded` tokenizes it (a prefix scan settled by a second one)."""
    previous: TokenizedInput | None = None
    while window < len(text):
        (scan,) = tokenize([text[:window]], tokenizer, prompt, special_tokens)
        enough = scan.n_tokens > limit + SCAN_MARGIN_TOKENS
        if enough and previous is not None and _same_first_tokens(previous, scan, limit):
            return replace(scan, complete=False)
        previous = scan if enough else None
        window *= 2
    (whole,) = tokenize([text], tokenizer, prompt, special_tokens)
    return whole


def _same_first_tokens(a: TokenizedInput, b: TokenizedInput, limit: int) -> bool:
    body = max(limit - a.lead, 0)
    return (a.ids[:limit] == b.ids[:limit] and a.lead == b.lead
            and (a.offsets is None or b.offsets is None or a.offsets[:body] == b.offsets[:body]))


def cut(tokens: TokenizedInput, n: int) -> TokenizedInput:
    """The first ``n`` tokens of an input, its closing special tokens kept (``ids[:n - tail] + tail``),
    as the encoder has always cut; an input of at most ``n`` tokens comes back unchanged."""
    if len(tokens.ids) <= n:
        return tokens
    ids = tokens.ids[: n - tokens.tail] + tokens.ids[len(tokens.ids) - tokens.tail :]
    prompt = min(tokens.prompt, max(n - tokens.tail - tokens.head, 0))
    kept = max(n - tokens.tail - tokens.head - prompt, 0)
    offsets = None if tokens.offsets is None else tokens.offsets[:kept]
    return replace(tokens, ids=ids, offsets=offsets, prompt=prompt)


def cut_text(tokens: TokenizedInput) -> str:
    """The part of the text an input's body tokens cover: after a cut, the text up to the end of the
    last token kept (what a client sees of a truncated input)."""
    if not tokens.truncated:
        return tokens.text
    if tokens.offsets is None:
        raise UserError(
            "turning a cut back into text needs token offsets, which a slow tokenizer does not give; "
            "save the model with its tokenizer.json"
        )
    return tokens.text[: tokens.offsets[-1][1]] if tokens.offsets else ""


def require_offsets(inputs: Sequence[TokenizedInput], tokenizer: Any) -> None:
    """A clear error when inputs have no token offsets (a slow tokenizer): token states and chunking need them."""
    if any(x.offsets is None for x in inputs):
        raise UserError(
            f"{type(tokenizer).__name__} is a slow tokenizer: token offsets (and so token embeddings and "
            "chunking) need a fast (Rust) tokenizer; save the model with its tokenizer.json"
        )


def apply_overflow(
    inputs: Sequence[TokenizedInput], policy: OverflowPolicy, window: int, max_length: int, stacklevel: int = 2
) -> tuple[list[TokenizedInput], EncodeStats]:
    """Inputs under ``policy`` (limit Lo = ``window`` or Lt = ``max_length``) and their stats: those
    longer than the limit are cut with a warning, or, for a refusing policy, a ValueError names them."""
    limit = policy.limit_for(window, max_length)
    counts = [x.n_tokens for x in inputs]
    stats = EncodeStats(n_inputs=len(counts), longest_input_tokens=max(counts, default=0))
    stats.longest_input_at_least = any(not x.complete and x.n_tokens == stats.longest_input_tokens for x in inputs)
    stats.truncated_indices = [i for i, n in enumerate(counts) if n > limit]
    stats.n_truncated = len(stats.truncated_indices)
    if not stats.n_truncated:
        return list(inputs), stats
    name = f"max_length={limit}" if policy.limit == "max" else f"the model's window Lo={limit}"
    message = (
        f"{stats.n_truncated} of {len(counts)} inputs exceed {name} tokens "
        f"(longest: {'at least ' if stats.longest_input_at_least else ''}{stats.longest_input_tokens}; first indices: {stats.truncated_indices[:5]})"
    )
    if not policy.truncates:
        raise UserError(message + f"; raise max_length or shorten them (overflow policy {policy.name!r})")
    warnings.warn(message + f"; they were truncated to {limit} tokens", stacklevel=stacklevel + 1)
    return [cut(x, limit) for x in inputs], stats


def prepare_inputs(inputs: Sequence[TokenizedInput], stats: EncodeStats, window: int | None = None) -> PreparedInputs:
    """The token-id sequences the model runs for ``inputs`` (already under the overflow policy): one
    per input, or with ``window`` (PCW's Lo) each input's windows.

    PCW windows each carry the special tokens and the prompt (its tokens as they appear in the input,
    see :func:`common_prefix_length`), so every window looks like an ordinary input.
    """
    if window is None:
        sequences, owners = [x.ids for x in inputs], list(range(len(inputs)))
    else:
        sequences, owners = [], []
        for i, x in enumerate(inputs):
            ids = x.ids
            start, prompt = ids[: x.head], ids[x.head : x.lead]
            tail_ids = ids[len(ids) - x.tail :] if x.tail else []
            windows = split_into_windows(start, prompt, x.body, tail_ids, window)
            sequences.extend(windows)
            owners.extend([i] * len(windows))
    stats.n_sequences = len(sequences)
    return PreparedInputs(sequences, owners, len(inputs), stats)
