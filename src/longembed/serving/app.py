"""The HTTP server: OpenAI's ``/v1/embeddings``, TEI's ``/embed``, ``/health``, ``/info``, ``/metrics``.

Every input reaches the model or the client gets a 4xx naming the problem: nothing is dropped, cut
without being reported, or answered with a 500 because of what the client sent.  Requests are checked
by :mod:`longembed.serving.validation` (each route answers in its own error shape, OpenAI's or TEI's);
this module holds the routes and the service behind them.  Each input is tokenized once, when its
request is planned (:mod:`longembed.serving.overflow`); the batcher queues those token ids.

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
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
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
from longembed.inputs import TokenizedInput
from longembed.serving.batcher import DynamicBatcher, QueueFull, RequestTooLarge, ShuttingDown
from longembed.serving.choices import OVERFLOW_POLICIES
from longembed.serving.metrics import CONTENT_TYPE, ServerMetrics
from longembed.serving.overflow import InputTooLong, OverflowPlanner, PlannedInput
from longembed.serving.settings import MATRYOSHKA_DIMENSIONS, ServerSettings
from longembed.serving.validation import (
    ApiError,
    EmbedRequest,
    RequestValidator,
    openai_error,
    read_json,
    tei_error,
)

logger = logging.getLogger(__name__)

#: Host names a server on this machine answers to (besides the address it binds and ``allowed_hosts``).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
#: Seconds between checks that a waiting request's client is still connected.
DISCONNECT_POLL_SECONDS = 0.25


class ClientGone(Exception):
    """The client closed its connection before its answer was ready (nobody reads the response)."""


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
        self.validator = RequestValidator(self.encoder, s, self.dimensions)
        if s.max_batch_tokens < self.encoder.max_length:
            raise ValueError(
                f"max_batch_tokens={s.max_batch_tokens} is smaller than max_length={self.encoder.max_length}: "
                "the longest input would not fit in a batch"
            )

    def _encode(self, inputs: list[TokenizedInput], prompt: str, normalize: bool | None, budget: int) -> np.ndarray:
        """The batcher's encode function: the planned ids as they are (their prompt is in them already)."""
        return self.encoder.encode_tokenized(
            inputs, batch_size=len(inputs), normalize_embeddings=normalize, max_tokens_per_batch=budget
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

    async def embed(self, checked: EmbedRequest, route: str, request: Request | None = None) -> Embedded:
        """Plan (tokenize, count, cut or refuse), queue the ids, await the batch: the vectors in input order."""
        try:
            planned = await run_in_threadpool(self.planner.plan, checked.texts, checked.prefix, checked.overflow)
        except InputTooLong as exc:
            self.metrics.over_window.inc()
            self.metrics.refused.inc()
            raise ApiError(413, str(exc), "input", "context_length_exceeded") from None
        except ValueError as exc:  # a prompt longer than the window
            raise ApiError(400, str(exc), "input") from None
        try:
            future = self.batcher.submit(
                [p.tokens for p in planned], [p.n_tokens for p in planned], checked.prefix, checked.normalize
            )
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


def _folder_name(encoder: LongContextEncoder) -> str:
    return str(encoder.source.folder or encoder.source.name).rstrip("/").rsplit("/", 1)[-1]


def _truncation_headers(embedded: Embedded) -> dict[str, str]:
    return {"X-Longembed-Truncated": ",".join(map(str, embedded.truncated))} if embedded.truncated else {}


def openai_response(embedded: Embedded, checked: EmbedRequest, model_name: str) -> JSONResponse:
    """OpenAI's embeddings list (float or base64 vectors, usage), with the indices of cut inputs."""
    vectors = shorten(embedded.vectors, checked.dimensions)
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": encode_base64(v) if checked.encoding == "base64" else v.astype(float).tolist(),
        }
        for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": embedded.n_tokens, "total_tokens": embedded.n_tokens}
    content = {"object": "list", "data": data, "model": model_name, "usage": usage}
    if embedded.truncated:
        content["truncated"] = embedded.truncated
    return JSONResponse(content, headers=_truncation_headers(embedded))


def tei_response(embedded: Embedded, checked: EmbedRequest) -> JSONResponse:
    """TEI's list of vectors (cut to ``dimensions``, renormalized when normalized)."""
    vectors, dimensions = embedded.vectors, checked.dimensions
    if checked.normalize:
        vectors = shorten(vectors, dimensions)
    elif dimensions is not None:
        vectors = vectors[:, :dimensions]
    return JSONResponse(vectors.astype(float).tolist(), headers=_truncation_headers(embedded))


async def respond(
    service: EmbeddingService, route: str, call: Callable[[], Awaitable[Response]],
    shape: Callable[[ApiError], JSONResponse], request: Request,
) -> Response:
    """``call``'s response, or its error in the route's ``shape``; every answer is counted and timed."""
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
    service.metrics.requests.labels(route, str(response.status_code)).inc()
    service.metrics.latency.labels(route).observe(time.perf_counter() - start)
    return response


def _add_middleware(app: FastAPI, settings: ServerSettings, bound_host: str | None) -> None:
    """Allowed ``Host`` headers (against DNS rebinding) and, when configured, CORS origins."""
    hosts = [*LOOPBACK_HOSTS, *([bound_host] if bound_host else []), *settings.allowed_hosts]
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])


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
    _add_middleware(app, s, bound_host)

    @app.post("/v1/embeddings")
    async def openai_embeddings(request: Request) -> Response:
        async def handle() -> Response:
            checked = service.validator.openai_request(await read_json(request, s.max_body_bytes))
            embedded = await service.embed(checked, "openai", request)
            return openai_response(embedded, checked, service.model_name)

        return await respond(service, "openai", handle, openai_error, request)

    @app.post("/embed")
    async def tei_embed(request: Request) -> Response:
        async def handle() -> Response:
            checked = service.validator.tei_request(await read_json(request, s.max_body_bytes))
            return tei_response(await service.embed(checked, "tei", request), checked)

        return await respond(service, "tei", handle, tei_error, request)

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
