"""The work behind the chunk and token routes: late chunking, naive chunks, token states, token lists.

Late chunking (``/embed_chunks`` with ``late``; ``late_chunking`` on ``/v1/embeddings``) is
``LongContextEncoder.encode_chunks(late=True)`` done by the server: each text is tokenized once and
whole (at most ``max_document_tokens`` tokens; nothing is cut), run as windows of the encoder's
``window_length`` sharing an eighth of a window (one window when it fits), put back together
(:func:`longembed.chunking.tokens.assemble_tokens`) and mean-pooled per chunk
(:mod:`longembed.chunking.late`).  Each window is one "states" item of the batcher, so the windows of
many requests share batches and the queue's token bound counts them.  Naive chunks (``late`` false) are
each chunk's text embedded as an input of its own, under the request's overflow policy, as
``encode_chunks(late=False)`` does.  ``/embed_all`` runs each planned input as ``encode_tokens`` does
(PCW: windows of Lo), and ``/tokenize`` lists the planner's tokens with their character offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from fastapi import Request
from starlette.concurrency import run_in_threadpool

from longembed.chunking.late import EmptyChunk, pool_token_states, span_token_indices
from longembed.chunking.spans import Chunking, SentenceChunking, Span, sentence_chunk_spans, token_chunk_spans
from longembed.chunking.tokens import (
    TokenEmbeddings,
    Window,
    assemble_tokens,
    plan_windows,
    token_offsets,
    window_inputs,
)
from longembed.inputs import OverflowPolicy, TokenizedInput, require_offsets
from longembed.serving.overflow_planner import PlannedInput, size_of
from longembed.serving.service import EmbeddingService
from longembed.serving.token_validation import ChunkRequest, TokenizeRequest
from longembed.serving.validation import ApiError, EmbedRequest


@dataclass
class ChunkVectors:
    """Per text, its chunk vectors (n_chunks, dim) and spans; ``inputs``: what the model ran (the
    documents, or each chunk for naive chunks), counted in ``usage`` and the metrics."""

    vectors: list[np.ndarray]
    spans: list[list[Span]]
    inputs: list[PlannedInput]
    truncated: list[list[int]]  # per text, its chunks cut by the overflow policy (naive chunks only)

    @property
    def n_tokens(self) -> int:
        return sum(p.n_tokens for p in self.inputs)


#: How a route names chunk ``j`` of text ``i`` in an error: (what the client sent, the field).
ChunkNamer = Callable[[int, int], tuple[str, str]]


def chunk_name(i: int, j: int) -> tuple[str, str]:
    """``/embed_chunks``' names: the text and the chunk's place in it."""
    return f"inputs[{i}], chunk {j}", "chunking"


class ChunkWork:
    """Chunk vectors, token states and token lists for one :class:`EmbeddingService`."""

    def __init__(self, service: EmbeddingService):
        self.service = service
        self.encoder = service.encoder
        self.planner = service.planner
        self.settings = service.settings

    # ------------------------------------------------------------------ chunks
    async def chunks(
        self, checked: ChunkRequest, route: str, request: Request | None, normalize: bool | None = None,
        labels: Sequence[str] | None = None, name: ChunkNamer = chunk_name,
    ) -> ChunkVectors:
        """Every text's chunk vectors (``normalize`` None: the model's own choice, else the request's).
        ``labels`` name the texts and ``name`` the chunks in errors (default: ``/embed_chunks``' fields)."""
        documents = await run_in_threadpool(self.documents, checked.texts, checked.prefix, labels)
        spans = checked.chunking if isinstance(checked.chunking, list) else await run_in_threadpool(
            self.spans, checked.texts, checked.chunking, documents, checked.prefix
        )
        self.service.validator.check_chunk_count(sum(len(s) for s in spans), "chunking")
        for i, text_spans in enumerate(spans):
            if not text_spans:  # token chunks of a text the tokenizer keeps nothing of: no vector to give
                raise ApiError(400, f"{labels[i] if labels else f'inputs[{i}]'} has no token of its own to chunk: "
                               "the tokenizer keeps none of its characters (zero-width or control characters "
                               "only)", "inputs")
        if checked.late:
            self.check_offsets(documents)
            pooled = await run_in_threadpool(chunk_indices, documents, spans, name)  # a 400 before the model runs
            result = await self.late(documents, spans, pooled, request)
        else:
            result = await self.naive(checked.texts, spans, checked.prefix, checked.overflow, request)
        norm = self.encoder.normalize if normalize is None else normalize
        if norm:
            result.vectors = [v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for v in result.vectors]
        self.service.count(route, result.inputs)
        return result

    def documents(self, texts: Sequence[str], prefix: str, labels: Sequence[str] | None = None) -> list[TokenizedInput]:
        """Each text tokenized whole with its prompt, in order; a 413 at the first past
        ``max_document_tokens`` (its length, or a bound: the texts after it are not tokenized)."""
        limit = self.settings.max_document_tokens
        documents = []
        for i, document in enumerate(self.planner.iter_up_to(texts, prefix, limit)):
            if not (document.complete and document.n_tokens <= limit):
                size = size_of(self.planner.counted(document, texts[i], prefix))
                raise ApiError(413, f"{labels[i] if labels else f'inputs[{i}]'} has {size}, more than the {limit} "
                               "this server chunks (max_document_tokens): split it", "input", "context_length_exceeded")
            documents.append(document)
        return documents

    def spans(
        self, texts: Sequence[str], rule: Chunking, documents: Sequence[TokenizedInput], prefix: str
    ) -> list[list[Span]]:
        """Each text's chunk spans under ``rule``, as ``encoder.chunk_spans`` finds them (token chunks from
        the text tokenized without a prompt: the documents themselves when there is none)."""
        if isinstance(rule, SentenceChunking):
            return [sentence_chunk_spans(text, rule.n) for text in texts]
        bare = documents if not prefix else self.planner.tokenize(texts, "")
        self.check_offsets(bare)
        return [token_chunk_spans(x.offsets or [], rule.size, rule.overlap) for x in bare]

    async def late(
        self, documents: list[TokenizedInput], spans: list[list[Span]], pooled: list[list[np.ndarray]],
        request: Request | None,
    ) -> ChunkVectors:
        """Late chunks: each document's token states (windows sharing an eighth of a window), pooled per
        span (``pooled``: each span's token indices, :func:`chunk_indices`)."""
        states = await self.token_states(documents, self.encoder.window_length // 8, request)
        vectors = await run_in_threadpool(pool_chunks, states, pooled)
        planned = [PlannedInput(d, d.text) for d in documents]
        return ChunkVectors(vectors, spans, planned, [[] for _ in documents])

    async def naive(
        self, texts: Sequence[str], spans: list[list[Span]], prefix: str, policy: OverflowPolicy,
        request: Request | None,
    ) -> ChunkVectors:
        """Naive chunks: each chunk's text an input of its own (prompt and special tokens added), under
        ``policy``; vectors not normalized yet (as ``encode_chunks`` normalizes after)."""
        pieces, labels = [], []
        for i, (text, text_spans) in enumerate(zip(texts, spans, strict=True)):
            for j, (start, end) in enumerate(text_spans):
                pieces.append(text[start:end])
                labels.append(f"inputs[{i}], chunk {j} (characters {start}..{end})")
        planned = await self.service.plan(pieces, prefix, policy, labels, "inputs")
        flat = await self.service.run([p.tokens for p in planned], [p.n_tokens for p in planned], request, prefix,
                                      False)
        bounds = np.cumsum([0] + [len(s) for s in spans])
        vectors = [flat[bounds[i] : bounds[i + 1]] for i in range(len(spans))]
        truncated = [[j for j in range(bounds[i + 1] - bounds[i]) if planned[bounds[i] + j].truncated]
                     for i in range(len(spans))]
        return ChunkVectors(vectors, spans, planned, truncated)

    # ------------------------------------------------------------------ token states
    async def embed_all(self, checked: EmbedRequest, route: str, request: Request | None) -> tuple[
        list[TokenEmbeddings], list[PlannedInput]
    ]:
        """``/embed_all``: each input planned under its policy, its token states as ``encode_tokens`` gives them."""
        planned = await self.service.plan(checked.texts, checked.prefix, checked.overflow, field=checked.field)
        total, limit = sum(p.n_tokens for p in planned), self.settings.max_token_vectors
        if total > limit:
            raise ApiError(413, f"'inputs' have {total} tokens; /embed_all returns at most {limit} token vectors "
                           "per request (max_token_vectors): send fewer or shorter texts", "inputs")
        self.check_offsets([p.tokens for p in planned])
        states = await self.token_states([p.tokens for p in planned], 0, request)
        self.service.count(route, planned)
        return states, planned

    async def token_states(
        self, inputs: Sequence[TokenizedInput], overlap: int, request: Request | None
    ) -> list[TokenEmbeddings]:
        """Each input's token states: its windows queued as "states" work, put back together."""
        plans = [self.windows(x, overlap) for x in inputs]
        sequences = [ids for x, plan in zip(inputs, plans, strict=True) for ids in window_inputs(x, plan)]
        states = await self.service.run(sequences, [len(s) for s in sequences], request, kind="states")
        return await run_in_threadpool(assemble_all, inputs, plans, states)

    def windows(self, tokens: TokenizedInput, overlap: int) -> list[Window]:
        """The windows one input runs as (one when it fits in ``window_length``)."""
        room = self.encoder.window_length - tokens.lead - tokens.tail
        try:
            return plan_windows(tokens.n_tokens - tokens.lead - tokens.tail, room, overlap)
        except ValueError as exc:  # the prompt and special tokens fill the window
            raise ApiError(400, f"'prompt_name': {exc}", "prompt_name") from None

    # ------------------------------------------------------------------ tokens
    async def tokenize(self, checked: TokenizeRequest) -> list[list[dict[str, Any]]]:
        """``/tokenize``: each input's tokens (at most ``max_document_tokens`` in all), as TEI lists them."""
        return await run_in_threadpool(self._tokenize, checked)

    def _tokenize(self, checked: TokenizeRequest) -> list[list[dict[str, Any]]]:
        """The inputs' tokens, in order; a 413 as soon as their running total passes the limit."""
        limit, inputs, total = self.settings.max_document_tokens, [], 0
        for i, x in enumerate(self.planner.iter_up_to(checked.texts, checked.prefix, limit, checked.add_special_tokens)):
            total += x.n_tokens
            if total > limit or not x.complete:
                size = f"{total} tokens" if x.complete else f"at least {total - 1} tokens"
                upto = f"inputs[0..{i}] have" if i else "inputs[0] has"
                raise ApiError(413, f"{upto} {size}; /tokenize lists at most {limit} per request "
                               "(max_document_tokens): send less text", "inputs")
            inputs.append(x)
        self.check_offsets(inputs)
        return [token_entries(x, self.planner.token_strings(x.ids)) for x in inputs]

    def check_offsets(self, inputs: Sequence[TokenizedInput]) -> None:
        """A 400 when the tokenizer gives no character offsets (a slow tokenizer)."""
        try:
            require_offsets(inputs, self.planner.tokenizer)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None


def assemble_all(
    inputs: Sequence[TokenizedInput], plans: Sequence[list[Window]], states: Sequence[np.ndarray]
) -> list[TokenEmbeddings]:
    """Each input's token states from its windows' states (``states``: every window, in input order)."""
    out, k = [], 0
    for x, plan in zip(inputs, plans, strict=True):
        out.append(assemble_tokens(x, plan, states[k : k + len(plan)]))
        k += len(plan)
    return out


def chunk_indices(
    documents: Sequence[TokenizedInput], spans: Sequence[Sequence[Span]], name: ChunkNamer
) -> list[list[np.ndarray]]:
    """Each span's token indices (:func:`longembed.chunking.late.span_token_indices`), from the offsets
    alone: a span over no token (only characters the tokenizer drops, such as a zero-width space) is a
    400 naming it, before the model runs."""
    out = []
    for i, (document, text_spans) in enumerate(zip(documents, spans, strict=True)):
        try:
            out.append(span_token_indices(token_offsets(document), text_spans))
        except EmptyChunk as exc:
            start, end = text_spans[exc.index]
            label, param = name(i, exc.index)
            shown = document.text[start:end]
            shown = repr(shown if len(shown) <= 40 else shown[:40] + "...")
            raise ApiError(400, f"{label} (characters {start}..{end}, {shown}) has no token: the tokenizer keeps "
                           "none of its characters (zero-width or control characters only); join it to a "
                           "neighbour or leave it out", param) from None
    return out


def pool_chunks(states: Sequence[TokenEmbeddings], pooled: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """Each text's late chunk vectors: the mean token state of each span's tokens."""
    return [pool_token_states(tokens.embeddings, indices) for tokens, indices in zip(states, pooled, strict=True)]


def token_entries(tokens: TokenizedInput, strings: Sequence[str]) -> list[dict[str, Any]]:
    """TEI's token list of one input: ``id``, ``text``, ``special``, ``start``, ``stop``.

    ``start``/``stop`` are character offsets in the input text (``text[start:stop]``, Python's slicing:
    TEI gives UTF-8 byte offsets into prompt + text, the same for ASCII input without a prompt).  Special
    tokens (``special`` true) and the prompt's tokens (not part of the text) have null offsets and their
    token string as ``text``.
    """
    offsets = tokens.offsets or []
    out = []
    for k, (token_id, string) in enumerate(zip(tokens.ids, strings, strict=True)):
        special = k < tokens.head or k >= len(tokens.ids) - tokens.tail
        body = k - tokens.lead
        if special or body < 0:
            out.append({"id": token_id, "text": string, "special": special, "start": None, "stop": None})
        else:
            start, stop = offsets[body]
            out.append({"id": token_id, "text": tokens.text[start:stop], "special": False, "start": start,
                        "stop": stop})
    return out
