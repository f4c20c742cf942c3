"""Requests checked before any work: each field of a body, in each route's error shape.

Requests are parsed by hand (not by FastAPI's validation) so that each route answers in its own error
shape, with a 4xx that names the problem:

* OpenAI routes: ``{"error": {"message", "type", "param", "code"}}`` with 400 / 404 / 413 / 429 / 503;
* TEI routes: ``{"error": message, "error_type": "Validation" | "Overloaded" | "Backend"}`` with
  422 / 413 / 429 / 503, as text-embeddings-inference answers.

A valid body becomes an :class:`EmbedRequest`: the texts, the prompt (the model's prompt by name,
:func:`~longembed.encoder_protocol.resolve_prompt`), the overflow policy (``longembed.overflow``, the server's names), the output size.
A field a route does not read is a 400 that names it (OpenAI's API does the same), so a misspelt
option ("dimension", "prompt") is never ignored in silence.  The OpenAI client sends ``input``,
``model``, ``encoding_format`` (base64 unless asked otherwise), and ``dimensions`` and ``user`` when
given: all are read (``user`` is accepted and not used).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from longembed.encoder import LongContextEncoder
from longembed.encoder_protocol import resolve_prompt
from longembed.inputs import OverflowPolicy, resolve_overflow
from longembed.serving.settings import ServerSettings


class ApiError(Exception):
    """A request the server refuses, with its status and, for OpenAI's shape, the offending field."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


_OPENAI_TYPES = {
    400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error", 413: "invalid_request_error",
    415: "invalid_request_error", 429: "rate_limit_error", 503: "server_error",
}
_TEI_TYPES = {401: "Unauthorized", 413: "Validation", 415: "Validation", 422: "Validation", 429: "Overloaded",
              503: "Unhealthy"}


def openai_error(error: ApiError) -> JSONResponse:
    body = {
        "error": {
            "message": error.message,
            "type": _OPENAI_TYPES.get(error.status, "server_error"),
            "param": error.param,
            "code": error.code,
        }
    }
    return JSONResponse(body, status_code=error.status)


def tei_error(error: ApiError) -> JSONResponse:
    status = 422 if error.status == 400 else error.status  # TEI answers validation errors with 422
    return JSONResponse({"error": error.message, "error_type": _TEI_TYPES.get(status, "Backend")}, status_code=status)


#: The fields each route reads (``/embed_chunks``, ``/embed_all`` and ``/tokenize``: token_validation).
OPENAI_FIELDS = ("input", "model", "encoding_format", "dimensions", "user", "prompt_name", "overflow",
                 "late_chunking")
TEI_EMBED_FIELDS = ("inputs", "normalize", "truncate", "truncation_direction", "dimensions", "prompt_name",
                    "overflow")


@dataclass(frozen=True)
class EmbedRequest:
    """A checked request: what to embed and how to answer.  ``late_chunking`` (OpenAI's route, Jina's
    convention): the texts are the consecutive chunks of one document."""

    texts: list[str]
    prefix: str
    overflow: OverflowPolicy
    dimensions: int | None
    normalize: bool | None = None  # None: the model's own (OpenAI's route)
    encoding: str = "float"
    late_chunking: bool = False
    field: str = "input"  # the body's field of the texts, named in errors ("inputs" on TEI's routes)


def reject_unknown_fields(body: dict[str, Any], known: tuple[str, ...], route: str) -> None:
    """A 400 naming every field of ``body`` that ``route`` does not read, and listing those it does."""
    unknown = [name for name in body if name not in known]
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        raise ApiError(
            400, f"unknown field{'s' if len(unknown) > 1 else ''} {names}: {route} takes {', '.join(known)}",
            unknown[0], "unknown_field",
        )


