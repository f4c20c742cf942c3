"""LongContextEncoder: one encoder, every context-window extension method as a switch.

    >>> enc = load_encoder("nomic-embed-text-v1.5", method="selfextend", max_length=8192)
    >>> enc.encode_document(["a long text ..."], batch_size=4)  # the model's "document" prompt
    >>> enc.encode_query(["a question"])                          # its "query" prompt

The encoder is what a user calls (``encode``, ``encode_query``, ``encode_document``, ``encode_chunks``,
``encode_tokens``); how its model runs token ids under the extension method is its runner
(:class:`~longembed.model_runner.ModelRunner`, ``encoder.runner``), which the server, the contextual
trainer and the collapse study call directly.  The encoder loads an unmodified model and selects
longembed's attention function on that model instance only; everything is computed per document, so a
text's embedding does not depend on what else is in its batch, and inputs the method does not act on
(at most Lo tokens, by default) embed exactly as with the original model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, overload

import numpy as np
import torch

from longembed.chunking.late import late_chunk_vectors
from longembed.chunking.spans import (
    SentenceChunking,
    Span,
    TokenChunking,
    check_spans,
    parse_chunking,
    sentence_chunk_spans,
    token_chunk_spans,
)
from longembed.chunking.tokens import TokenEmbeddings
from longembed.config import DTYPE_AUTO, EncoderConfig
from longembed.encoder_protocol import EncoderMetadata, resolve_prompt, retrieval_prompts, role_prompt_name
from longembed.errors import UserError
from longembed.inputs import EncodeStats, TokenizedInput, check_texts, require_offsets
from longembed.loading import ModelSource, default_method, recorded_encoder, resolve_device, resolve_model
from longembed.model_runner import ModelRunner, RunOptions
from longembed.precision import resolve_dtype

__all__ = ["EncodeStats", "LongContextEncoder", "TokenEmbeddings", "load_encoder"]

#: encode()'s output_value choices (sentence-transformers' names).
OutputValue = Literal["sentence_embedding", "token_embeddings"]
OUTPUT_VALUES: tuple[str, ...] = get_args(OutputValue)
#: Chunk boundaries: a chunking string ("tokens:256", "sentences:4") or (start, end) spans per text.
ChunkingArgument = str | TokenChunking | SentenceChunking | Sequence[Sequence[Span]]


@dataclass(frozen=True)
class ChunkInputs:
    """Texts tokenized for :meth:`LongContextEncoder.encode_chunk_inputs`: each text's chunk ``spans``
    and the model ``inputs`` (late: one per text; naive: one per chunk)."""

    spans: list[list[Span]]
    inputs: list[TokenizedInput]
    late: bool

    @property
    def tokens(self) -> int:
        """The tokens the model will read (special and prompt tokens included; before any cut)."""
        return sum(len(x.ids) for x in self.inputs)


class LongContextEncoder:
    """Embeds texts of any length with a chosen context-window extension method.

    What a user calls: :meth:`encode` (sentence-transformers' signature), :meth:`encode_query` and
    :meth:`encode_document` (the model's retrieval prompts), :meth:`encode_chunks` (one vector per chunk,
    late or naive chunking) and :meth:`encode_tokens` (token states with their character offsets).
    ``runner`` is how the model runs token ids (:class:`~longembed.model_runner.ModelRunner`), for the
    server, the contextual trainer and the collapse study; ``prompts`` are the model's named prompts.
    """

    def __init__(self, config: EncoderConfig, device: str | torch.device | None = None, lazy: bool = False):
        """``lazy=True`` reads only the model's configuration and tokenizer now and its weights at the
        first forward: a run whose every vector is cached never loads them."""
        source = resolve_model(config.model)
        self.runner = ModelRunner(config, source, resolve_device(device), lazy=lazy)
        self.prompts: dict[str, str] = {**source.prompts, **config.prompts}

    # ------------------------------------------------------------------ who it is
    @property
    def config(self) -> EncoderConfig:
        """The :class:`~longembed.config.EncoderConfig` it was built from."""
        return self.runner.config

    @property
    def source(self) -> ModelSource:
        """Where the model was loaded from: its folder, files, pooling, prompts."""
        return self.runner.source

    @property
    def device(self) -> torch.device:
        return self.runner.device

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer."""
        return self.runner.tokenizer

    @property
    def method(self) -> str:
        """The context-window extension method ("truncate", "pcw", "pi", "selfextend", ...)."""
        return self.runner.method

    @property
    def position_scheme(self) -> str:
        """How the model encodes positions ("absolute", "rope", "alibi", ...)."""
        return self.runner.positions.name

    @property
    def original_length(self) -> int:
        """Lo: the longest input the model was trained on."""
        return self.runner.original_length

    @property
    def max_length(self) -> int:
        """Lt: the most tokens an input may have (longer ones are cut or refused, as ``on_overflow`` says)."""
        return self.runner.max_length

    @property
    def pooling(self) -> str:
        """How token states become a vector ("mean", "cls", "last")."""
        return self.runner.pooling

    @property
    def normalize(self) -> bool:
        """Whether the model folder asks for unit vectors (a Normalize module)."""
        return self.runner.normalize

    @property
    def embedding_dim(self) -> int:
        return self.runner.embedding_dim

    @property
    def window_length(self) -> int:
        """The longest single model input: Lo under PCW (its windows), else max_length."""
        return self.runner.window_length

    @property
    def model(self) -> torch.nn.Module:
        """The transformer, with longembed's attention function on this instance (loaded on first use)."""
        return self.runner.model

    @property
    def model_loaded(self) -> bool:
        """Whether the weights are loaded (a ``lazy`` encoder reads them at its first forward)."""
        return self.runner.model_loaded

    @property
    def metadata(self) -> EncoderMetadata:
        """Who this encoder is, for results and cache keys (:class:`~longembed.encoder_protocol.EncoderMetadata`)."""
        return EncoderMetadata(
            config=self.config, tokenizer=self.tokenizer, prompts=self.prompts, source=self.source,
            device=self.device, method=self.method, position_scheme=self.position_scheme,
            max_length=self.max_length, original_length=self.original_length, pooling=self.pooling,
            normalize=self.normalize,
        )

    def retrieval_prompts(self) -> dict[str, str]:
        """The prefixes of queries and documents: the model's "query" and "document" (else "passage")
        prompts, "" where it has none (:func:`longembed.encoder_protocol.retrieval_prompts`)."""
        return retrieval_prompts(self.prompts)

    # ------------------------------------------------------------------ embedding texts
    # One overload per return shape, as sentence-transformers declares its encode: a str gives one array,
    # token embeddings of a list give a list of arrays, return_stats=True adds this call's EncodeStats.  A
    # str is also a Sequence[str]: its overload comes first and wins, as at run time (hence the ignores).
    @overload
    def encode(  # type: ignore[overload-overlap]
        self, texts: str, batch_size: int = ..., normalize_embeddings: bool | None = ...,
        show_progress_bar: bool = ..., prompt: str | None = ..., prompt_name: str | None = ...,
        max_tokens_per_batch: int | None = ..., temperature: float | None = ...,
        output_value: OutputValue = ..., return_stats: Literal[False] = ...,
    ) -> np.ndarray: ...

    @overload
    def encode(
        self, texts: Sequence[str], batch_size: int = ..., normalize_embeddings: bool | None = ...,
        show_progress_bar: bool = ..., prompt: str | None = ..., prompt_name: str | None = ...,
        max_tokens_per_batch: int | None = ..., temperature: float | None = ...,
        output_value: Literal["sentence_embedding"] = ..., return_stats: Literal[False] = ...,
    ) -> np.ndarray: ...

    @overload
    def encode(
        self, texts: Sequence[str], batch_size: int = ..., normalize_embeddings: bool | None = ...,
        show_progress_bar: bool = ..., prompt: str | None = ..., prompt_name: str | None = ...,
        max_tokens_per_batch: int | None = ..., temperature: float | None = ...,
        *, output_value: Literal["token_embeddings"], return_stats: Literal[False] = ...,
    ) -> list[np.ndarray]: ...

    @overload
    def encode(  # type: ignore[overload-overlap]
        self, texts: str, batch_size: int = ..., normalize_embeddings: bool | None = ...,
        show_progress_bar: bool = ..., prompt: str | None = ..., prompt_name: str | None = ...,
        max_tokens_per_batch: int | None = ..., temperature: float | None = ...,
        output_value: OutputValue = ..., *, return_stats: Literal[True],
    ) -> tuple[np.ndarray, EncodeStats]: ...

    @overload
    def encode(
        self, texts: Sequence[str], batch_size: int = ..., normalize_embeddings: bool | None = ...,
        show_progress_bar: bool = ..., prompt: str | None = ..., prompt_name: str | None = ...,
        max_tokens_per_batch: int | None = ..., temperature: float | None = ...,
        output_value: Literal["sentence_embedding"] = ..., *, return_stats: Literal[True],
    ) -> tuple[np.ndarray, EncodeStats]: ...

    @overload
    def encode(
        self, texts: Sequence[str], batch_size: int = ..., normalize_embeddings: bool | None = ...,
        show_progress_bar: bool = ..., prompt: str | None = ..., prompt_name: str | None = ...,
        max_tokens_per_batch: int | None = ..., temperature: float | None = ...,
        *, output_value: Literal["token_embeddings"], return_stats: Literal[True],
    ) -> tuple[list[np.ndarray], EncodeStats]: ...

    @overload  # a str output_value or a bool return_stats known only at run time
    def encode(
        self, texts: str | Sequence[str], batch_size: int = ..., normalize_embeddings: bool | None = ...,
        show_progress_bar: bool = ..., prompt: str | None = ..., prompt_name: str | None = ...,
        max_tokens_per_batch: int | None = ..., temperature: float | None = ...,
        output_value: str = ..., return_stats: bool = ...,
    ) -> np.ndarray | list[np.ndarray] | tuple[np.ndarray | list[np.ndarray], EncodeStats]: ...

    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        prompt: str | None = None,
        prompt_name: str | None = None,
        max_tokens_per_batch: int | None = None,
        temperature: float | None = None,
        output_value: str = "sentence_embedding",
        return_stats: bool = False,
    ) -> np.ndarray | list[np.ndarray] | tuple[np.ndarray | list[np.ndarray], EncodeStats]:
        """Embed ``texts`` with the encoder's extension method, in input order.

        Inputs are batched by length (never in input order), each text's vector independent of its
        batch neighbours.  Inputs longer than max_length are truncated with a warning, or rejected
        when the encoder was built with ``on_overflow="error"``.

        Args:
            texts: one text or a list of texts (an empty list gives a (0, dim) array).
            batch_size: texts per forward pass (at most).
            normalize_embeddings: None follows the model folder (unit vectors if it has a Normalize
                module, as sentence-transformers does), True forces L2 normalization, False returns
                the raw pooled vectors.
            show_progress_bar: a tqdm bar over the model inputs.
            prompt: a literal prefix put before each text.
            prompt_name: the name of one of the model's prompts ("query", "document", ...); see
                :meth:`encode_query` / :meth:`encode_document`, which choose it for you.
            max_tokens_per_batch: padded tokens per batch (default: batch_size x max_length, capped at
                max(batch_size x Lo, 65,536)).
            temperature: the TempScale tau of this call (default: the configured one), e.g. separate
                query and document temperatures.
            output_value: "sentence_embedding", or "token_embeddings" for, per text, the (n_tokens, dim)
                last-layer states (special and prompt tokens included; :meth:`encode_tokens` gives
                their character offsets).
            return_stats: also return this call's :class:`EncodeStats` (inputs, model sequences,
                truncated texts, the longest input), each call its own even when threads share the
                encoder.

        Returns:
            float32 (len(texts), dim), or one (dim,) vector when ``texts`` is a str (token embeddings: a
            list of arrays, or one array); with ``return_stats=True``, ``(that, stats)``.

        Raises:
            UserError: an invalid argument (a text that is not a string, an unknown prompt_name, both
                prompt and prompt_name, batch_size < 1, tau outside (0, 1]), or an input longer than
                max_length under ``on_overflow="error"``.
        """
        if output_value not in OUTPUT_VALUES:
            raise UserError(f"output_value must be one of {OUTPUT_VALUES}, got {output_value!r}")
        options = RunOptions(batch_size, max_tokens_per_batch, temperature, show_progress_bar)
        inputs = self.runner.tokenize_to_limit(texts, resolve_prompt(self.prompts, prompt, prompt_name))
        out: np.ndarray | list[np.ndarray]
        if output_value == "token_embeddings":
            tokens, stats = self.runner.token_embeddings(inputs, options)
            arrays = [t.embeddings for t in tokens]
            out = arrays[0] if isinstance(texts, str) else arrays
        else:
            vectors, stats = self.runner.encode_tokenized(inputs, options, normalize_embeddings)
            out = vectors[0] if isinstance(texts, str) else vectors
        return (out, stats) if return_stats else out

    def encode_query(
        self,
        sentences: str | Sequence[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        max_tokens_per_batch: int | None = None,
        temperature: float | None = None,
    ) -> np.ndarray:
        """Embed queries: :meth:`encode` with the model's query prompt, as sentence-transformers'
        ``encode_query`` does.

        Args:
            sentences: one text or a list of texts.
            prompt_name: a prompt of the model to use instead; default: its "query" prompt, none if it
                has none.
            prompt: a literal prefix to use instead (then no model prompt is added).
            batch_size: as in :meth:`encode`.
            normalize_embeddings: as in :meth:`encode`.
            show_progress_bar: as in :meth:`encode`.
            max_tokens_per_batch: as in :meth:`encode`.
            temperature: as in :meth:`encode`.

        Returns:
            float32 (len(sentences), dim), or one (dim,) vector for a str.

        Raises:
            UserError: as :meth:`encode` (an unknown prompt_name, both prompt and prompt_name, ...).
        """
        if prompt_name is None and prompt is None:
            prompt_name = role_prompt_name(self.prompts, "query")
        return self.encode(sentences, batch_size, normalize_embeddings, show_progress_bar, prompt, prompt_name,
                           max_tokens_per_batch, temperature)

    def encode_document(
        self,
        sentences: str | Sequence[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        max_tokens_per_batch: int | None = None,
        temperature: float | None = None,
    ) -> np.ndarray:
        """Embed documents: :meth:`encode` with the model's document prompt, as sentence-transformers'
        ``encode_document`` does.

        Args:
            sentences: one text or a list of texts.
            prompt_name: a prompt of the model to use instead; default: its first prompt among
                "document", "passage" (E5's name) and "corpus", none if it has none.
            prompt: a literal prefix to use instead (then no model prompt is added).
            batch_size: as in :meth:`encode`.
            normalize_embeddings: as in :meth:`encode`.
            show_progress_bar: as in :meth:`encode`.
            max_tokens_per_batch: as in :meth:`encode`.
            temperature: as in :meth:`encode`.

        Returns:
            float32 (len(sentences), dim), or one (dim,) vector for a str.

        Raises:
            UserError: as :meth:`encode` (an unknown prompt_name, both prompt and prompt_name, ...).
        """
        if prompt_name is None and prompt is None:
            prompt_name = role_prompt_name(self.prompts, "document")
        return self.encode(sentences, batch_size, normalize_embeddings, show_progress_bar, prompt, prompt_name,
                           max_tokens_per_batch, temperature)

    @overload
    def encode_tokens(
        self, texts: str | Sequence[str], batch_size: int = ..., show_progress_bar: bool = ...,
        prompt: str | None = ..., prompt_name: str | None = ..., max_tokens_per_batch: int | None = ...,
        temperature: float | None = ..., window_overlap: int | None = ..., return_stats: Literal[False] = ...,
    ) -> list[TokenEmbeddings]: ...

    @overload
    def encode_tokens(
        self, texts: str | Sequence[str], batch_size: int = ..., show_progress_bar: bool = ...,
        prompt: str | None = ..., prompt_name: str | None = ..., max_tokens_per_batch: int | None = ...,
        temperature: float | None = ..., window_overlap: int | None = ..., *, return_stats: Literal[True],
    ) -> tuple[list[TokenEmbeddings], EncodeStats]: ...

    @overload  # a bool return_stats known only at run time
    def encode_tokens(
        self, texts: str | Sequence[str], batch_size: int = ..., show_progress_bar: bool = ...,
        prompt: str | None = ..., prompt_name: str | None = ..., max_tokens_per_batch: int | None = ...,
        temperature: float | None = ..., window_overlap: int | None = ..., return_stats: bool = ...,
    ) -> list[TokenEmbeddings] | tuple[list[TokenEmbeddings], EncodeStats]: ...

    def encode_tokens(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool = False,
        prompt: str | None = None,
        prompt_name: str | None = None,
        max_tokens_per_batch: int | None = None,
        temperature: float | None = None,
        window_overlap: int | None = None,
        return_stats: bool = False,
    ) -> list[TokenEmbeddings] | tuple[list[TokenEmbeddings], EncodeStats]:
        """Per text, its token states with each token's character offsets in the text (and this call's
        :class:`EncodeStats` with ``return_stats=True``).

        Under any method: a text is run as ``encode`` runs it (PCW: one window of Lo tokens at a time,
        each token's state taken from its window).  Texts longer than max_length are cut as ``encode``
        cuts them, unless ``window_overlap`` is given: then nothing is cut, and a long text runs as
        windows of max_length tokens (PCW: Lo) sharing ``window_overlap`` tokens, each token's state
        taken from the window where it is farthest from an edge ("long late chunking").  The other
        arguments are :meth:`encode`'s.
        """
        options = RunOptions(batch_size, max_tokens_per_batch, temperature, show_progress_bar)
        inputs = self.runner.tokenize(texts, resolve_prompt(self.prompts, prompt, prompt_name))
        tokens, stats = self.runner.token_embeddings(inputs, options, window_overlap)
        return (tokens, stats) if return_stats else tokens

    # ------------------------------------------------------------------ embedding chunks
    def chunk_spans(self, texts: str | Sequence[str], chunking: ChunkingArgument) -> list[list[Span]]:
        """The (start, end) character spans of each text's chunks (see :mod:`longembed.chunking.spans`)."""
        checked = check_texts(texts)
        if not isinstance(chunking, str | TokenChunking | SentenceChunking):
            if len(chunking) != len(checked):
                raise UserError(f"chunking gives spans for {len(chunking)} texts, but there are {len(checked)} texts")
            return [check_spans(t, spans, f"chunking[{i}]") for i, (t, spans) in enumerate(zip(checked, chunking, strict=True))]
        rule = parse_chunking(chunking)
        if isinstance(rule, SentenceChunking):
            return [sentence_chunk_spans(t, rule.n) for t in checked]
        inputs = self.runner.tokenize(checked)
        require_offsets(inputs, self.tokenizer)
        return [token_chunk_spans(x.offsets, rule.size, rule.overlap) for x in inputs]

    def encode_chunks(
        self,
        texts: str | Sequence[str],
        chunking: ChunkingArgument = "tokens:256",
        late: bool = True,
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        prompt: str | None = None,
        prompt_name: str | None = None,
        max_tokens_per_batch: int | None = None,
        temperature: float | None = None,
        window_overlap: int | None = None,
    ) -> list[tuple[np.ndarray, list[Span]]]:
        """Per text, ``(vectors, spans)``: one float32 vector per chunk and its (start, end) character span.

        Args:
            texts: one text or a list of texts.
            chunking: "tokens:256", "tokens:256:32" (size, overlap), "sentences:4", or a list of
                (start, end) character spans per text.
            late: late chunking (True): the model runs once over the whole text (texts longer than
                max_length as overlapping windows of max_length, ``window_overlap`` tokens shared;
                default an eighth of the window) and each chunk is the mean of its tokens' states
                (:mod:`longembed.chunking.late`); mean-pooling models only.  Naive chunking (False):
                each chunk's text is embedded alone, prompt and special tokens added as for any input.
            batch_size: as in :meth:`encode`.
            show_progress_bar: as in :meth:`encode`.
            prompt: as in :meth:`encode`.
            prompt_name: as in :meth:`encode`.
            max_tokens_per_batch: as in :meth:`encode`.
            temperature: as in :meth:`encode`.
            normalize_embeddings: None: unit vectors when the model normalizes; True / False force it.
            window_overlap: tokens shared by late chunking's windows of a text longer than max_length.

        Returns:
            One ``(vectors, spans)`` per text: float32 (n_chunks, dim) and the chunks' character spans.

        Raises:
            UserError: an invalid chunking string or spans, late chunking for a model that does not
                mean-pool, or any error :meth:`encode` raises.
        """
        prepared = prepare_chunks(self, texts, chunking, late, prompt, prompt_name)
        return encode_chunk_inputs(self, prepared, batch_size, normalize_embeddings, show_progress_bar,
                                   max_tokens_per_batch, temperature, window_overlap)

    def __repr__(self) -> str:
        """The settings that decide the vectors: the method with its own options (NTK's variant and
        factor, SelfExtend's g and w, ...), and the precision and quantization when not the default."""
        c = self.config
        method_options = "".join(f", {k}={v!r}" for k, v in self.runner.positions.extension.config_values().items())
        precision = (f", dtype={c.dtype!r}" if c.dtype != "float32" else "") + (
            f", quantization={c.quantization!r}" if c.quantization is not None else "")
        return (
            f"LongContextEncoder(model={self.source.name!r}, method={self.method!r}{method_options}, "
            f"scheme={self.position_scheme}, Lo={self.original_length}, max_length={self.max_length}, "
            f"scale={c.scale!r}, apply_to={c.apply_to!r}, attention_scale={c.attention_scale!r}, "
            f"temperature={c.temperature}, pooling={self.pooling!r}{precision})"
        )



# ------------------------------------------------------------------ encode_chunks and encode in two halves
# For a pipeline that tokenizes the next texts in another thread while the model encodes these (the index
# build): functions of an encoder, not methods, so the encoder's public face stays what a user calls.

def prepare_chunks(
    encoder: LongContextEncoder,
    texts: str | Sequence[str],
    chunking: ChunkingArgument = "tokens:256",
    late: bool = True,
    prompt: str | None = None,
    prompt_name: str | None = None,
) -> ChunkInputs:
    """The tokenizing half of :meth:`LongContextEncoder.encode_chunks` (no model runs): each text's chunk
    spans and the model inputs, for :func:`encode_chunk_inputs`; the two halves give what ``encode_chunks``
    gives, bit for bit.  Arguments and errors as ``encode_chunks``."""
    checked = check_texts(texts)
    if not isinstance(chunking, str | TokenChunking | SentenceChunking) and isinstance(texts, str):
        chunking = [chunking]
    spans = encoder.chunk_spans(checked, chunking)
    prefix = resolve_prompt(encoder.prompts, prompt, prompt_name)
    if not late:
        pieces = [text[a:b] for text, text_spans in zip(checked, spans, strict=True) for a, b in text_spans]
        return ChunkInputs(spans, encoder.runner.tokenize_to_limit(pieces, prefix), late=False)
    if encoder.pooling != "mean":
        raise UserError(
            f"late chunking mean-pools each chunk's token states, but this model pools with "
            f"{encoder.pooling!r} (its vectors were trained that way); use late=False (naive chunking), "
            "or load it with pooling='mean' if you accept a pooling it was not trained with"
        )
    return ChunkInputs(spans, encoder.runner.tokenize(checked, prefix), late=True)


def encode_chunk_inputs(
    encoder: LongContextEncoder,
    prepared: ChunkInputs,
    batch_size: int = 32,
    normalize_embeddings: bool | None = None,
    show_progress_bar: bool = False,
    max_tokens_per_batch: int | None = None,
    temperature: float | None = None,
    window_overlap: int | None = None,
) -> list[tuple[np.ndarray, list[Span]]]:
    """The encoding half of :meth:`LongContextEncoder.encode_chunks`: per text of :func:`prepare_chunks`,
    ``(vectors, spans)``.  Arguments as ``encode_chunks``."""
    options = RunOptions(batch_size, max_tokens_per_batch, temperature, show_progress_bar)
    spans = prepared.spans
    norm = encoder.normalize if normalize_embeddings is None else normalize_embeddings
    if prepared.late:
        overlap = encoder.window_length // 8 if window_overlap is None else window_overlap
        tokens, _ = encoder.runner.token_embeddings(prepared.inputs, options, overlap)
        vectors = [late_chunk_vectors(t, s) for t, s in zip(tokens, spans, strict=True)]
    else:
        flat, _ = encoder.runner.encode_tokenized(prepared.inputs, options, False)
        bounds = np.cumsum([0] + [len(s) for s in spans])
        vectors = [flat[bounds[i] : bounds[i + 1]] for i in range(len(spans))]
    if norm:
        vectors = [v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for v in vectors]
    return [(np.asarray(v, dtype=np.float32), s) for v, s in zip(vectors, spans, strict=True)]


def prepare_texts(encoder: LongContextEncoder, texts: str | Sequence[str], prompt: str | None = None,
                  prompt_name: str | None = None) -> list[TokenizedInput]:
    """The tokenizing half of :meth:`LongContextEncoder.encode` (no model runs): ``texts`` as the model
    will read them, for :func:`encode_inputs`.  Arguments and errors as ``encode``'s."""
    return encoder.runner.tokenize_to_limit(texts, resolve_prompt(encoder.prompts, prompt, prompt_name))


def encode_inputs(encoder: LongContextEncoder, inputs: Sequence[TokenizedInput], batch_size: int = 32,
                  normalize_embeddings: bool | None = None) -> np.ndarray:
    """The encoding half of :meth:`LongContextEncoder.encode`: float32 (len(inputs), dim) vectors of
    :func:`prepare_texts`' inputs, bit for bit what ``encode`` gives for the same texts."""
    vectors, _ = encoder.runner.encode_tokenized(inputs, RunOptions(batch_size, None, None, False),
                                                 normalize_embeddings)
    return vectors


def load_encoder(
    model: str | Path | None = "default",
    method: str | None = None,
    max_length: int | None = None,
    device: str | torch.device | None = None,
    dtype: str = "float32",
    lazy: bool = False,
    **options: Any,
) -> LongContextEncoder:
    """Load an embedding model with a context-window extension method.

    Args:
        model: a model folder (sentence-transformers or Hugging Face), a folder made by ``longembed tune`` /
            ``export``, a hub id, or "default" (the packaged all-MiniLM-L6-v2).
        method: a context-window extension method ("truncate", "pcw", "gp", "rp", "pi", "ntk", "yarn",
            "selfextend", "native"); None: the method a tuned or exported folder records, else "truncate".
        max_length: Lt, the most tokens an input may have (default: the model's Lo).
        device: "cpu", "cuda", "cuda:1", "mps" (default: cuda if available, else cpu).
        dtype: "float32", "bfloat16" or "float16" for the weights and activations; vectors come back as
            float32 either way.  "auto": bfloat16 where ``device`` computes it natively, else float32
            (:func:`longembed.precision.resolve_dtype`; the encoder's config holds the dtype chosen).
        lazy: read only the configuration and tokenizer now, the weights at the first forward (a fully
            cached run never loads them).
        **options: any other :class:`~longembed.config.EncoderConfig` field, e.g. ``attention_scale="logn"``,
            ``temperature=0.9``, ``preset="longembed-paper"``, ``prompts={"query": "q: "}``.

    Returns:
        The :class:`LongContextEncoder`.

    Raises:
        UserError: an unknown method or option, a method that does not apply to the model's position
            scheme, an invalid value (a :class:`~longembed.errors.UserTypeError` for an unknown keyword).
        UserFileError: ``model`` is neither a local folder nor a model the Hugging Face hub gives.

    ``method=None`` opens a folder made by ``longembed tune`` or ``longembed export`` with the method
    and Lt recorded in it, a folder made by ``longembed train contextual`` with the method and Lt it was
    trained under (when ``max_length`` is not given either), and any other model with "truncate".
    """
    model = "default" if model is None else str(model)
    if method is None and max_length is None:  # a ``longembed train contextual`` folder: its method and Lt
        recorded = recorded_encoder(model)
        if recorded is not None:
            method, max_length = recorded["method"], recorded.get("max_length")
    method = default_method(model) if method is None else method
    if dtype == DTYPE_AUTO:
        dtype = resolve_dtype(dtype, device, options.get("quantization")).dtype
    config = EncoderConfig.from_options(model, method, max_length, dtype=dtype, **options)
    return LongContextEncoder(config, device=device, lazy=lazy)
