"""The HTTP server's routes: OpenAI's ``/v1/embeddings`` and ``/v1/models``, TEI's ``/embed``,
``/embed_all`` and ``/tokenize``, longembed's ``/embed_chunks``, and ``/health``, ``/info``, ``/metrics``.

Every input reaches the model or the client gets a 4xx naming the problem: nothing is dropped, cut
without being reported, or answered with a 500 because of what the client sent.  Requests are checked
by :mod:`longembed.serving.validation` and :mod:`longembed.serving.token_validation` (each route
answers in its own error shape, OpenAI's or TEI's; a field a route does not read is a 400 naming it);
the work is :mod:`longembed.serving.service` (plan, queue, count) and :mod:`longembed.serving.chunks`
(late and naive chunks, token states, token lists); the bodies are :mod:`longembed.serving.responses`.
Each input is tokenized once, when its request is planned (:mod:`longembed.serving.overflow_planner`); the
batcher queues those token ids.

Extra request fields (the OpenAI client sends them with ``extra_body``): ``overflow`` (extend /
truncate / error, see :mod:`longembed.serving.overflow_planner`), ``prompt_name`` ("query", "document",
... from the model's prompts) and ``late_chunking`` (Jina's convention: the ``input`` list is the
consecutive chunks of one document, joined with nothing between them, so each chunk's span is its
character range in the joined text; one vector per chunk from one pass over the document, and
``usage`` counts the document's tokens once).

Safety (a localhost server must not be drivable by any web page, nor fall over for one client):
POST bodies must be ``application/json`` (415 otherwise: a page cannot send that cross-origin without
a CORS preflight, which fails unless ``cors_origins`` allows it); ``Host`` must be this machine or an
allowed name (400, against DNS rebinding); with ``api_key`` every route but ``/health`` needs
``Authorization: Bearer <key>`` (401), the documentation (``/docs``, ``/redoc``, ``/openapi.json``) and
``/metrics`` included; a client that disconnects has its queued inputs cancelled and is
counted in ``longembed_client_disconnects`` (not as a 500); a server error answers 500 with an id
to find it in the log, never the exception's text.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import numpy as np
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect

from longembed.encoder import LongContextEncoder
from longembed.serving.chunks import ChunkWork
from longembed.serving.metrics import CONTENT_TYPE
from longembed.serving.responses import (
    chunks_response,
    model_object,
    models_response,
    openai_response,
    tei_response,
    token_states_response,
)
from longembed.serving.service import ClientGone, Embedded, EmbeddingService, shutdown_refusal
from longembed.serving.settings import ServerSettings
from longembed.serving.token_validation import (
    ChunkRequest,
    chunk_request,
    embed_all_request,
    tokenize_request,
)
from longembed.serving.validation import ApiError, EmbedRequest, openai_error, read_json, tei_error

logger = logging.getLogger(__name__)

#: Host names a server on this machine answers to (besides the address it binds and ``allowed_hosts``).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


async def embed_late_chunks(
    service: EmbeddingService, work: ChunkWork, checked: EmbedRequest, request: Request
) -> Embedded:
    """OpenAI's route with ``late_chunking``: the inputs joined (no separator) as one document, each
    input's character range a chunk; one vector per input, usage the document's tokens."""
    document = "".join(checked.texts)
    bounds = np.cumsum([0] + [len(t) for t in checked.texts]).tolist()
    spans = [(bounds[i], bounds[i + 1]) for i in range(len(checked.texts))]
    as_chunks = ChunkRequest([document], [spans], True, checked.prefix, False, checked.dimensions, checked.overflow)
    result = await work.chunks(as_chunks, "openai", request, normalize=checked.normalize,
                               labels=[f"input[0..{len(checked.texts) - 1}] joined (one document)"], name=input_name)
    return Embedded(result.vectors[0], result.inputs)


def input_name(_: int, j: int) -> tuple[str, str]:
    """Under ``late_chunking`` each chunk is one of the request's inputs: ``input[j]``."""
    return f"input[{j}]", "input"


async def respond(
    service: EmbeddingService, route: str, call: Callable[[], Awaitable[Response]],
    shape: Callable[[ApiError], JSONResponse], request: Request,
) -> Response:
    """``call``'s response, or its error in the route's ``shape``; every answer is counted and timed."""
    start = time.perf_counter()
    try:
        service.authorize(request)
        response = await service.until_shutdown_deadline(call())
    except ApiError as error:
        response = refusal(error, shape)
    except asyncio.CancelledError:  # uvicorn's graceful timeout ended first (the deadline is before it)
        if not service.batcher.closing:
            raise
        response = refusal(shutdown_refusal(), shape)
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


#: Statuses that tell a client to come back later: they always carry ``Retry-After``.
RETRY_STATUSES = (429, 503)


