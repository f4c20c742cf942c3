"""What a runner may ask of an encoder: the :class:`Encoder` protocol, and the retrieval prompts.

The benchmark runner, the TempScale sweep, the collapse measurement, the cost estimate, the cache's
provenance and the mteb / LangChain adapters all take an ``Encoder``.  :class:`~longembed.encoder.
LongContextEncoder` meets it, and so does the caching wrapper :class:`~longembed.evaluation.
cached_encoder.CachedEncoder` (which delegates to the encoder it wraps); a test fake meets it by
declaring the same members.  In the manner of mteb's ``EncoderProtocol``: a structural type, checked
with ``isinstance(obj, Encoder)`` where an error message helps, never probed attribute by attribute.

Which model prompt a query or a document gets is decided once, in :func:`retrieval_prompts`: the
prompt named "query" for queries, "document" (else "passage", as E5 names it, else "corpus") for documents, "" where
the model has none.  ``longembed eval``, the server and the adapters make the same choice, so their
scores are comparable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from longembed.config import EncoderConfig
from longembed.errors import UserTypeError

if TYPE_CHECKING:
    from longembed.loading import ModelSource

#: The model prompts each retrieval role takes, first found wins (sentence-transformers' order in
#: ``encode_query`` / ``encode_document``).
RETRIEVAL_PROMPT_NAMES: dict[str, tuple[str, ...]] = {
    "query": ("query",),
    "document": ("document", "passage", "corpus"),
}


def role_prompt_name(prompts: Mapping[str, str], role: str) -> str | None:
    """The name of the model prompt a ``role`` ("query" or "document") takes, None if the model has none."""
    return next((name for name in RETRIEVAL_PROMPT_NAMES[role] if name in prompts), None)


def retrieval_prompts(prompts: Mapping[str, str]) -> dict[str, str]:
    """``{"query": ..., "document": ...}`` from a model's named prompts (see the module docstring)."""
    chosen: dict[str, str] = {}
    for role in RETRIEVAL_PROMPT_NAMES:
        name = role_prompt_name(prompts, role)
        chosen[role] = "" if name is None else prompts[name]
    return chosen


@runtime_checkable
class Encoder(Protocol):
    """An encoder as the runners use it (every member is read, none is optional).

    config:          the :class:`EncoderConfig` it was built from (recorded in results and cache keys;
                     its ``temperature`` is the encoder's own TempScale tau).
    tokenizer:       a Hugging Face tokenizer (token counts for estimates and collapse buckets), or
                     None for a model without one (counts then fall back to words / 0.75).
    prompts:         the model's named prompts ("query", "document", ...).
    source:          where the model was loaded from (identifies a hub model's files for the cache),
                     or None when ``config.model`` is the model folder itself.
    device:          the torch device (or its name) it runs on.
    method, position_scheme, max_length, original_length, pooling, normalize: what the encoder made
                     of its config (the method, the detected scheme, Lt, Lo, pooling, unit vectors):
                     recorded in results and cache keys, and what the cost estimate times.
    """

    config: EncoderConfig
    tokenizer: Any
    prompts: dict[str, str]
    source: ModelSource | None
    device: Any
    method: str
    position_scheme: str
    max_length: int
    original_length: int
    pooling: str
    normalize: bool

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        prompt: str | None = None,
        temperature: float | None = None,
    ) -> np.ndarray:
        """(len(texts), dim) float32 vectors in input order."""
        ...

    def encode_chunks(
        self, texts: Sequence[str], chunking: Any = "tokens:256", late: bool = True, **options: Any
    ) -> list[tuple[np.ndarray, list[tuple[int, int]]]]:
        """Per text, one vector per chunk and the chunks' character spans."""
        ...

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None) -> str:
        """The prefix put before each text: ``prompt`` literally, or the model's prompt ``prompt_name``."""
        ...

    def retrieval_prompts(self) -> dict[str, str]:
        """The prefixes of queries and documents (:func:`retrieval_prompts` of its prompts)."""
        ...


def check_encoder(encoder: Any) -> Encoder:
    """``encoder`` itself if it meets :class:`Encoder`, else a TypeError naming what it lacks."""
    if isinstance(encoder, Encoder):
        return encoder
    members = [name for name in ENCODER_MEMBERS if not hasattr(encoder, name)]
    raise UserTypeError(f"{type(encoder).__name__} is not an Encoder: it has no {', '.join(sorted(members))}")


#: The members of :class:`Encoder`, for error messages.
ENCODER_MEMBERS = (*Encoder.__annotations__, "encode", "encode_chunks", "resolve_prompt", "retrieval_prompts")
