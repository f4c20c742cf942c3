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


#: Characters tokenized at first per token of the limit: a text longer than this is tokenized by a
#: growing prefix (doubled each time) until its count passes the limit or the text ends.
CHARS_PER_TOKEN = 16
#: Texts tokenized per hold of the tokenizer lock: a short request waits for at most this many texts
#: of a large one, not for the whole of it.
TEXTS_PER_LOCK = 16


@dataclass(frozen=True)
class TokenCount:
    """Tokens of one input (specials + prompt + text): exact, or, when ``exact`` is False, a count of
    its first ``chars`` characters that already passes the limit asked for (the text has at least that many)."""

    n: int
    exact: bool
    chars: int


class OverflowPlanner:
    """Counts tokens and applies the overflow policy with a tokenizer of its own.

    The copy matters: a Hugging Face fast tokenizer changes its truncation settings on each call, so one
    tokenizer shared by request threads and the model's thread can fail ("Already borrowed"); a lock
    keeps this one to one caller at a time, for at most :data:`TEXTS_PER_LOCK` texts per hold.

    Counting is bounded: the planner only needs to know whether an input passes Lo or Lt, so it never
    tokenizes much more than ``CHARS_PER_TOKEN x limit`` characters of a text, whatever its size (a
    50 MB input costs as much to plan as a text of a few thousand tokens, in time and in memory).
    """

    def __init__(self, encoder: LongContextEncoder):
        self.tokenizer = copy.deepcopy(encoder.tokenizer)
        self.special_tokens = encoder.special_tokens
        self.window = encoder.original_length  # Lo
        self.max_length = encoder.max_length  # Lt
        self._lock = threading.Lock()

    def count_tokens(self, texts: Sequence[str], prefix: str = "") -> list[int]:
        """Exact tokens the model runs for each text: specials + prompt + text (no truncation)."""
        counts: list[int] = []
        for start in range(0, len(texts), TEXTS_PER_LOCK):
            chunk = [prefix + t for t in texts[start : start + TEXTS_PER_LOCK]]
            with self._lock:
                encoded = self.tokenizer(chunk, add_special_tokens=True, truncation=False, verbose=False)
            counts += [len(ids) for ids in encoded["input_ids"]]
        return counts

    def count_up_to(self, texts: Sequence[str], prefix: str, limit: int) -> list[TokenCount]:
        """Each text's tokens, exact up to ``limit``; past it, a lower bound from a prefix of the text."""
        window = CHARS_PER_TOKEN * (limit + 2)
        out: list[TokenCount | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        while pending:
            scanned = [texts[i][:window] for i in pending]
            counts = self.count_tokens(scanned, prefix)
            still = []
            for i, part, n in zip(pending, scanned, counts, strict=True):
                if len(part) == len(texts[i]):
                    out[i] = TokenCount(n, True, len(part))
                elif n > limit + 1:  # one token of margin: the scan may end inside a word
                    out[i] = TokenCount(n, False, len(part))
                else:
                    still.append(i)
            pending, window = still, window * 2
        return [c for c in out if c is not None]

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
        counts = self.count_up_to(texts, prefix, lt if policy == "extend" else lo)
        for index, (text, count) in enumerate(zip(texts, counts, strict=True)):
            n = count.n
            if count.exact and (n <= lo or (policy == "extend" and n <= lt)):
                planned.append(PlannedInput(text, n, n, truncated=False))
            elif policy == "truncate":  # the scanned prefix holds more than Lo tokens: cut it, not the text
                cut = self.cut_to_tokens(text[: count.chars], prefix, lo)
                planned.append(PlannedInput(cut, self.count_tokens([cut], prefix)[0], n, truncated=True))
            else:
                limit = lt if policy == "extend" else lo
                what = (
                    f"this server's max_length (Lt = {lt})" if policy == "extend"
                    else f"the model's window (Lo = {lo}); overflow='extend' embeds up to {lt} tokens"
                )
                size = f"{n} tokens" if count.exact else f"more than {n - 1} tokens (counting stopped there)"
                raise InputTooLong(
                    f"input {index} has {size} (prompt and special tokens included), more than {what}; "
                    "shorten it or ask for overflow='truncate'",
                    index, n, limit,
                )
        return planned