def refusal(error: ApiError, shape: Callable[[ApiError], JSONResponse]) -> JSONResponse:
    """``error`` in the route's ``shape``, with ``Retry-After`` when it is a refusal to retry later (a
    429 or 503 without an estimate of its own says 1 s, as :class:`~longembed.serving.service.RetryLater`
    does before anything is measured)."""
    response = shape(error)
    retry_after = getattr(error, "retry_after", None)
    if retry_after is None and error.status in RETRY_STATUSES:
        retry_after = 1
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.batcher.start()
        yield
        # finish the accepted inputs by the shutdown deadline (begun when uvicorn began its shutdown,
        # see longembed.serving.server; here, under a test client, now); what is left is answered 503
        await run_in_threadpool(service.batcher.close, service.settings.shutdown_seconds)

    # the documentation routes are FastAPI's, added here so that the API key guards them too
    app = FastAPI(title="longembed", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    _add_middleware(app, service.settings, bound_host)
    work = ChunkWork(service)
    _add_embedding_routes(app, service, work)
    _add_token_routes(app, service, work)
    _add_model_routes(app, service)
    _add_status_routes(app, service)
    _add_documentation_routes(app, service)
    return app


def _add_embedding_routes(app: FastAPI, service: EmbeddingService, work: ChunkWork) -> None:
    """``/v1/embeddings`` (OpenAI's, with late_chunking) and ``/embed`` (TEI's)."""
    limit = service.settings.max_body_bytes

    @app.post("/v1/embeddings")
    async def openai_embeddings(request: Request) -> Response:
        async def handle() -> Response:
            checked = service.validator.openai_request(await read_json(request, limit))
            if checked.late_chunking:
                embedded = await embed_late_chunks(service, work, checked, request)
            else:
                embedded = await service.embed(checked, "openai", request)
            return openai_response(embedded, checked, service.model_name)

        return await respond(service, "openai", handle, openai_error, request)

    @app.post("/embed")
    async def tei_embed(request: Request) -> Response:
        async def handle() -> Response:
            checked = service.validator.tei_request(await read_json(request, limit))
            return tei_response(await service.embed(checked, "tei", request), checked)

        return await respond(service, "tei", handle, tei_error, request)


def _add_token_routes(app: FastAPI, service: EmbeddingService, work: ChunkWork) -> None:
    """``/embed_chunks`` (chunk vectors with spans), ``/embed_all`` and ``/tokenize`` (TEI's), in TEI's
    error shape."""
    limit = service.settings.max_body_bytes

    @app.post("/embed_chunks")
    async def embed_chunks(request: Request) -> Response:
        async def handle() -> Response:
            checked = chunk_request(service.validator, await read_json(request, limit))
            return chunks_response(await work.chunks(checked, "embed_chunks", request, checked.normalize), checked)

        return await respond(service, "embed_chunks", handle, tei_error, request)

    @app.post("/embed_all")
    async def embed_all(request: Request) -> Response:
        async def handle() -> Response:
            checked = embed_all_request(service.validator, await read_json(request, limit))
            return token_states_response(*await work.embed_all(checked, "embed_all", request))

        return await respond(service, "embed_all", handle, tei_error, request)

    @app.post("/tokenize")
    async def tokenize(request: Request) -> Response:
        async def handle() -> Response:
            checked = tokenize_request(service.validator, await read_json(request, limit))
            return JSONResponse(await work.tokenize(checked))

        return await respond(service, "tokenize", handle, tei_error, request)


def _add_model_routes(app: FastAPI, service: EmbeddingService) -> None:
    """OpenAI's ``GET /v1/models`` and ``GET /v1/models/{id}`` (behind the API key, as OpenAI's are):
    the served model, so that clients which list models first (LangChain, LiteLLM, openai's
    ``models.list()``) find it; another id is a 404 ``model_not_found``, in OpenAI's shape."""

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        async def handle() -> Response:
            return models_response(service.model_name, service.created)

        return await respond(service, "models", handle, openai_error, request)

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str, request: Request) -> Response:
        async def handle() -> Response:
            if model_id != service.model_name:
                raise ApiError(404, f"the model {model_id!r} does not exist: this server serves "
                               f"{service.model_name!r}", "model", "model_not_found")
            return JSONResponse(model_object(service.model_name, service.created))

        return await respond(service, "models", handle, openai_error, request)


def _add_status_routes(app: FastAPI, service: EmbeddingService) -> None:
    """``/health`` (open to all), ``/info`` and ``/metrics`` (behind the API key when there is one)."""

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


def _add_documentation_routes(app: FastAPI, service: EmbeddingService) -> None:
    """``/openapi.json``, ``/docs`` (Swagger UI) and ``/redoc``, behind the API key when there is one.

    With a key, a browser's page cannot fetch the schema (it sends no key): read ``/openapi.json`` with
    the key (``curl -H "Authorization: Bearer $KEY"``); without one the pages work as FastAPI's do.
    """

    def guarded(page: Callable[[], Response]) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            try:
                service.authorize(request)
            except ApiError as error:
                return openai_error(error)
            return page()

        return route

    schema = "/openapi.json"
    app.add_api_route(schema, guarded(lambda: JSONResponse(app.openapi())), include_in_schema=False)
    app.add_api_route("/docs", guarded(lambda: get_swagger_ui_html(openapi_url=schema, title="longembed - docs")),
                      include_in_schema=False)
    app.add_api_route("/redoc", guarded(lambda: get_redoc_html(openapi_url=schema, title="longembed - ReDoc")),
                      include_in_schema=False)
