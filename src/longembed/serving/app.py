"""The HTTP server: OpenAI's ``/v1/embeddings``, TEI's ``/embed``, ``/health``, ``/info``, ``/metrics``.

Every input reaches the model or the client gets a 4xx naming the problem: nothing is dropped, cut
without being reported, or answered with a 500 because of what the client sent.  Requests are parsed
by hand (not by FastAPI's validation) so each route answers in its own error shape:

* OpenAI routes: ``{"error": {"message", "type", "param", "code"}}`` with 400 / 413 / 429 / 503;
* TEI routes: ``{"error": message, "error_type": "Validation" | "Overloaded" | "Backend"}`` with
  422 / 413 / 429 / 503, as text-embeddings-inference answers.

Extra request fields (the OpenAI client sends them with ``extra_body``): ``overflow`` (extend /
truncate / error, see :mod:`longembed.serving.overflow`) and ``prompt_name`` ("query", "document",
... from the model's prompts).  Truncated inputs are reported in the ``X-Longembed-Truncated`` header
(their indices) and, on the OpenAI route, in a ``truncated`` list in the body.

Safety (a localhost server must not be drivable by any web page, nor fall over for one client):
POST bodies must be ``application/json`` (415 otherwise: a page cannot send that cross-origin without
a CORS preflight, which fails unless ``cors_origins`` allows it); ``Host`` must be this machine or an
allowed name (400, against DNS rebinding); with ``api_key`` every route but ``/health`` needs
``Authorization: Bearer <key>`` (401); a client that disconnects has its queued inputs cancelled and is
counted in ``longembed_client_disconnects`` (not as a 500); a server error answers 500 with an id
to find it in the log, never the exception's text.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect

from longembed.encoder import LongContextEncoder
from longembed.serving.batcher import DynamicBatcher, QueueFull, RequestTooLarge, ShuttingDown
from longembed.serving.metrics import CONTENT_TYPE, ServerMetrics
from longembed.serving.overflow import OVERFLOW_POLICIES, InputTooLong, OverflowPlanner, PlannedInput
from longembed.serving.settings import MATRYOSHKA_DIMENSIONS, ServerSettings

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """A request the server refuses, with its status and, for OpenAI's shape, the offending field."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


_OPENAI_TYPES = {
    400: "invalid_request_error", 401: "invalid_request_error", 413: "invalid_request_error",
    415: "invalid_request_error", 429: "rate_limit_error", 503: "server_error",
}
_TEI_TYPES = {401: "Unauthorized", 413: "Validation", 415: "Validation", 422: "Validation", 429: "Overloaded",
              503: "Unhealthy"}
#: Host names a server on this machine answers to (besides the address it binds and ``allowed_hosts``).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
#: Seconds between checks that a waiting request's client is still connected.
DISCONNECT_POLL_SECONDS = 0.25


class ClientGone(Exception):
    """The client closed its connection before its answer was ready (nobody reads the response)."""


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


@dataclass
class Embedded:
    """Vectors of one request, with what happened to its inputs."""

    vectors: np.ndarray
    inputs: list[PlannedInput]

    @property
    def truncated(self) -> list[int]:
        return [i for i, p in enumerate(self.inputs) if p.truncated]

    @property
    def n_tokens(self) -> int:
        return sum(p.n_tokens for p in self.inputs)


