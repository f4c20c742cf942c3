"""What the server does with an input longer than the model's window: extend, truncate or refuse.

Two limits matter (``GET /info`` shows both): Lo, the window the model was trained for, and Lt, the
server's ``max_length`` (what the configured extension method reaches).  The overflow policy
(:mod:`longembed.overflow`; the server's names) answers "what about an input longer than Lo?":

``extend``           run it through the extension method, up to Lt; an input longer than Lt is
                     refused (413), never cut silently.
``truncate_to_max``  cut it to Lt tokens: the extension kept, what ``eval`` and the encoder's
                     ``on_overflow="truncate"`` do.
``truncate``         (``truncate_to_window``) cut it to Lo tokens: the model as trained, as TEI's
                     ``--auto-truncate`` does; the extension is not used.
``error``            (``error_over_window``) refuse it (413).

Every cut is counted in ``/metrics`` and reported in the response; every refusal names the input, its
length and the policy that would take it.  Token counts include the special tokens and the prompt:
what the model runs.  Each input is tokenized once, here: the planner counts, cuts (the first tokens
and the closing special tokens, as the encoder cuts) and hands the same ids to the batcher, which runs
them as they are.  Inputs are planned in order, a few at a time, so a request is refused at its first
input over the limit without the rest being tokenized.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from longembed.encoder import LongContextEncoder
from longembed.errors import UserError
from longembed.inputs import OverflowPolicy, TokenizedInput, cut, cut_text, resolve_overflow, tokenize


class InputTooLong(ValueError):
    """An input the policy refuses; ``index`` is its place in the request."""

    def __init__(self, message: str, index: int, n_tokens: int, limit: int):
        super().__init__(message)
        self.index, self.n_tokens, self.limit = index, n_tokens, limit


class TooManyTokens(ValueError):
    """The inputs planned so far already hold more tokens than the caller's budget (the server's queue):
    the request can never run whole, so the rest is not tokenized."""


@dataclass(frozen=True)
class PlannedInput:
    """One input as it will be embedded: its token ids (cut when ``truncated``) and, for the response,
    the text they cover."""

    tokens: TokenizedInput
    text: str

    @property
    def n_tokens(self) -> int:
        """Tokens the model runs (after any cut)."""
        return self.tokens.n_tokens

    @property
    def original_tokens(self) -> int:
        return self.tokens.n_original

    @property
    def truncated(self) -> bool:
        return self.tokens.truncated


#: Characters tokenized at first per token of the limit: a text longer than this is tokenized by a
#: growing prefix (doubled each time) until its count passes the limit or the text ends.
CHARS_PER_TOKEN = 16
#: Texts tokenized per hold of the tokenizer lock: a short request waits for at most this many texts
#: of a large one, not for the whole of it.
TEXTS_PER_LOCK = 16
#: A refused input whose scan stopped early is counted whole when it has at most this many times the
#: scanned characters (the message then gives its true length); a longer one gets a lower bound.
COUNT_WHOLE_FACTOR = 4


def scan_blocks(texts: Sequence[str], window: int) -> Iterator[list[int]]:
    """Consecutive runs of text indices to tokenize together: at most :data:`TEXTS_PER_LOCK` texts and
    about ``window`` characters of first scan each (a text as long as the window is a block alone), so
    that planning stops at its first refused input having tokenized little past it."""
    block: list[int] = []
    chars = 0
    for i, text in enumerate(texts):
        size = min(len(text), window)
        if block and (len(block) == TEXTS_PER_LOCK or chars + size > window):
            yield block
            block, chars = [], 0
        block.append(i)
        chars += size
    if block:
        yield block


def size_of(tokens: TokenizedInput) -> str:
    """An input's length for a message: its count, or the bound a stopped scan gives."""
    if tokens.complete:
        return f"{tokens.n_tokens} tokens"
    return f"at least {tokens.n_tokens - 1} tokens in its first {len(tokens.text)} characters"


