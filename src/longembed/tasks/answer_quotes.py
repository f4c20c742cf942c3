"""Where a question's answer is in its document: the optional answer quote and character offset of a
``longembed task-dir`` questions file, checked against the document's text and turned into the spans
eval's passage hit@1 judges (``RetrievalData.answers``).

A row may give ``answer`` (the quote), ``answer_start`` (its character offset in the document's text as
task-dir reads it) and ``answer_end`` (the offset after it; only needed without a quote).  A quote is
found exactly, or else with every run of whitespace matching any other (a quote copied from a rendered
page); with ``answer_start`` it must be at that offset, without one it must occur once in a named
document.  Anything that does not fit is a problem naming the row's line, never a span quietly moved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ANSWER = "answer"
ANSWER_START = "answer_start"
ANSWER_END = "answer_end"
#: the optional answer columns of a questions file
ANSWER_FIELDS = (ANSWER, ANSWER_START, ANSWER_END)
#: how many occurrences a problem lists
_SHOWN = 3
#: how much of a quote or of the text a problem quotes
_QUOTED = 60

Span = tuple[int, int]


@dataclass(frozen=True)
class AnswerGiven:
    """What a row says about its answer: the quote, its start and end offsets (each may be absent)."""

    quote: str | None = None
    start: int | None = None
    end: int | None = None


def answer_given(record: dict[str, Any], where: str, problems: list[str]) -> AnswerGiven | None:
    """The row's answer fields (an empty cell counts as absent), None when it gives none; a quote that is
    not text or an offset that is not a whole number >= 0 is added to ``problems``."""
    quote = record.get(ANSWER)
    if quote == "":
        quote = None
    if quote is not None and not isinstance(quote, str):
        problems.append(f"{where}: the answer must be a string (the quote), not {type(quote).__name__}")
        quote = None
    elif quote is not None and not quote.strip():
        problems.append(f"{where}: the answer is blank (whitespace only): give the quote, or leave it empty")
        quote = None
    start, end = (_offset(record.get(name), name, where, problems) for name in (ANSWER_START, ANSWER_END))
    if quote is None and start is None and end is None:
        return None
    return AnswerGiven(quote, start, end)


def _offset(value: Any, name: str, where: str, problems: list[str]) -> int | None:
    """An offset field: a JSON integer or the digits of a table cell; empty or absent is None."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    problems.append(f"{where}: {name} must be a character offset (a whole number >= 0), not {value!r}")
    return None


def locate_answer(given: AnswerGiven, documents: Sequence[str], corpus: dict[str, str],
                  where: str) -> tuple[dict[str, list[Span]], str | None]:
    """(document id -> the answer's span, for the named ``documents`` that hold it; the problem, or None).

    With ``answer_start`` (one document only) the quote must be at that offset, or the span is
    ``[answer_start, answer_end)``; without it, the quote must occur in at least one of the documents and
    exactly once in each that holds it."""
    if given.start is None:
        if given.end is not None:
            return {}, f"{where}: {ANSWER_END} needs {ANSWER_START} (the offset where the answer begins)"
        assert given.quote is not None
        return _find_quote(given.quote, documents, corpus, where)
    if len(documents) != 1:
        return {}, (f"{where}: {ANSWER_START} is an offset into one document and the question names "
                    f"{len(documents)}: name one, or give the answer quote without an offset")
    doc_id = documents[0]
    span, problem = _at_offset(given, corpus[doc_id], doc_id, where)
    return ({doc_id: [span]} if span else {}), problem


def _at_offset(given: AnswerGiven, text: str, doc_id: str, where: str) -> tuple[Span | None, str | None]:
    """The span at ``given.start`` of ``text``: the quote there (exactly or whitespace-normalised), or
    ``[start, end)`` without a quote; else the problem."""
    start = given.start
    assert start is not None
    if start >= len(text):
        return None, f"{where}: {ANSWER_START} {start} is past the end of {doc_id!r} ({len(text)} characters)"
    if given.quote is None:
        if given.end is None:
            return None, f"{where}: {ANSWER_START} needs the answer quote ({ANSWER}) or {ANSWER_END}"
        if not start < given.end <= len(text) or not text[start : given.end].strip():
            return None, (f"{where}: [{ANSWER_START}, {ANSWER_END}) = [{start}, {given.end}) is not a non-empty span "
                          f"of {doc_id!r} ({len(text)} characters)")
        return (start, given.end), None
    end = _quote_end_at(given.quote, text, start)
    if end is None:
        elsewhere = occurrences(given.quote, text)
        hint = f"; the quote occurs at {_listed(elsewhere)}" if elsewhere else ""
        return None, (f"{where}: the answer {_short(given.quote)!r} is not at {ANSWER_START} {start} of {doc_id!r}: "
                      f"the text there reads {_short(text[start:start + len(given.quote)])!r}{hint}")
    if given.end is not None and given.end != end:
        return None, f"{where}: {ANSWER_END} {given.end} is not where the answer ends in {doc_id!r} ({end})"
    return (start, end), None


def _quote_end_at(quote: str, text: str, start: int) -> int | None:
    """Where ``quote`` ends if it begins at ``start`` of ``text`` (exactly, else whitespace-normalised)."""
    if text.startswith(quote, start):
        return start + len(quote)
    match = quote_pattern(quote).match(text, start)
    return match.end() if match else None


def _find_quote(quote: str, documents: Sequence[str], corpus: dict[str, str],
                where: str) -> tuple[dict[str, list[Span]], str | None]:
    """The quote's one occurrence in each named document that holds it; a problem when none holds it or
    one holds it more than once."""
    spans: dict[str, list[Span]] = {}
    for doc_id in dict.fromkeys(documents):
        found = occurrences(quote, corpus[doc_id])
        if len(found) > 1:
            return {}, (f"{where}: the answer {_short(quote)!r} occurs {len(found)} times in {doc_id!r} (at characters "
                        f"{_listed(found)}): give {ANSWER_START} to say which")
        if found:
            spans[doc_id] = found
    if not spans:
        named = " or ".join(repr(d) for d in documents)
        return {}, f"{where}: the answer {_short(quote)!r} does not occur in {named}, not even with whitespace normalised"
    return spans, None


def occurrences(quote: str, text: str) -> list[Span]:
    """Every span of ``text`` that is ``quote`` exactly; when there is none, every match of the quote
    with its whitespace normalised (:func:`quote_pattern`)."""
    exact: list[Span] = []
    at = text.find(quote)
    while at >= 0:
        exact.append((at, at + len(quote)))
        at = text.find(quote, at + 1)
    return exact or [m.span() for m in quote_pattern(quote).finditer(text)]


def quote_pattern(quote: str) -> re.Pattern[str]:
    """The quote's words in order, any run of whitespace between them (space, line break, tab)."""
    return re.compile(r"\s+".join(re.escape(word) for word in quote.split()))


def _listed(spans: list[Span]) -> str:
    more = f" and {len(spans) - _SHOWN} more" if len(spans) > _SHOWN else ""
    return ", ".join(str(s) for s, _ in spans[:_SHOWN]) + more


def _short(text: str) -> str:
    return text if len(text) <= _QUOTED else text[: _QUOTED - 3] + "..."