def check_bool(body: dict[str, Any], name: str, default: bool) -> bool:
    """``body[name]`` as true or false (``default`` when absent or null), else a 400 naming it."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be true or false, got {value!r}", name)
    return value


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The JSON object in the body, refusing bodies over ``limit`` bytes before reading them whole.

    The body must be declared ``application/json`` (415): browsers send other types cross-origin
    without asking, JSON only after a CORS preflight.  JSON that Python will not turn into values
    (integers of thousands of digits, nesting deeper than the interpreter recurses) is a 400.
    """
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(415, f"the request body must be sent as application/json, not {media_type or 'untyped'}")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body has {declared} bytes; this server takes at most {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, f"the request body is larger than this server's limit of {limit} bytes")
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "the request body nests JSON arrays or objects too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ApiError(400, f"the request body has a value this server cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


#: A UTF-16 surrogate on its own (JSON's "\ud800" escapes make them): not text any tokenizer can read.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_texts(value: Any, field_name: str, max_texts: int) -> list[str]:
    """A string or a non-empty list of non-empty strings, at most ``max_texts`` of them (each check is
    a scan in C, no copy: a request's texts are checked in a small part of what tokenizing them costs)."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list):
        raise ApiError(400, f"'{field_name}' must be a string or a list of strings", field_name)
    if not texts:
        raise ApiError(400, f"'{field_name}' is an empty list: send at least one text", field_name)
    if len(texts) > max_texts:
        raise ApiError(
            413, f"'{field_name}' has {len(texts)} texts; this server takes at most {max_texts} per request "
            "(max_client_batch_size)", field_name,
        )
    for i, text in enumerate(texts):
        if isinstance(text, int) or (isinstance(text, list) and all(isinstance(t, int) for t in text)):
            raise ApiError(
                400, f"'{field_name}[{i}]' is token ids: this server tokenizes with its own model's "
                "tokenizer, send text", field_name,
            )
        if not isinstance(text, str):
            raise ApiError(400, f"'{field_name}[{i}]' is {type(text).__name__}, not a string", field_name)
        if not text or text.isspace():
            raise ApiError(400, f"'{field_name}[{i}]' is empty (or only whitespace): it has no embedding", field_name)
        if not text.isascii() and LONE_SURROGATE.search(text):
            raise ApiError(400, f"'{field_name}[{i}]' is not valid Unicode (a lone surrogate)", field_name)
    return texts


@dataclass
class RequestValidator:
    """Checks request bodies against one server's encoder and settings (``dimensions``: the sizes it allows)."""

    encoder: LongContextEncoder
    settings: ServerSettings
    dimensions: tuple[int, ...]

    def openai_request(self, body: dict[str, Any]) -> EmbedRequest:
        """``/v1/embeddings``: input, model, encoding_format, dimensions, user, prompt_name, overflow,
        late_chunking."""
        reject_unknown_fields(body, OPENAI_FIELDS, "/v1/embeddings")
        if "input" not in body:
            raise ApiError(400, "'input' is required", "input")
        if not isinstance(body.get("model"), str):
            raise ApiError(400, "'model' is required and must be a string", "model")
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise ApiError(400, f"'encoding_format' must be 'float' or 'base64', got {encoding!r}", "encoding_format")
        if body.get("user") is not None and not isinstance(body["user"], str):
            raise ApiError(400, "'user' must be a string", "user")
        texts = check_texts(body["input"], "input", self.settings.max_client_batch_size)
        dimensions = self.check_dimensions(body.get("dimensions"))
        late = check_bool(body, "late_chunking", False)
        if late:
            self.check_late_chunking(body)
            self.check_chunk_count(len(texts), "input")
        return EmbedRequest(texts, self.prefix(body.get("prompt_name")), self.policy(body.get("overflow")),
                            dimensions, encoding=encoding, late_chunking=late)

    def check_late_chunking(self, body: dict[str, Any], cutting_fields: tuple[str, ...] = ("overflow",)) -> None:
        """Late chunking needs a mean-pooling model and never cuts, so it takes no overflow policy."""
        pooling = self.encoder.pooling
        if pooling != "mean":
            raise ApiError(
                400, f"late chunking mean-pools each chunk's token states, but this model pools with {pooling!r} "
                "(its vectors were trained that way): embed the chunks on their own instead (late_chunking "
                "false, or late=false on /embed_chunks)", "late_chunking",
            )
        for name in cutting_fields:
            if body.get(name) not in (None, False):
                raise ApiError(
                    400, f"'{name}' does not apply to late chunking: nothing is cut, a document longer than "
                    f"max_length runs as overlapping windows (up to {self.settings.max_document_tokens} tokens); "
                    f"drop '{name}'", name,
                )

    def check_chunk_count(self, n_chunks: int, field_name: str) -> None:
        """At most ``max_chunks_per_request`` chunk vectors per request (413)."""
        limit = self.settings.max_chunks_per_request
        if n_chunks > limit:
            raise ApiError(413, f"'{field_name}' makes {n_chunks} chunk vectors; this server makes at most "
                           f"{limit} per request (max_chunks_per_request): send fewer texts or larger chunks",
                           field_name)

    def tei_request(self, body: dict[str, Any]) -> EmbedRequest:
        """``/embed``: inputs, normalize, truncate (to Lo), truncation_direction, dimensions, prompt_name, overflow."""
        reject_unknown_fields(body, TEI_EMBED_FIELDS, "/embed")
        texts = self.tei_texts(body)
        normalize = check_bool(body, "normalize", True)
        dimensions = self.check_dimensions(body.get("dimensions"))
        return EmbedRequest(texts, self.prefix(body.get("prompt_name")), self.tei_policy(body), dimensions, normalize,
                            field="inputs")

    def tei_texts(self, body: dict[str, Any]) -> list[str]:
        """A TEI body's ``inputs``: one text or a list, at most ``max_client_batch_size``."""
        if "inputs" not in body:
            raise ApiError(400, "'inputs' is required", "inputs")
        return check_texts(body["inputs"], "inputs", self.settings.max_client_batch_size)

    def tei_policy(self, body: dict[str, Any]) -> OverflowPolicy:
        """TEI's ``truncate`` (true: cut to Lo) and ``truncation_direction``, else ``overflow``."""
        truncate = check_bool(body, "truncate", False)
        if body.get("truncation_direction") not in (None, "Right", "right"):
            raise ApiError(400, f"'truncation_direction' must be 'Right' (the end of a text is cut), got "
                           f"{body['truncation_direction']!r}", "truncation_direction")
        return self.policy("truncate" if truncate else body.get("overflow"))

    def check_dimensions(self, value: Any) -> int | None:
        """The output size asked for: None for the full size, else one the model supports."""
        full = self.encoder.embedding_dim
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(400, f"'dimensions' must be a positive integer, got {value!r}", "dimensions")
        if value == full:
            return None
        if value > full:
            raise ApiError(400, f"'dimensions'={value} is more than the model's {full}", "dimensions")
        if not self.settings.allow_any_dimensions and value not in self.dimensions:
            allowed = f"it supports {sorted(self.dimensions, reverse=True)}" if self.dimensions else (
                "it was not trained for shorter vectors (Matryoshka); the operator can allow any size with "
                "--allow-any-dimensions"
            )
            raise ApiError(400, f"'dimensions'={value} is not supported by this model: {allowed}", "dimensions")
        return value

    def prefix(self, prompt_name: Any) -> str:
        """The prompt named ``prompt_name`` (the encoder's lookup), "" for none."""
        if prompt_name is not None and not isinstance(prompt_name, str):
            raise ApiError(400, f"unknown prompt_name {prompt_name!r}: a prompt name is a string", "prompt_name")
        try:
            return resolve_prompt(self.encoder.prompts, prompt_name=prompt_name)
        except ValueError as exc:
            raise ApiError(400, str(exc), "prompt_name") from None

    def policy(self, value: Any) -> OverflowPolicy:
        """The request's overflow policy (the server's names), or the server's default."""
        try:
            return resolve_overflow(self.settings.overflow if value is None else value, "server", "'overflow'")
        except ValueError as exc:
            raise ApiError(400, str(exc), "overflow") from None
