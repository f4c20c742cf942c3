"""The service behind the routes: one encoder, its request checks, overflow planner, batcher and metrics.

Every route's work goes the same way: plan (tokenize once, count, cut or refuse: :meth:`EmbeddingService.
plan`), queue the ids and await them (:meth:`EmbeddingService.run`: the batcher's refusals become 413,
429 or 503), count what ran (:meth:`EmbeddingService.count`).  Vectors come from the batcher's
``"vectors"`` work (``encoder.runner.encode_tokenized``), token states (late chunking, ``/embed_all``) from
its ``"states"`` work (``encoder.runner.token_states`` on windows planned by :mod:`longembed.serving.chunks`).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from fastapi import Request
from starlette.concurrency import run_in_threadpool

from longembed.encoder import LongContextEncoder
from longembed.errors import UserError
from longembed.inputs import OverflowPolicy, TokenizedInput
from longembed.model_runner import RunOptions
from longembed.serving.batcher import (
    DynamicBatcher,
    QueueFull,
    QueueTimeout,
    Refused,
    RequestTooLarge,
    ShuttingDown,
)
from longembed.serving.metrics import ServerMetrics
from longembed.serving.overflow_planner import InputTooLong, OverflowPlanner, PlannedInput, TooManyTokens
from longembed.serving.settings import MATRYOSHKA_DIMENSIONS, OVERFLOW_POLICIES, ServerSettings
from longembed.serving.throughput import retry_after_seconds
from longembed.serving.validation import ApiError, EmbedRequest, RequestValidator

#: Seconds between checks that a waiting request's client is still connected (and within its limit).
DISCONNECT_POLL_SECONDS = 0.25
#: The request header that lowers the server's --queue-seconds for one request.
QUEUE_SECONDS_HEADER = "X-Longembed-Queue-Seconds"

T = TypeVar("T")


class RetryLater(ApiError):
    """A refusal the client may retry: answered with a ``Retry-After`` header (whole seconds, at
    least 1; 1 when nothing has been measured yet to estimate it)."""

    def __init__(self, status: int, refused: Refused, code: str, param: str | None = None):
        super().__init__(status, str(refused), param, code)
        self.retry_after = retry_after_seconds(refused.retry_after or 0.0)


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
        self.model_name = s.served_model_name or folder_name(self.encoder)
        self.created = int(time.time())  # the model's "created" in /v1/models: when this server loaded it
        self.planner = OverflowPlanner(self.encoder)
        self.metrics = ServerMetrics()
        self.batcher = DynamicBatcher(
            self._encode,
            max_batch_tokens=s.max_batch_tokens,
            max_queue_tokens=s.max_queue_tokens or 32 * s.max_batch_tokens,
            on_batch=self.metrics.record_batch,
            encode_states=self._states,
            scheduler=s.scheduler,
            sub_batch_tokens=s.sub_batch_tokens,
            max_queue_seconds=s.queue_seconds or None,
        )
        self.dimensions = s.dimensions or MATRYOSHKA_DIMENSIONS.get(folder_name(self.encoder), ())
        self.validator = RequestValidator(self.encoder, s, self.dimensions)
        if s.max_batch_tokens < self.encoder.max_length:
            raise UserError(
                f"max_batch_tokens={s.max_batch_tokens} is smaller than max_length={self.encoder.max_length}: "
                "the longest input would not fit in a batch"
            )

    def _encode(self, inputs: list[TokenizedInput], prompt: str, normalize: bool | None, budget: int) -> np.ndarray:
        """The batcher's encode function: the planned ids as they are (their prompt is in them already)."""
        vectors, _ = self.encoder.runner.encode_tokenized(
            inputs, RunOptions(batch_size=max(len(inputs), 1), max_tokens_per_batch=budget), normalize
        )
        return vectors

    def _states(self, sequences: list[list[int]], budget: int) -> list[np.ndarray]:
        """The batcher's states function: last-layer token states of planned model inputs (windows)."""
        options = RunOptions(batch_size=max(len(sequences), 1), max_tokens_per_batch=budget)
        return self.encoder.runner.token_states(sequences, options)

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
            "late_chunking": e.pooling == "mean",
            "max_batch_tokens": s.max_batch_tokens,
            "max_queue_tokens": self.batcher.max_queue_tokens,
            "scheduler": s.scheduler,
            "sub_batch_tokens": s.sub_batch_tokens,
            "queue_seconds": s.queue_seconds or None,
            "max_client_batch_size": s.max_client_batch_size,
            "max_body_bytes": s.max_body_bytes,
            "max_document_tokens": s.max_document_tokens,
            "max_chunks_per_request": s.max_chunks_per_request,
            "max_token_vectors": s.max_token_vectors,
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
        planned = await self.plan(checked.texts, checked.prefix, checked.overflow, field=checked.field)
        vectors = await self.run([p.tokens for p in planned], [p.n_tokens for p in planned], request,
                                 checked.prefix, checked.normalize)
        self.count(route, planned)
        return Embedded(vectors, planned)

    async def plan(
        self, texts: Sequence[str], prefix: str, policy: OverflowPolicy, labels: Sequence[str] | None = None,
        field: str = "input",
    ) -> list[PlannedInput]:
        """The texts planned under ``policy`` (:meth:`OverflowPlanner.plan`); a refused input is a 413
        (named by ``labels``, default ``field[i]``), a prompt longer than the window a 400."""
        labels = [f"{field}[{i}]" for i in range(len(texts))] if labels is None else labels
        budget = self.batcher.max_queue_tokens  # more can never be queued (the batcher's 413): stop counting there
        try:
            return await run_in_threadpool(self.planner.plan, texts, prefix, policy, labels, budget)
        except TooManyTokens as exc:
            raise ApiError(413, f"'{field}': {exc}", field, "request_too_large") from None
        except InputTooLong as exc:
            self.metrics.over_window.inc()
            self.metrics.refused.inc()
            raise ApiError(413, str(exc), field, "context_length_exceeded") from None
        except ValueError as exc:  # a prompt longer than the window
            raise ApiError(400, f"'prompt_name': {exc}", "prompt_name") from None

    async def run(
        self, inputs: Sequence[Any], token_counts: Sequence[int], request: Request | None, prefix: str = "",
        normalize: bool | None = None, kind: str = "vectors", alone: bool = False,
    ) -> Any:
        """Queue ``inputs`` (the batcher's ``kind`` of work; ``alone``: in model calls of their own) and
        await their results; the batcher's refusals as 413 (larger than the whole queue), 429 (queue
        full, or the wait would pass the request's limit) or 503 (waited its whole limit, shutting
        down), the last two with Retry-After."""
        limit = queue_seconds(request)
        try:
            future = self.batcher.submit(inputs, token_counts, prefix, normalize, kind, queue_seconds=limit,
                                         alone=alone)
        except RequestTooLarge as exc:
            raise ApiError(413, str(exc), "input", "request_too_large") from None
        except QueueFull as exc:
            raise RetryLater(429, exc, "queue_full") from None
        except ShuttingDown as exc:
            raise RetryLater(503, exc, "shutting_down") from None
        self.metrics.queue_tokens.set(self.batcher.queued_tokens)
        self.metrics.queue_inputs.set(self.batcher.queued_inputs)
        try:
            return await self.wait(future, request)
        except QueueTimeout as exc:
            raise RetryLater(503, exc, "queue_timeout") from None
        except ShuttingDown as exc:
            raise RetryLater(503, exc, "shutting_down") from None

    def count(self, route: str, inputs: Sequence[PlannedInput]) -> None:
        """Count embedded inputs and their tokens under ``route``, and those over Lo or cut."""
        lo = self.encoder.original_length
        self.metrics.over_window.inc(sum(p.original_tokens > lo for p in inputs))
        self.metrics.truncated.inc(sum(p.truncated for p in inputs))
        self.metrics.inputs.labels(route).inc(len(inputs))
        self.metrics.tokens.labels(route).inc(sum(p.n_tokens for p in inputs))

    async def until_shutdown_deadline(self, work: Awaitable[T]) -> T:
        """``work``'s result, or, if the shutdown deadline passes first (the request is still reading
        its body, tokenizing or assembling its answer), a 503 with Retry-After at once.  Without it
        uvicorn cancels such a request when its graceful timeout ends, and the client gets a bare
        500 with a traceback in the log.  The abandoned work is cancelled; a thread it runs in ends
        on its own (its result is dropped)."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_SECONDS)
                if done:
                    return task.result()
                if self.batcher.past_deadline:
                    raise shutdown_refusal()
        finally:
            if not task.done():
                task.cancel()
                task.add_done_callback(_drop_result)

    async def wait(self, future: Any, request: Request | None) -> Any:
        """The future's result; if the client disconnects first, its queued inputs are cancelled; a
        request still waiting for the model past its limit fails (QueueTimeout)."""
        waiting = asyncio.wrap_future(future)
        while request is not None:
            done, _ = await asyncio.wait({waiting}, timeout=DISCONNECT_POLL_SECONDS)
            if done:
                break
            self.batcher.check_deadline(future)
            if await request.is_disconnected():
                self.batcher.cancel(future)
                waiting.cancel()
                raise ClientGone()
        return await waiting


def shutdown_refusal() -> RetryLater:
    """The 503 of a request the server has no time left for (its shutdown deadline passed)."""
    error = ShuttingDown("the server shut down (--shutdown-seconds) before this request was finished")
    return RetryLater(503, error, "shutting_down")


def _drop_result(task: asyncio.Future) -> None:
    """Retrieve an abandoned task's outcome (asyncio would log an exception nobody retrieved)."""
    if not task.cancelled():
        task.exception()


def queue_seconds(request: Request | None) -> float | None:
    """The request's own limit on its wait (the ``X-Longembed-Queue-Seconds`` header), or None; a
    value that is not a positive number is a 400 naming the header."""
    value = None if request is None else request.headers.get(QUEUE_SECONDS_HEADER)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise ApiError(400, f"header {QUEUE_SECONDS_HEADER} must be a positive number of seconds, got {value!r}",
                       QUEUE_SECONDS_HEADER)
    return seconds


def folder_name(encoder: LongContextEncoder) -> str:
    """The model's folder (or hub) name: the served model name unless the operator gives one."""
    return str(encoder.source.folder or encoder.source.name).rstrip("/").rsplit("/", 1)[-1]
