"""What a runner may ask of an encoder: the :class:`Encoder` protocol, its :class:`EncoderMetadata`, and
the retrieval prompts.

In the manner of mteb's ``EncoderProtocol``: an encoder is anything with ``encode`` (optionally
``encode_chunks``), plus one metadata object that identifies it for results and cache keys
(:class:`EncoderMetadata`; :func:`encoder_metadata` describes an encoder that has none: a plain
sentence-transformers model by its folder, any other object by its class).  The benchmark runner,
the TempScale sweep, the collapse measurement, the cost estimate and the cache's provenance read the
metadata, never the encoder attribute by attribute.  A model that scores without vectors (BM25) is
a :class:`TextScorer`.

Which model prompt a query or a document gets is decided once, in :func:`retrieval_prompts`: the
prompt named "query" for queries, "document" (else "passage", as E5 names it, else "corpus") for documents, "" where
the model has none.  ``longembed eval``, the server and the adapters make the same choice, so their
scores are comparable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from longembed.config import EncoderConfig
from longembed.errors import UserError, UserTypeError

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


def resolve_prompt(prompts: Mapping[str, str], prompt: str | None = None, prompt_name: str | None = None) -> str:
    """The prefix put before each text: ``prompt`` literally, or the model's prompt named ``prompt_name``
    (one of ``prompts``); "" for neither.

    Raises:
        UserError: both are given, or ``prompt_name`` is not one of ``prompts``.
    """
    if prompt is not None and prompt_name is not None:
        raise UserError("pass either prompt or prompt_name, not both")
    if prompt_name is None:
        return prompt or ""
    if prompt_name not in prompts:
        known = ", ".join(repr(k) for k in prompts) or "none"
        raise UserError(f"unknown prompt_name {prompt_name!r}; this model's prompts: {known} (or pass prompt=)")
    return prompts[prompt_name]


def retrieval_prompts(prompts: Mapping[str, str]) -> dict[str, str]:
    """``{"query": ..., "document": ...}`` from a model's named prompts (see the module docstring)."""
    chosen: dict[str, str] = {}
    for role in RETRIEVAL_PROMPT_NAMES:
        name = role_prompt_name(prompts, role)
        chosen[role] = "" if name is None else prompts[name]
    return chosen


@runtime_checkable
class Encoder(Protocol):
    """An encoder as the runners use it: anything with ``encode`` (mteb's protocol, in the small).

    ``encode(texts, **options)`` returns (len(texts), dim) vectors in input order.  The runners pass
    ``batch_size``, ``prompt``, ``normalize_embeddings``, ``show_progress_bar`` (and ``temperature``)
    only where ``encode`` takes them; a prompt it cannot take is put before each text.

    Optional:

    - ``encode_chunks(texts, chunking, late=..., **options)``: per text, ``(vectors, spans)`` (needed
      only for ``granularity="chunks"``; :class:`ChunkEncoder`);
    - ``metadata``: an :class:`EncoderMetadata`, what identifies the encoder in results and cache keys.
      Without one it is described by :func:`encoder_metadata` (a sentence-transformers model by its
      folder, any other object by its class).

    A :class:`~longembed.encoder.LongContextEncoder`, the caching wrapper, a plain
    sentence-transformers ``SentenceTransformer`` and a one-method object all meet it.
    """

    def encode(self, texts: Sequence[str], **options: Any) -> np.ndarray:
        """(len(texts), dim) vectors in input order."""
        ...


@runtime_checkable
class ChunkEncoder(Encoder, Protocol):
    """An :class:`Encoder` that also embeds chunks of texts (late or naive chunking)."""

    def encode_chunks(
        self, texts: Sequence[str], chunking: Any = "tokens:256", late: bool = True, **options: Any
    ) -> list[tuple[np.ndarray, list[tuple[int, int]]]]:
        """Per text, one vector per chunk and the chunks' character spans."""
        ...