def refusal_advice(n_tokens: int, exact: bool, window: int, max_length: int) -> str:
    """What a client can do with an input its policy refused (``n_tokens``: its length, or a lower bound
    when not ``exact``): the policy that embeds it whole with the extension when it fits in Lt, else the
    cut that keeps the extension (``truncate_to_max``, as eval cuts); ``truncate`` is named for what it
    is, a cut to Lo that does not use the extension."""
    keep = (f"overflow='truncate_to_max' to embed its first {max_length} tokens with the extension, as eval does "
            f"(overflow='truncate' cuts to the model's window of {window} tokens and does not use the extension)")
    if n_tokens <= max_length and exact:
        return f"ask for overflow='extend' to embed it whole with the extension (up to {max_length} tokens)"
    if max_length == window:
        return f"split it, or ask for overflow='truncate' to embed its first {window} tokens"
    if n_tokens <= max_length:
        return f"ask for overflow='extend' (the extension, up to {max_length} tokens) or {keep}"
    return f"split it (the chunk routes take long documents), or ask for {keep}"


class OverflowPlanner:
    """Tokenizes each input once, with a tokenizer of its own, and applies the overflow policy to its ids.

    The copy matters: a Hugging Face fast tokenizer changes its truncation settings on each call, so one
    tokenizer shared by request threads and the model's thread can fail ("Already borrowed"); a lock
    keeps this one to one caller at a time, for at most :data:`TEXTS_PER_LOCK` texts per hold.

    Tokenizing is bounded: the planner only needs to know whether an input passes Lo or Lt, so it never
    tokenizes much more than ``CHARS_PER_TOKEN x limit`` characters of a text, whatever its size (a
    50 MB input costs as much to plan as a text of a few thousand tokens, in time and in memory).
    """

    def __init__(self, encoder: LongContextEncoder):
        self.tokenizer = copy.deepcopy(encoder.tokenizer)
        self.special_tokens = encoder.runner.special_tokens
        self.window = encoder.original_length  # Lo
        self.max_length = encoder.max_length  # Lt
        self._lock = threading.Lock()

    def tokenize(self, texts: Sequence[str], prefix: str = "", special: bool = True) -> list[TokenizedInput]:
        """``prefix + text`` tokenized as the model runs it (:func:`longembed.inputs.tokenize`), a few texts
        per lock; ``special=False``: without the special tokens."""
        layout = self.special_tokens if special else None
        out: list[TokenizedInput] = []
        for start in range(0, len(texts), TEXTS_PER_LOCK):
            with self._lock:
                out += tokenize(texts[start : start + TEXTS_PER_LOCK], self.tokenizer, prefix, layout)
        return out

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """The tokenizer's string of each token id (its vocabulary entry), under the lock."""
        with self._lock:
            return list(self.tokenizer.convert_ids_to_tokens(list(ids)))

    def iter_up_to(
        self, texts: Sequence[str], prefix: str, limit: int, special: bool = True
    ) -> Iterator[TokenizedInput]:
        """:meth:`tokenize_up_to`'s inputs one by one, in order, tokenized a block at a time
        (:func:`scan_blocks`): a caller that stops at an input never tokenizes the texts after its block."""
        for block in scan_blocks(texts, CHARS_PER_TOKEN * (limit + 2)):
            yield from self.tokenize_up_to([texts[i] for i in block], prefix, limit, special)

    def counted(self, tokens: TokenizedInput, text: str, prefix: str, special: bool = True) -> TokenizedInput:
        """A stopped scan of ``text`` made a whole count when the text is at most
        :data:`COUNT_WHOLE_FACTOR` times the part scanned (bounded work), else left as the bound it is."""
        if tokens.complete or len(text) > COUNT_WHOLE_FACTOR * len(tokens.text):
            return tokens
        return self.tokenize([text], prefix, special)[0]

    def tokenize_up_to(
        self, texts: Sequence[str], prefix: str, limit: int, special: bool = True
    ) -> list[TokenizedInput]:
        """Each text tokenized whole when it has at most ``limit`` tokens; past that, a prefix of it
        whose tokens already pass the limit (``complete`` False: the text has at least that many)."""
        window = CHARS_PER_TOKEN * (limit + 2)
        out: list[TokenizedInput | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        while pending:
            scanned = [texts[i][:window] for i in pending]
            still = []
            for i, part, tokens in zip(pending, scanned, self.tokenize(scanned, prefix, special), strict=True):
                if len(part) == len(texts[i]):
                    out[i] = tokens
                elif tokens.n_tokens > limit + 1:  # one token of margin: the scan may end inside a word
                    out[i] = dataclasses.replace(tokens, complete=False)
                else:
                    still.append(i)
            pending, window = still, window * 2
        return [x for x in out if x is not None]

    def cut_to_tokens(self, text: str, prefix: str, limit: int) -> str:
        """The longest prefix of ``text`` whose input (specials + prompt + text) has at most ``limit``
        tokens, cut at a token boundary: the text of :meth:`cut`."""
        return cut_text(self.cut(self.tokenize([text], prefix)[0], limit))

    def cut(self, tokens: TokenizedInput, limit: int) -> TokenizedInput:
        """``tokens`` cut to ``limit`` tokens (:func:`longembed.inputs.cut`); an error when the prompt and
        special tokens leave no room for the text."""
        if limit - tokens.lead - tokens.tail < 1:
            raise UserError(f"the prompt and special tokens alone take {tokens.lead + tokens.tail} of {limit} tokens")
        return cut(tokens, limit)

    def plan(
        self, texts: Sequence[str], prefix: str, policy: str | OverflowPolicy, labels: Sequence[str] | None = None,
        max_total: int | None = None,
    ) -> list[PlannedInput]:
        """Apply ``policy`` to each text, in order; raises :class:`InputTooLong` for the first input it
        refuses (named by ``labels``, default "input i"), and :class:`TooManyTokens` as soon as the
        inputs planned hold more than ``max_total`` tokens, before the texts after them are tokenized."""
        policy = resolve_overflow(policy, "server")
        lo, lt = self.window, self.max_length
        limit = policy.limit_for(lo, lt)
        planned: list[PlannedInput] = []
        total = 0
        for index, tokens in enumerate(self.iter_up_to(texts, prefix, limit)):
            if tokens.complete and tokens.n_tokens <= limit:
                planned.append(PlannedInput(tokens, tokens.text))
            elif policy.truncates:  # a scanned prefix holds more than the limit: it is cut, not the text
                kept = self.cut(tokens, limit)
                planned.append(PlannedInput(kept, cut_text(kept)))
            else:
                raise self.refusal(self.counted(tokens, texts[index], prefix), index, policy, labels)
            total += planned[-1].n_tokens
            if max_total is not None and total > max_total:
                raise TooManyTokens(
                    f"the first {index + 1} of its {len(texts)} inputs have {total} tokens, more than the {max_total} "
                    "this server queues at once (max_queue_tokens): send them in several smaller requests")
        return planned

    def refusal(
        self, tokens: TokenizedInput, index: int, policy: OverflowPolicy, labels: Sequence[str] | None
    ) -> InputTooLong:
        """The 413 of an input ``policy`` refuses: its length (or a bound), the limit, and the policy
        that would take it."""
        lo, lt = self.window, self.max_length
        what = f"this server's max_length (Lt = {lt})" if policy.limit == "max" else f"the model's window (Lo = {lo})"
        label = labels[index] if labels is not None else f"input {index}"
        return InputTooLong(
            f"{label} has {size_of(tokens)} (prompt and special tokens included), more than {what}; "
            + refusal_advice(tokens.n_tokens - (not tokens.complete), tokens.complete, lo, lt),
            index, tokens.n_tokens, policy.limit_for(lo, lt),
        )