@dataclass
class EmbeddingService:
    """The encoder behind the routes: checks, the overflow policy, the batcher and the metrics."""

    encoder: LongContextEncoder
    settings: ServerSettings = field(default_factory=ServerSettings)

    def __post_init__(self) -> None:
        s = self.settings
        self.model_name = s.served_model_name or _folder_name(self.encoder)
        self.planner = OverflowPlanner(self.encoder)
        self.metrics = ServerMetrics()
        self.batcher = DynamicBatcher(
            self._encode,
            max_batch_tokens=s.max_batch_tokens,
            max_queue_tokens=s.max_queue_tokens or 32 * s.max_batch_tokens,
            on_batch=self.metrics.record_batch,
        )
        self.dimensions = s.dimensions or MATRYOSHKA_DIMENSIONS.get(_folder_name(self.encoder), ())
        if s.max_batch_tokens < self.encoder.max_length:
            raise ValueError(
                f"max_batch_tokens={s.max_batch_tokens} is smaller than max_length={self.encoder.max_length}: "
                "the longest input would not fit in a batch"
            )

    def _encode(self, texts: list[str], prompt: str, normalize: bool | None, budget: int) -> np.ndarray:
        return self.encoder.encode(
            texts, batch_size=len(texts), prompt=prompt, normalize_embeddings=normalize, max_tokens_per_batch=budget
        )

    def info(self) -> dict[str, Any]:
        e, s = self.encoder, self.settings
        return {  # no file system paths: a client has no business knowing where the model lives
            "model_id": self.model_name,
            "method": e.method,
            "position_scheme": e.position_scheme,
            "original_length": e.original_length,
            "max_length": e.max_length,
            "embedding_dim": e.embedding_dim,
            "pooling": e.pooling,
            "normalize": e.normalize,
            "prompts": e.prompts,
            "dimensions": list(self.dimensions) or None,
            "allow_any_dimensions": s.allow_any_dimensions,
            "overflow": s.overflow,
            "overflow_policies": list(OVERFLOW_POLICIES),
            "max_batch_tokens": s.max_batch_tokens,
            "max_queue_tokens": self.batcher.max_queue_tokens,
            "max_client_batch_size": s.max_client_batch_size,
            "max_body_bytes": s.max_body_bytes,
            "encoder_config": {**e.config.to_dict(), "model": self.model_name},
            "api_key_required": s.api_key is not None,
        }

    def authorize(self, request: Request) -> None:
        """With an api_key, the request must carry ``Authorization: Bearer <key>`` (401 otherwise)."""
        key = self.settings.api_key
        if key is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), key.encode()):
            raise ApiError(401, "a valid API key is required: send 'Authorization: Bearer <key>'", code="invalid_api_key")

    def check_texts(self, value: Any, field_name: str) -> list[str]:
        """A string or a non-empty list of non-empty strings, at most max_client_batch_size of them."""
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list):
            raise ApiError(400, f"'{field_name}' must be a string or a list of strings", field_name)
        if not texts:
            raise ApiError(400, f"'{field_name}' is an empty list: send at least one text", field_name)
        if len(texts) > self.settings.max_client_batch_size:
            raise ApiError(
                413, f"'{field_name}' has {len(texts)} texts; this server takes at most "
                f"{self.settings.max_client_batch_size} per request (max_client_batch_size)", field_name,
            )
        for i, text in enumerate(texts):
            if isinstance(text, int) or (isinstance(text, list) and all(isinstance(t, int) for t in text)):
                raise ApiError(
                    400, f"'{field_name}[{i}]' is token ids: this server tokenizes with its own model's "
                    "tokenizer, send text", field_name,
                )
            if not isinstance(text, str):
                raise ApiError(400, f"'{field_name}[{i}]' is {type(text).__name__}, not a string", field_name)
            if not text.strip():
                raise ApiError(400, f"'{field_name}[{i}]' is empty (or only whitespace): it has no embedding", field_name)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ApiError(400, f"'{field_name}[{i}]' is not valid Unicode (a lone surrogate)", field_name) from None
        return texts

    def check_dimensions(self, value: Any) -> int | None:
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
        if prompt_name is None:
            return ""
        if not isinstance(prompt_name, str) or prompt_name not in self.encoder.prompts:
            known = ", ".join(repr(k) for k in self.encoder.prompts) or "none"
            raise ApiError(400, f"unknown prompt_name {prompt_name!r}; this model's prompts: {known}", "prompt_name")
        return self.encoder.prompts[prompt_name]

    def policy(self, value: Any) -> str:
        if value is None:
            return self.settings.overflow
        if value not in OVERFLOW_POLICIES:
            raise ApiError(400, f"'overflow' must be one of {', '.join(OVERFLOW_POLICIES)}; got {value!r}", "overflow")
        return value

    async def embed(
        self, texts: list[str], prefix: str, policy: str, normalize: bool | None, route: str,
        request: Request | None = None,
    ) -> Embedded:
        """Plan (count, cut or refuse), queue, await the batch: the vectors in input order."""
        try:
            planned = await run_in_threadpool(self.planner.plan, texts, prefix, policy)
        except InputTooLong as exc:
            self.metrics.over_window.inc()
            self.metrics.refused.inc()
            raise ApiError(413, str(exc), "input", "context_length_exceeded") from None
        except ValueError as exc:  # a prompt longer than the window
            raise ApiError(400, str(exc), "input") from None
        try:
            future = self.batcher.submit([p.text for p in planned], [p.n_tokens for p in planned], prefix, normalize)
        except RequestTooLarge as exc:
            raise ApiError(413, str(exc), "input", "request_too_large") from None
        except QueueFull as exc:
            raise ApiError(429, str(exc), code="queue_full") from None
        except ShuttingDown as exc:
            raise ApiError(503, str(exc), code="shutting_down") from None
        self.metrics.queue_tokens.set(self.batcher.queued_tokens)
        self.metrics.queue_inputs.set(self.batcher.queued_inputs)
        vectors = await self.wait(future, request)
        lo = self.encoder.original_length
        self.metrics.over_window.inc(sum(p.original_tokens > lo for p in planned))
        self.metrics.truncated.inc(sum(p.truncated for p in planned))
        self.metrics.inputs.labels(route).inc(len(planned))
        self.metrics.tokens.labels(route).inc(sum(p.n_tokens for p in planned))
        return Embedded(vectors, planned)


    async def wait(self, future: Any, request: Request | None) -> np.ndarray:
        """The future's vectors; if the client disconnects first, its queued inputs are cancelled."""
        waiting = asyncio.wrap_future(future)
        while request is not None:
            done, _ = await asyncio.wait({waiting}, timeout=DISCONNECT_POLL_SECONDS)
            if done:
                break
            if await request.is_disconnected():
                self.batcher.cancel(future)
                waiting.cancel()
                raise ClientGone()
        return await waiting