@runtime_checkable
class TextScorer(Protocol):
    """A model that scores queries against documents without vectors (BM25): ``score`` gives the
    (queries x documents) scores, ``metadata`` what a run records of it."""

    metadata: ScorerMetadata

    def score(self, queries: Sequence[str], corpus: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class ScorerMetadata:
    """What a run records of a :class:`TextScorer`: its settings (results' ``config.encoder``, whose
    ``model`` names it), its provenance (results' ``versions.model``), and the name messages use."""

    config: dict[str, Any]
    provenance: dict[str, Any]
    display_name: str = ""

    @property
    def name(self) -> str:
        """How messages name the model: ``display_name``, else ``config["model"]``."""
        return self.display_name or str(self.config.get("model", "the model"))


@dataclass
class EncoderMetadata:
    """Who an encoder is: recorded in results (``config.encoder``, ``config.resolved``, provenance) and
    the embedding cache's key (:func:`~longembed.evaluation.provenance.cache_fingerprint`).

    config:          the :class:`EncoderConfig` it was built from; its ``model`` names the model (a
                     folder, whose files then identify it for the cache; else the cache is off).
    tokenizer:       a Hugging Face tokenizer (token counts), or None (counts: words / 0.75).
    prompts:         the model's named prompts ("query", "document", ...).
    source:          where a longembed model was loaded from (a hub model's files), else None.
    device:          the device (or its name) it runs on.
    method, position_scheme, max_length, original_length, pooling, normalize: what the encoder made of
                     its config (the method, the position scheme, Lt, Lo, pooling, unit vectors);
                     None where unknown (an encoder longembed did not build).
    """

    config: EncoderConfig
    tokenizer: Any = None
    prompts: dict[str, str] = field(default_factory=dict)
    source: ModelSource | None = None
    device: Any = "cpu"
    method: str | None = None
    position_scheme: str | None = None
    max_length: int | None = None
    original_length: int | None = None
    pooling: str | None = None
    normalize: bool | None = None

    def retrieval_prompts(self) -> dict[str, str]:
        """The prefixes of queries and documents (:func:`retrieval_prompts` of its prompts)."""
        return retrieval_prompts(self.prompts)

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None) -> str:
        """The prefix put before each text: ``prompt`` literally, or the model's prompt ``prompt_name``
        (:func:`resolve_prompt` of its prompts)."""
        return resolve_prompt(self.prompts, prompt, prompt_name)


#: Where a sentence-transformers model is recognised: the members its ``encode`` relies on.
SENTENCE_TRANSFORMERS_MEMBERS = ("encode", "tokenizer", "max_seq_length", "prompts", "modules")
#: The position scheme recorded for an encoder longembed did not build (its own, whatever it is).
OWN_SCHEME = "own"


def encoder_metadata(encoder: Any) -> EncoderMetadata:
    """The :class:`EncoderMetadata` of ``encoder``: its own ``metadata`` if it has one; else, for a
    sentence-transformers model, from its folder; else from its class (no model folder: such an encoder runs uncached).

    Raises:
        UserTypeError: ``encoder`` has no ``encode``.
    """
    if not callable(getattr(encoder, "encode", None)):
        raise UserTypeError(f"{type(encoder).__name__} is not an Encoder: it has no encode() method")
    metadata = getattr(encoder, "metadata", None)
    if isinstance(metadata, EncoderMetadata):
        return metadata
    if all(hasattr(encoder, name) for name in SENTENCE_TRANSFORMERS_MEMBERS):
        return sentence_transformers_metadata(encoder)
    name = f"{type(encoder).__module__}.{type(encoder).__qualname__}"
    return EncoderMetadata(config=EncoderConfig(model=name), device=getattr(encoder, "device", "cpu"))


def sentence_transformers_metadata(model: Any) -> EncoderMetadata:
    """A sentence-transformers model described by its folder (which then keys the cache), its max_seq_length
    (Lt = Lo: it truncates), its pooling and Normalize modules and its non-empty prompts (sentence-
    transformers >= 6 adds empty "query" / "document" ones, which would hide E5's "passage")."""
    folder = _model_folder(model)
    modules = [type(m).__name__ for m in model.modules()] if callable(getattr(model, "modules", None)) else []
    pooling_modes = [m for m in model if type(m).__name__ == "Pooling"] if hasattr(model, "__iter__") else []
    pooling = None
    if pooling_modes:
        pooling = getattr(pooling_modes[0], "pooling_mode", None) or _pooling_name(pooling_modes[0])
    length = int(model.max_seq_length) if model.max_seq_length else None
    return EncoderMetadata(
        config=EncoderConfig(model=folder or type(model).__name__),
        tokenizer=model.tokenizer,
        prompts={k: v for k, v in (model.prompts or {}).items() if v},
        device=getattr(model, "device", "cpu"),
        method="truncate",
        position_scheme=OWN_SCHEME,
        max_length=length,
        original_length=length,
        pooling=pooling,
        normalize="Normalize" in modules,
    )


def _model_folder(model: Any) -> str | None:
    """The local folder a sentence-transformers model was loaded from, if it was loaded from one."""
    for module in model:
        auto = getattr(module, "auto_model", None) or getattr(module, "model", None)
        path = getattr(getattr(auto, "config", None), "_name_or_path", None)
        if path and Path(path).is_dir():
            return str(Path(path).resolve())
    return None


def _pooling_name(pooling: Any) -> str | None:
    """The pooling mode of an older sentence-transformers Pooling module (its get_pooling_mode_str)."""
    describe = getattr(pooling, "get_pooling_mode_str", None)
    return describe() if callable(describe) else None


def check_encoder(encoder: Any) -> Encoder:
    """``encoder`` itself if it has ``encode`` (:class:`Encoder`), else a TypeError saying so."""
    encoder_metadata(encoder)
    return encoder
