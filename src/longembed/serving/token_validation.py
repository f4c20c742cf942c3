"""The bodies of the chunk and token routes, checked before any work: ``/embed_chunks``, ``/embed_all``
and ``/tokenize`` (TEI's shapes; errors in TEI's shape, see :mod:`longembed.serving.validation`).

``/embed_chunks`` (longembed's own route, TEI-shaped): ``inputs``, ``chunking`` (as
``LongContextEncoder.encode_chunks``: "tokens:256" (the default), "tokens:256:32", "sentences:4", or
(start, end) character spans: one list per input, or the list itself when ``inputs`` is one string),
``late`` (default true), ``normalize`` (default true), ``prompt_name``, ``dimensions``; and, for naive
chunks only (``late`` false: each chunk is an input of its own), ``truncate``, ``truncation_direction``
and ``overflow``.  Late chunking never cuts, so those are refused with it.
``/embed_all``: ``inputs``, ``truncate``, ``truncation_direction``, ``prompt_name``, ``overflow``.
``/tokenize``: ``inputs``, ``add_special_tokens`` (default true), ``prompt_name``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longembed.chunking.spans import Chunking, Span, check_spans, parse_chunking
from longembed.inputs import OverflowPolicy
from longembed.serving.validation import (
    ApiError,
    EmbedRequest,
    RequestValidator,
    check_bool,
    reject_unknown_fields,
)

CHUNK_FIELDS = ("inputs", "chunking", "late", "normalize", "prompt_name", "dimensions", "truncate",
                "truncation_direction", "overflow")
EMBED_ALL_FIELDS = ("inputs", "truncate", "truncation_direction", "prompt_name", "overflow")
TOKENIZE_FIELDS = ("inputs", "add_special_tokens", "prompt_name")
#: encode_chunks' default chunking, the route's too.
DEFAULT_CHUNKING = "tokens:256"


@dataclass(frozen=True)
class ChunkRequest:
    """A checked ``/embed_chunks`` body: the texts and how to chunk and embed them.  ``chunking`` is a
    rule, or each text's (start, end) spans, checked against it."""

    texts: list[str]
    chunking: Chunking | list[list[Span]]
    late: bool
    prefix: str
    normalize: bool
    dimensions: int | None
    overflow: OverflowPolicy


@dataclass(frozen=True)
class TokenizeRequest:
    """A checked ``/tokenize`` body."""

    texts: list[str]
    prefix: str
    add_special_tokens: bool


def chunk_request(validator: RequestValidator, body: dict[str, Any]) -> ChunkRequest:
    """``/embed_chunks``'s body (see the module docstring)."""
    reject_unknown_fields(body, CHUNK_FIELDS, "/embed_chunks")
    texts = validator.tei_texts(body)
    late = check_bool(body, "late", True)
    if late:
        validator.check_late_chunking(body, ("truncate", "overflow", "truncation_direction"))
    given = body.get("chunking")
    chunking = check_chunking(DEFAULT_CHUNKING if given is None else given, texts, isinstance(body["inputs"], str))
    if not isinstance(chunking, Chunking):
        validator.check_chunk_count(sum(len(spans) for spans in chunking), "chunking")
    return ChunkRequest(
        texts, chunking, late, validator.prefix(body.get("prompt_name")), check_bool(body, "normalize", True),
        validator.check_dimensions(body.get("dimensions")), validator.tei_policy(body),
    )


def check_chunking(value: Any, texts: list[str], single: bool) -> Chunking | list[list[Span]]:
    """A chunking rule string, or (start, end) spans per text (the bare list for a single string)."""
    if isinstance(value, str):
        try:
            return parse_chunking(value)
        except ValueError as exc:
            raise ApiError(400, str(exc), "chunking") from None
    if not isinstance(value, list):
        raise ApiError(400, "'chunking' must be a string such as 'tokens:256' or a list of (start, end) "
                       f"character spans per input, got {type(value).__name__}", "chunking")
    per_text = [value] if single else value
    if len(per_text) != len(texts):
        raise ApiError(400, f"'chunking' gives spans for {len(per_text)} inputs, but there are {len(texts)}: "
                       "give one list of [start, end] spans per input", "chunking")
    try:
        return [check_spans(text, spans, f"chunking[{i}]") for i, (text, spans) in enumerate(zip(texts, per_text, strict=True))]
    except (TypeError, ValueError) as exc:
        raise ApiError(400, str(exc), "chunking") from None


def embed_all_request(validator: RequestValidator, body: dict[str, Any]) -> EmbedRequest:
    """``/embed_all``'s body: the texts, prompt and overflow policy (token states are never normalized)."""
    reject_unknown_fields(body, EMBED_ALL_FIELDS, "/embed_all")
    texts = validator.tei_texts(body)
    return EmbedRequest(texts, validator.prefix(body.get("prompt_name")), validator.tei_policy(body), None, False,
                        field="inputs")


def tokenize_request(validator: RequestValidator, body: dict[str, Any]) -> TokenizeRequest:
    """``/tokenize``'s body."""
    reject_unknown_fields(body, TOKENIZE_FIELDS, "/tokenize")
    texts = validator.tei_texts(body)
    add_special = check_bool(body, "add_special_tokens", True)
    return TokenizeRequest(texts, validator.prefix(body.get("prompt_name")), add_special)
