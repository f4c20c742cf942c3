"""What the server does with an input longer than the model's window: extend, truncate or refuse.

Two limits matter (``GET /info`` shows both): Lo, the window the model was trained for, and Lt, the
server's ``max_length`` (what the configured extension method reaches).  The overflow policy answers
"what about an input longer than Lo?":

``extend``    run it through the extension method, up to Lt; an input longer than Lt is refused (413),
              never cut silently.
``truncate``  cut it to Lo tokens (the model as trained, as TEI's ``--auto-truncate`` does); every cut
              is counted in ``/metrics`` and reported in the response.
``error``     refuse it (413), with the limit and the input's length in the message.

Token counts include the special tokens and the prompt: what the model runs.  A cut keeps whole
tokens: the text is cut at the end of the last token that fits, so embedding the cut text runs exactly
the first Lo tokens (the closing special tokens kept), as the encoder's own truncation does.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from longembed.chunking.tokens import token_layouts
from longembed.encoder import LongContextEncoder
from longembed.serving.choices import OVERFLOW_POLICIES


class InputTooLong(ValueError):
    """An input the policy refuses; ``index`` is its place in the request."""

    def __init__(self, message: str, index: int, n_tokens: int, limit: int):
        super().__init__(message)
        self.index, self.n_tokens, self.limit = index, n_tokens, limit


@dataclass(frozen=True)
class PlannedInput:
    """One input as it will be embedded: its text (cut when ``truncated``) and token counts."""

    text: str
    n_tokens: int  # tokens the model runs (after any cut)
    original_tokens: int
    truncated: bool


def check_policy(policy: str) -> str:
    if policy not in OVERFLOW_POLICIES:
        raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}; got {policy!r}")
    return policy


class OverflowPlanner:
    """Counts tokens and applies the overflow policy with a tokenizer of its own.

    The copy matters: a Hugging Face fast tokenizer changes its truncation settings on each call, so one
    tokenizer shared by request threads and the model's thread can fail ("Already borrowed"); a lock
    keeps this one to one caller at a time.
    """

    def __init__(self, encoder: LongContextEncoder):
        self.tokenizer = copy.deepcopy(encoder.tokenizer)
        self.special_tokens = encoder.special_tokens
        self.window = encoder.original_length  # Lo
        self.max_length = encoder.max_length  # Lt
        self._lock = threading.Lock()

    def count_tokens(self, texts: Sequence[str], prefix: str = "") -> list[int]:
        """Tokens the model runs for each text: specials + prompt + text (no truncation)."""
        if not texts:
            return []
        with self._lock:
            encoded = self.tokenizer(
                [prefix + t for t in texts], add_special_tokens=True, truncation=False, verbose=False
            )
        return [len(ids) for ids in encoded["input_ids"]]

    def cut_to_tokens(self, text: str, prefix: str, limit: int) -> str:
        """The longest prefix of ``text`` whose input (specials + prompt + text) has at most ``limit``
        tokens, cut at a token boundary."""
        with self._lock:
            layout = token_layouts([text], self.tokenizer, prefix, self.special_tokens)[0]
        room = min(limit - layout.lead - layout.trail, len(layout.offsets))
        while room > 0:
            cut = text[: layout.offsets[room - 1][1]]
            if self.count_tokens([cut], prefix)[0] <= limit:  # re-tokenizing a cut does not grow in practice
                return cut
            room -= 1
        raise ValueError(f"the prompt and special tokens alone take {layout.lead + layout.trail} of {limit} tokens")

    def plan(self, texts: Sequence[str], prefix: str, policy: str) -> list[PlannedInput]:
        """Apply ``policy`` to each text; raises :class:`InputTooLong` for the first input it refuses."""
        check_policy(policy)
        lo, lt = self.window, self.max_length
        planned = []
        for index, (text, n) in enumerate(zip(texts, self.count_tokens(texts, prefix), strict=True)):
            if n <= lo or (policy == "extend" and n <= lt):
                planned.append(PlannedInput(text, n, n, truncated=False))
            elif policy == "truncate":
                cut = self.cut_to_tokens(text, prefix, lo)
                planned.append(PlannedInput(cut, self.count_tokens([cut], prefix)[0], n, truncated=True))
            else:
                limit = lt if policy == "extend" else lo
                what = (
                    f"this server's max_length (Lt = {lt})" if policy == "extend"
                    else f"the model's window (Lo = {lo}); overflow='extend' embeds up to {lt} tokens"
                )
                raise InputTooLong(
                    f"input {index} has {n} tokens (prompt and special tokens included), more than {what}; "
                    "shorten it or ask for overflow='truncate'",
                    index, n, limit,
                )
        return planned