def shorten(vectors: np.ndarray, dimensions: int | None) -> np.ndarray:
    """The first ``dimensions`` components, renormalized to unit length (OpenAI's ``dimensions``)."""
    if dimensions is None:
        return vectors
    cut = vectors[:, :dimensions]
    return cut / np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)


def encode_base64(vector: np.ndarray) -> str:
    """Little-endian float32 bytes in base64: what OpenAI's clients decode for encoding_format=base64."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


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


def _folder_name(encoder: LongContextEncoder) -> str:
    return str(encoder.source.folder or encoder.source.name).rstrip("/").rsplit("/", 1)[-1]


def _truncation_headers(embedded: Embedded) -> dict[str, str]:
    return {"X-Longembed-Truncated": ",".join(map(str, embedded.truncated))} if embedded.truncated else {}


def create_app(
    encoder: LongContextEncoder, settings: ServerSettings | None = None, bound_host: str | None = None
) -> FastAPI:
    """A FastAPI app serving ``encoder``; its batcher starts and drains with the app's lifespan.

    ``bound_host`` (the address the server listens on) is an allowed ``Host`` besides loopback and
    ``settings.allowed_hosts``.
    """
    service = EmbeddingService(encoder, settings or ServerSettings())
    s = service.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.batcher.start()
        yield
        # finish the accepted inputs, for at most shutdown_seconds; what is left is answered 503
        await run_in_threadpool(service.batcher.close, s.shutdown_seconds)

    app = FastAPI(title="longembed", lifespan=lifespan, docs_url="/docs")
    app.state.service = service
    hosts = [*LOOPBACK_HOSTS, *([bound_host] if bound_host else []), *s.allowed_hosts]
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)
    if s.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(s.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])

    async def timed(route: str, call, shape, request: Request) -> Response:
        start = time.perf_counter()
        try:
            service.authorize(request)
            response = await call()
        except ApiError as error:
            response = shape(error)
        except (ClientDisconnect, ClientGone):  # nobody reads an answer: count it, no traceback, no 500
            service.metrics.client_disconnects.labels(route).inc()
            logger.info("%s: the client disconnected before its answer was ready", route)
            response = Response(status_code=499)  # nginx's "client closed request"
        except Exception:  # the server's own failure: logged with an id, the client gets the id only
            error_id = uuid.uuid4().hex[:12]
            logger.exception("%s request failed (error id %s)", route, error_id)
            response = shape(ApiError(500, f"internal server error (error id {error_id}; see the server log)"))
        status = str(response.status_code)
        service.metrics.requests.labels(route, status).inc()
        service.metrics.latency.labels(route).observe(time.perf_counter() - start)
        return response

    @app.post("/v1/embeddings")
    async def openai_embeddings(request: Request) -> Response:
        async def handle() -> Response:
            body = await read_json(request, service.settings.max_body_bytes)
            if "input" not in body:
                raise ApiError(400, "'input' is required", "input")
            if not isinstance(body.get("model"), str):
                raise ApiError(400, "'model' is required and must be a string", "model")
            encoding = body.get("encoding_format") or "float"
            if encoding not in ("float", "base64"):
                raise ApiError(400, f"'encoding_format' must be 'float' or 'base64', got {encoding!r}", "encoding_format")
            texts = service.check_texts(body["input"], "input")
            dimensions = service.check_dimensions(body.get("dimensions"))
            embedded = await service.embed(
                texts, service.prefix(body.get("prompt_name")), service.policy(body.get("overflow")), None, "openai",
                request,
            )
            vectors = shorten(embedded.vectors, dimensions)
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": encode_base64(v) if encoding == "base64" else v.astype(float).tolist(),
                }
                for i, v in enumerate(vectors)
            ]
            usage = {"prompt_tokens": embedded.n_tokens, "total_tokens": embedded.n_tokens}
            content = {"object": "list", "data": data, "model": service.model_name, "usage": usage}
            if embedded.truncated:
                content["truncated"] = embedded.truncated
            return JSONResponse(content, headers=_truncation_headers(embedded))

        return await timed("openai", handle, openai_error, request)

    @app.post("/embed")
    async def tei_embed(request: Request) -> Response:
        async def handle() -> Response:
            body = await read_json(request, service.settings.max_body_bytes)
            if "inputs" not in body:
                raise ApiError(400, "'inputs' is required", "inputs")
            texts = service.check_texts(body["inputs"], "inputs")
            normalize = body.get("normalize", True)
            if not isinstance(normalize, bool):
                raise ApiError(400, "'normalize' must be true or false", "normalize")
            truncate = body.get("truncate")
            if truncate is not None and not isinstance(truncate, bool):
                raise ApiError(400, "'truncate' must be true or false", "truncate")
            if body.get("truncation_direction", "Right") not in ("Right", "right"):
                raise ApiError(400, "only truncation_direction='Right' is supported: the end of a text is cut")
            policy = "truncate" if truncate else service.policy(body.get("overflow"))
            dimensions = service.check_dimensions(body.get("dimensions"))
            embedded = await service.embed(
                texts, service.prefix(body.get("prompt_name")), policy, normalize, "tei", request
            )
            vectors = shorten(embedded.vectors, dimensions) if normalize else (
                embedded.vectors if dimensions is None else embedded.vectors[:, :dimensions]
            )
            return JSONResponse(vectors.astype(float).tolist(), headers=_truncation_headers(embedded))

        return await timed("tei", handle, tei_error, request)

    @app.get("/health")
    async def health() -> Response:
        if service.batcher.closing:
            return JSONResponse({"status": "shutting down"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/info")
    async def info(request: Request) -> Response:
        try:
            service.authorize(request)
        except ApiError as error:
            return openai_error(error)
        return JSONResponse(service.info())

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        try:
            service.authorize(request)
        except ApiError as error:
            return openai_error(error)
        service.metrics.queue_tokens.set(service.batcher.queued_tokens)
        service.metrics.queue_inputs.set(service.batcher.queued_inputs)
        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE)

    return app

