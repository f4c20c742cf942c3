"""Response bodies: OpenAI's embeddings list and model list, TEI's vectors, chunk vectors with spans,
token states.

Inputs cut by the overflow policy are reported in the ``X-Longembed-Truncated`` header (their indices)
and, on the OpenAI route, in a ``truncated`` list in the body; a naive chunk that was cut says so with
``"truncated": true``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np
from fastapi.responses import JSONResponse

from longembed.chunking.tokens import TokenEmbeddings
from longembed.serving.chunks import ChunkVectors
from longembed.serving.overflow_planner import PlannedInput
from longembed.serving.service import Embedded
from longembed.serving.token_validation import ChunkRequest
from longembed.serving.validation import EmbedRequest


def shorten(vectors: np.ndarray, dimensions: int | None) -> np.ndarray:
    """The first ``dimensions`` components, renormalized to unit length (OpenAI's ``dimensions``)."""
    if dimensions is None:
        return vectors
    cut = vectors[:, :dimensions]
    return cut / np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)


def tei_sized(vectors: np.ndarray, dimensions: int | None, normalize: bool) -> np.ndarray:
    """TEI's ``dimensions``: cut, and renormalized when the vectors are normalized."""
    if normalize:
        return shorten(vectors, dimensions)
    return vectors if dimensions is None else vectors[:, :dimensions]


def encode_base64(vector: np.ndarray) -> str:
    """Little-endian float32 bytes in base64: what OpenAI's clients decode for encoding_format=base64."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def truncation_headers(truncated: Sequence[int]) -> dict[str, str]:
    return {"X-Longembed-Truncated": ",".join(map(str, truncated))} if truncated else {}


def openai_response(embedded: Embedded, checked: EmbedRequest, model_name: str) -> JSONResponse:
    """OpenAI's embeddings list (float or base64 vectors, usage), with the indices of cut inputs.
    ``usage`` counts the tokens the model ran: under late chunking the document's, once."""
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
    return JSONResponse(content, headers=truncation_headers(embedded.truncated))


#: ``owned_by`` of the served model in ``/v1/models`` (OpenAI names the owning organisation; vLLM says "vllm").
OWNED_BY = "longembed"


def model_object(name: str, created: int) -> dict[str, object]:
    """One model as OpenAI's ``/v1/models`` describes it: id, object, created (Unix seconds), owned_by."""
    return {"id": name, "object": "model", "created": created, "owned_by": OWNED_BY}


def models_response(name: str, created: int) -> JSONResponse:
    """OpenAI's ``GET /v1/models``: the one model this server serves, in a list."""
    return JSONResponse({"object": "list", "data": [model_object(name, created)]})


def tei_response(embedded: Embedded, checked: EmbedRequest) -> JSONResponse:
    """TEI's list of vectors (cut to ``dimensions``, renormalized when normalized)."""
    vectors = tei_sized(embedded.vectors, checked.dimensions, bool(checked.normalize))
    return JSONResponse(vectors.astype(float).tolist(), headers=truncation_headers(embedded.truncated))


def chunks_response(result: ChunkVectors, checked: ChunkRequest) -> JSONResponse:
    """Per input, its chunks: ``{"vector", "start", "end"}`` (``text[start:end]`` is the chunk), and
    ``"truncated": true`` on a naive chunk the overflow policy cut."""
    body = []
    for vectors, spans, cut in zip(result.vectors, result.spans, result.truncated, strict=True):
        sized = tei_sized(vectors, checked.dimensions, checked.normalize)
        chunks = [{"vector": v.astype(float).tolist(), "start": a, "end": b} for v, (a, b) in zip(sized, spans, strict=True)]
        for j in cut:
            chunks[j]["truncated"] = True
        body.append(chunks)
    return JSONResponse(body, headers=truncation_headers([i for i, cut in enumerate(result.truncated) if cut]))


def token_states_response(states: Sequence[TokenEmbeddings], planned: Sequence[PlannedInput]) -> JSONResponse:
    """TEI's ``/embed_all``: per input, one vector per token (special and prompt tokens included)."""
    body = [t.embeddings.astype(float).tolist() for t in states]
    return JSONResponse(body, headers=truncation_headers([i for i, p in enumerate(planned) if p.truncated]))
