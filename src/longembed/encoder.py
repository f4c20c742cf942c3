"""LongContextEncoder: one encoder, every context-window extension method as a switch.

    >>> enc = load_encoder("nomic-embed-text-v1.5", method="selfextend", max_length=8192)
    >>> enc.encode_document(["a long text ..."], batch_size=4)  # the model's "document" prompt
    >>> enc.encode_query(["a question"])                          # its "query" prompt

The encoder loads an unmodified model, selects longembed's attention function on that model
instance only, and passes per-batch instructions (an ``AttentionPlan``) through the model's
forward keyword arguments.  What a method needs per batch comes from the model family's position
scheme (``extension.positions``); everything is computed per document, so a text's embedding does
not depend on what else is in its batch, and inputs the method does not act on (at most Lo tokens,
by default) embed exactly as with the original model.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoTokenizer

from longembed.batching import length_batches
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
from longembed.chunking.tokens import TokenEmbeddings, assemble_tokens, plan_windows, window_inputs
from longembed.config import EncoderConfig, check_scale_factor, check_temperature
from longembed.encoder_protocol import EncoderMetadata, retrieval_prompts, role_prompt_name
from longembed.errors import UserError
from longembed.extension.attention import AttentionPlan
from longembed.extension.methods import build_method
from longembed.extension.pcw import mean_over_windows
from longembed.extension.positions import position_scheme_for
from longembed.extension.scaling import document_scales, length_temperature, logn_factor
from longembed.inputs import (
    EncodeStats,
    PreparedInputs,
    TokenizedInput,
    apply_overflow,
    check_texts,
    prepare_inputs,
    require_offsets,
    resolve_overflow,
    special_token_layout,
    tokenize,
)
from longembed.loading import (
    DTYPES,
    default_method,
    load_model_for_encoding,
    load_transformer_config,
    recorded_encoder,
    resolve_device,
    resolve_model,
)
from longembed.pooling import pool

logger = logging.getLogger(__name__)

# Token budget per batch that the default never goes below: activations are linear in tokens.
MIN_TOKEN_BUDGET = 65_536

__all__ = ["AttentionView", "EncodeStats", "LongContextEncoder", "TokenEmbeddings", "load_encoder"]

#: encode()'s output_value choices (sentence-transformers' names).
OUTPUT_VALUES = ("sentence_embedding", "token_embeddings")
#: Chunk boundaries: a chunking string ("tokens:256", "sentences:4") or (start, end) spans per text.
ChunkingArgument = str | TokenChunking | SentenceChunking | Sequence[Sequence[Span]]


@dataclass
class AttentionView:
    """One layer's attention over one sequence, as an attention observer sees it.

    ``rows(start, stop)`` returns the softmax probabilities of query rows start..stop for every head,
    shape (heads, stop - start, length), recomputed from q and k on demand (the n x n matrix is never
    held).  ``text`` is the index of the text the sequence belongs to (PCW windows share one).
    """

    layer: int
    sequence: int
    text: int
    length: int
    rows: Callable[[int, int], torch.Tensor]


class LongContextEncoder:
    """Embeds texts of any length with a chosen context-window extension method."""

    def __init__(self, config: EncoderConfig, device: str | torch.device | None = None, lazy: bool = False):
        """``lazy=True`` reads only the model's configuration and tokenizer now and its weights at the
        first forward: a run whose every vector is cached never loads them."""
        self.config = config
        self.source = resolve_model(config.model)
        self.device = resolve_device(device)
        self.dtype = DTYPES[config.dtype]
        self.tokenizer = AutoTokenizer.from_pretrained(self.source.transformer_path)
        self.model_config = load_transformer_config(self.source.transformer_path)
        self.positions = position_scheme_for(
            self.model_config,
            build_method(config),
            config.position_scheme,
            config.original_length,
            extended=self.source.extended_table,
        )
        self.position_scheme = self.positions.name
        self.method = self.positions.method
        self.original_length = self.positions.original_length
        self.max_length = self.positions.target_length(config.max_length)
        if config.max_length is not None:
            check_scale_factor(config.max_length, self.original_length)
        self.pooling = config.pooling or self.source.pooling
        self.prompts = {**self.source.prompts, **config.prompts}
        self.normalize = self.source.normalize
        self.num_layers = self.model_config.num_hidden_layers
        self.special_tokens = special_token_layout(self.tokenizer)
        self.overflow = resolve_overflow(config.on_overflow, "encoder", "on_overflow")
        self._last_stats = EncodeStats()  # only for the deprecated last_stats
        # Scores (batch x heads x queries x keys) held at once before attention works in query
        # blocks; a memory knob only, results do not depend on it.
        self.max_score_elements = 1 << 24
        self._model: torch.nn.Module | None = None
        if not lazy:
            self._load_model()

    @property
    def model(self) -> torch.nn.Module:
        """The transformer, with longembed's attention function on this instance (loaded on first use)."""
        return self._model if self._model is not None else self._load_model()

    @property
    def model_loaded(self) -> bool:
        return self._model is not None

    def _load_model(self) -> torch.nn.Module:
        model = load_model_for_encoding(self.source.transformer_path, self.config, self.positions, self.device)
        self._takes_token_types = "token_type_ids" in inspect.signature(model.forward).parameters
        self._model = model
        return model

    # ------------------------------------------------------------------ public API
    @property
    def metadata(self) -> EncoderMetadata:
        """Who this encoder is, for results and cache keys (:class:`~longembed.encoder_protocol.EncoderMetadata`)."""
        return EncoderMetadata(
            config=self.config, tokenizer=self.tokenizer, prompts=self.prompts, source=self.source,
            device=self.device, method=self.method, position_scheme=self.position_scheme,
            max_length=self.max_length, original_length=self.original_length, pooling=self.pooling,
            normalize=self.normalize,
        )

    @property
    def embedding_dim(self) -> int:
        return self.model_config.hidden_size

    @property
    def window_length(self) -> int:
        """The longest single model input: Lo under PCW (its windows), else max_length."""
        return self.original_length if self.method == "pcw" else self.max_length

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
                truncated texts, the longest input): safe when threads share the encoder, unlike the
                deprecated :attr:`last_stats`.

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
        if output_value == "token_embeddings":
            tokens, stats = self._encode_tokens(
                texts, batch_size, show_progress_bar, prompt, prompt_name, max_tokens_per_batch, temperature, None
            )
            arrays = [t.embeddings for t in tokens]
            out: np.ndarray | list[np.ndarray] = arrays[0] if isinstance(texts, str) else arrays
        else:
            vectors, stats = self._encode_tokenized(
                self.tokenize(texts, prompt, prompt_name), batch_size, normalize_embeddings, show_progress_bar,
                max_tokens_per_batch, temperature, stacklevel=3,
            )
            out = vectors[0] if isinstance(texts, str) else vectors
        return (out, stats) if return_stats else out

    @property
    def last_stats(self) -> EncodeStats:
        """Deprecated: what the encoder's last ``encode`` (by any thread) did to its inputs.

        A side channel that threads sharing the encoder overwrite; use ``encode(..., return_stats=True)``,
        which returns each call's own :class:`EncodeStats`.  Kept for one release.
        """
        warnings.warn(
            "LongContextEncoder.last_stats is deprecated (threads sharing an encoder overwrite it); use "
            "vectors, stats = encoder.encode(..., return_stats=True)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._last_stats

    def encode_query(
        self, sentences: str | Sequence[str], prompt_name: str | None = None, prompt: str | None = None, **kwargs: Any
    ) -> np.ndarray | list[np.ndarray]:
        """Embed queries: :meth:`encode` with the model's query prompt, as sentence-transformers'
        ``encode_query`` does.

        Args:
            sentences: one text or a list of texts.
            prompt_name: a prompt of the model to use instead; default: its "query" prompt, none if it
                has none.
            prompt: a literal prefix to use instead (then no model prompt is added).
            **kwargs: any other argument of :meth:`encode` (batch_size, normalize_embeddings, ...).

        Returns:
            What :meth:`encode` returns: float32 (len(sentences), dim), or one vector for a str.

        Raises:
            ValueError: as :meth:`encode` (an unknown prompt_name, both prompt and prompt_name, ...).
        """
        if prompt_name is None and prompt is None:
            prompt_name = role_prompt_name(self.prompts, "query")
        return self.encode(sentences, prompt=prompt, prompt_name=prompt_name, **kwargs)

    def encode_document(
        self, sentences: str | Sequence[str], prompt_name: str | None = None, prompt: str | None = None, **kwargs: Any
    ) -> np.ndarray | list[np.ndarray]:
        """Embed documents: :meth:`encode` with the model's document prompt, as sentence-transformers'
        ``encode_document`` does.

        Args:
            sentences: one text or a list of texts.
            prompt_name: a prompt of the model to use instead; default: its first prompt among
                "document", "passage" (E5's name) and "corpus", none if it has none.
            prompt: a literal prefix to use instead (then no model prompt is added).
            **kwargs: any other argument of :meth:`encode` (batch_size, normalize_embeddings, ...).

        Returns:
            What :meth:`encode` returns: float32 (len(sentences), dim), or one vector for a str.

        Raises:
            ValueError: as :meth:`encode` (an unknown prompt_name, both prompt and prompt_name, ...).
        """
        if prompt_name is None and prompt is None:
            prompt_name = role_prompt_name(self.prompts, "document")
        return self.encode(sentences, prompt=prompt, prompt_name=prompt_name, **kwargs)

    def tokenize(
        self, texts: str | Sequence[str], prompt: str | None = None, prompt_name: str | None = None
    ) -> list[TokenizedInput]:
        """Check ``texts`` and tokenize ``prompt + text`` once, as the model will run it (nothing cut yet):
        what :meth:`encode_tokenized` takes, and what the server counts and cuts before queueing."""
        prefix = self.resolve_prompt(prompt, prompt_name)
        return tokenize(check_texts(texts), self.tokenizer, prefix, self.special_tokens)

    def encode_tokenized(
        self,
        inputs: Sequence[TokenizedInput],
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        max_tokens_per_batch: int | None = None,
        temperature: float | None = None,
        return_stats: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, EncodeStats]:
        """Embed inputs tokenized already (:meth:`tokenize`), as :meth:`encode` embeds texts: the
        encoder's overflow policy applies, then (PCW) windows; float32 (len(inputs), dim), and this
        call's :class:`EncodeStats` with ``return_stats=True``."""
        vectors, stats = self._encode_tokenized(
            inputs, batch_size, normalize_embeddings, show_progress_bar, max_tokens_per_batch, temperature, stacklevel=3
        )
        return (vectors, stats) if return_stats else vectors

    def _encode_tokenized(
        self,
        inputs: Sequence[TokenizedInput],
        batch_size: int,
        normalize_embeddings: bool | None,
        show_progress_bar: bool,
        max_tokens_per_batch: int | None,
        temperature: float | None,
        stacklevel: int,
    ) -> tuple[np.ndarray, EncodeStats]:
        """:meth:`encode_tokenized`'s vectors and stats; a truncation warning points ``stacklevel`` frames up."""
        if temperature is not None:
            temperature = check_temperature(temperature)
        if batch_size < 1:
            raise UserError(f"batch_size must be positive, got {batch_size}")
        prepared = self._prepare_tokenized(inputs, stacklevel=stacklevel + 1)
        norm = self.normalize if normalize_embeddings is None else normalize_embeddings
        per_sequence = self._run(
            prepared.sequences,
            batch_size,
            max_tokens_per_batch,
            show_progress_bar,
            normalize=norm and self.normalize,
            temperature=temperature,
        )
        embeddings = mean_over_windows(per_sequence, prepared.owners, prepared.n_texts)
        if norm:
            embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
        return embeddings.numpy().astype(np.float32, copy=False), prepared.stats

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
        taken from the window where it is farthest from an edge ("long late chunking").
        """
        tokens, stats = self._encode_tokens(
            texts, batch_size, show_progress_bar, prompt, prompt_name, max_tokens_per_batch, temperature, window_overlap
        )
        return (tokens, stats) if return_stats else tokens

    def _encode_tokens(
        self,
        texts: str | Sequence[str],
        batch_size: int,
        show_progress_bar: bool,
        prompt: str | None,
        prompt_name: str | None,
        max_tokens_per_batch: int | None,
        temperature: float | None,
        window_overlap: int | None,
    ) -> tuple[list[TokenEmbeddings], EncodeStats]:
        """:meth:`encode_tokens`'s token states and this call's stats."""
        if temperature is not None:
            temperature = check_temperature(temperature)
        if batch_size < 1:
            raise UserError(f"batch_size must be positive, got {batch_size}")
        inputs = self.tokenize(texts, prompt, prompt_name)
        require_offsets(inputs, self.tokenizer)
        if window_overlap is None:
            inputs, stats = apply_overflow(inputs, self.overflow, self.original_length, self.max_length, stacklevel=4)
        else:
            stats = EncodeStats(n_inputs=len(inputs), longest_input_tokens=max((x.n_tokens for x in inputs), default=0))
        window = self.window_length
        plans = [
            plan_windows(x.n_tokens - x.lead - x.tail, window - x.lead - x.tail, window_overlap or 0)
            for x in inputs
        ]
        sequences = [ids for x, plan in zip(inputs, plans, strict=True) for ids in window_inputs(x, plan)]
        stats.n_sequences = len(sequences)
        self._last_stats = stats
        states = self._run_states(sequences, batch_size, max_tokens_per_batch, show_progress_bar, temperature)
        out, k = [], 0
        for x, plan in zip(inputs, plans, strict=True):
            out.append(assemble_tokens(x, plan, states[k : k + len(plan)]))
            k += len(plan)
        return out, stats

    def token_states(
        self, sequences: Sequence[Sequence[int]], max_tokens_per_batch: int | None = None,
        temperature: float | None = None,
    ) -> list[np.ndarray]:
        """Last-layer states, (len, dim) float32, of token-id sequences run as they are: each one is a
        model input already (its special and prompt tokens in it), at most :attr:`window_length` long;
        nothing is added, cut or windowed.  What :meth:`encode_tokens` runs per window, for callers that
        plan windows themselves (the server batches windows of many requests together)."""
        if temperature is not None:
            temperature = check_temperature(temperature)
        longest = max((len(s) for s in sequences), default=0)
        if longest > self.window_length:
            raise UserError(f"a sequence has {longest} tokens, more than one model input holds ({self.window_length})")
        if any(len(s) == 0 for s in sequences):
            raise UserError("an empty token sequence has no states")
        return self._run_states([list(s) for s in sequences], len(sequences) or 1, max_tokens_per_batch, False,
                                temperature)

    def forward_states(
        self, sequences: Sequence[Sequence[int]], temperature: float | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Last-layer states (B, n, dim) float32 of a batch of token-id sequences (right-padded), and its (B, n)
        mask of real tokens, run as every encode runs them (the method's positions, scaling, TempScale) but
        outside inference mode: gradients flow, so a trainer fine-tunes the model through the extension
        method it will be used with (``longembed train contextual``).  Each sequence is one model input
        (at most :attr:`window_length` tokens, its special and prompt tokens in it)."""
        longest = max((len(s) for s in sequences), default=0)
        if longest > self.window_length or any(len(s) == 0 for s in sequences):
            raise UserError(f"sequences must hold 1..{self.window_length} tokens (one model input), got up to {longest}")
        return self._hidden([list(s) for s in sequences], temperature=temperature)

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
        inputs = tokenize(checked, self.tokenizer, "", self.special_tokens)
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
        single = isinstance(texts, str)
        checked = check_texts(texts)
        if not isinstance(chunking, str | TokenChunking | SentenceChunking) and single:
            chunking = [chunking]
        spans = self.chunk_spans(checked, chunking)
        norm = self.normalize if normalize_embeddings is None else normalize_embeddings
        if late:
            if self.pooling != "mean":
                raise UserError(
                    f"late chunking mean-pools each chunk's token states, but this model pools with "
                    f"{self.pooling!r} (its vectors were trained that way); use late=False (naive chunking), "
                    "or load it with pooling='mean' if you accept a pooling it was not trained with"
                )
            overlap = self.window_length // 8 if window_overlap is None else window_overlap
            tokens = self.encode_tokens(
                checked, batch_size=batch_size, show_progress_bar=show_progress_bar, prompt=prompt,
                prompt_name=prompt_name, max_tokens_per_batch=max_tokens_per_batch, temperature=temperature,
                window_overlap=overlap,
            )
            vectors = [late_chunk_vectors(t, s) for t, s in zip(tokens, spans, strict=True)]
        else:
            pieces = [text[a:b] for text, text_spans in zip(checked, spans, strict=True) for a, b in text_spans]
            flat = self.encode(
                pieces, batch_size, normalize_embeddings=False, show_progress_bar=show_progress_bar,
                prompt=prompt, prompt_name=prompt_name, max_tokens_per_batch=max_tokens_per_batch,
                temperature=temperature,
            )
            bounds = np.cumsum([0] + [len(s) for s in spans])
            vectors = [flat[bounds[i] : bounds[i + 1]] for i in range(len(spans))]
        if norm:
            vectors = [v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for v in vectors]
        out = [(np.asarray(v, dtype=np.float32), s) for v, s in zip(vectors, spans, strict=True)]
        return out

    def observe_attention(
        self,
        texts: str | Sequence[str],
        observer: Callable[[AttentionView], None],
        layer: int = -1,
        prompt: str | None = None,
        prompt_name: str | None = None,
        temperature: float | None = None,
        show_progress_bar: bool = False,
    ) -> None:
        """Run every sequence of ``texts`` alone and show ``observer`` the attention of ``layer``.

        The observer is called once per sequence (PCW: per window) with an :class:`AttentionView`
        of that layer; attention rows are recomputed block by block on request, so memory stays
        linear in the length (``longembed.collapse.sigma`` measures sigma_a this way).
        ``temperature`` overrides the configured TempScale tau, as in ``encode``.
        """
        if temperature is not None:
            temperature = check_temperature(temperature)
        prepared = self._prepare(texts, prompt, prompt_name)
        target = layer % self.num_layers

        def hook(index: int) -> Callable:
            def on_layer(layer_index: int, rows: Callable[[int, int], torch.Tensor]) -> None:
                view = AttentionView(
                    layer_index, index, prepared.owners[index], len(prepared.sequences[index]),
                    lambda start, stop: rows(start, stop)[0],
                )
                observer(view)

            return on_layer

        with torch.inference_mode():
            for i in tqdm(range(len(prepared.sequences)), desc="attention", disable=not show_progress_bar):
                self._forward(
                    [prepared.sequences[i]], observer=hook(i), observe_layer=target, temperature=temperature
                )

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None) -> str:
        """The prefix put before each text: ``prompt`` literally, or the model's prompt named ``prompt_name``."""
        if prompt is not None and prompt_name is not None:
            raise UserError("pass either prompt or prompt_name, not both")
        if prompt_name is None:
            return prompt or ""
        if prompt_name not in self.prompts:
            known = ", ".join(repr(k) for k in self.prompts) or "none"
            raise UserError(
                f"unknown prompt_name {prompt_name!r}; this model's prompts: {known} (or pass prompt=)"
            )
        return self.prompts[prompt_name]

    def retrieval_prompts(self) -> dict[str, str]:
        """The prefixes of queries and documents: the model's "query" and "document" (else "passage")
        prompts, "" where it has none (:func:`longembed.encoder_protocol.retrieval_prompts`)."""
        return retrieval_prompts(self.prompts)

    # ------------------------------------------------------------------ internals
    def _prepare(self, texts: str | Sequence[str], prompt: str | None, prompt_name: str | None) -> PreparedInputs:
        """Checked texts -> token-id sequences (PCW: windows of Lo tokens), with stats."""
        return self._prepare_tokenized(self.tokenize(texts, prompt, prompt_name), stacklevel=4)

    def _prepare_tokenized(self, inputs: Sequence[TokenizedInput], stacklevel: int) -> PreparedInputs:
        """Tokenized inputs under the overflow policy -> token-id sequences (PCW: windows of Lo tokens),
        with stats; a truncation warning points ``stacklevel`` frames above this method's."""
        kept, stats = apply_overflow(inputs, self.overflow, self.original_length, self.max_length, stacklevel)
        prepared = prepare_inputs(kept, stats, window=self.original_length if self.method == "pcw" else None)
        self._last_stats = prepared.stats
        return prepared

    def _batched(
        self, sequences: list[list[int]], batch_size: int, max_tokens: int | None, show_progress_bar: bool
    ) -> Iterator[list[int]]:
        """Indices of ``sequences`` in batches by length under the token budget, run under
        inference mode with one progress bar (advanced after each batch)."""
        lengths = [len(s) for s in sequences]
        budget = max_tokens or self._default_token_budget(batch_size, max(lengths, default=1))
        with (
            torch.inference_mode(),
            tqdm(total=len(sequences), desc="encoding", unit="seq", disable=not show_progress_bar) as bar,
        ):
            for batch in length_batches(lengths, batch_size, budget):
                yield batch
                bar.update(len(batch))

    def _run(
        self,
        sequences: list[list[int]],
        batch_size: int,
        max_tokens: int | None,
        show_progress_bar: bool,
        normalize: bool,
        temperature: float | None = None,
    ) -> torch.Tensor:
        """Pooled vectors (len(sequences), dim) of every sequence, batched by length."""
        out = torch.empty(len(sequences), self.embedding_dim)
        for batch in self._batched(sequences, batch_size, max_tokens, show_progress_bar):
            pooled = self._forward([sequences[i] for i in batch], temperature=temperature)
            if normalize:
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
            out[batch] = pooled.float().cpu()
        return out

    def _run_states(
        self,
        sequences: list[list[int]],
        batch_size: int,
        max_tokens: int | None,
        show_progress_bar: bool,
        temperature: float | None = None,
    ) -> list[np.ndarray]:
        """Last-layer token states (len, dim) float32 of every sequence, batched by length."""
        out: list[np.ndarray] = [np.zeros((0, self.embedding_dim), dtype=np.float32)] * len(sequences)
        for batch in self._batched(sequences, batch_size, max_tokens, show_progress_bar):
            hidden, _ = self._hidden([sequences[i] for i in batch], temperature=temperature)
            hidden = hidden.float().cpu().numpy()
            for row, i in enumerate(batch):
                out[i] = hidden[row, : len(sequences[i])].copy()
        return out

    def _default_token_budget(self, batch_size: int, longest: int) -> int:
        """Padded tokens per batch: batch_size full-length inputs, capped at the larger of
        batch_size x Lo and MIN_TOKEN_BUDGET (memory grows with tokens, not their square), and
        never less than the longest input."""
        cap = max(batch_size * self.original_length, MIN_TOKEN_BUDGET)
        return max(min(batch_size * self.max_length, cap), longest)

    def _logit_multiplier(self, lengths: torch.Tensor, temperature: float | None) -> torch.Tensor:
        """Per document: log-n attention scaling (if on) times 1 / TempScale tau."""
        config = self.config
        multiplier = torch.ones(len(lengths))
        if config.attention_scale == "logn":
            multiplier = multiplier * logn_factor(lengths, self.original_length)
        tau = length_temperature(
            lengths,
            config.temperature if temperature is None else temperature,
            config.temperature_decay,
            config.temperature_reference,
        )
        return multiplier / tau

    def _forward(
        self,
        sequences: list[list[int]],
        observer: Callable | None = None,
        observe_layer: int | None = None,
        temperature: float | None = None,
    ) -> torch.Tensor:
        """Pooled embeddings (B, dim) of a batch of token-id sequences."""
        hidden, mask = self._hidden(sequences, observer, observe_layer, temperature)
        return pool(hidden, mask, self.pooling)

    def _hidden(
        self,
        sequences: list[list[int]],
        observer: Callable | None = None,
        observe_layer: int | None = None,
        temperature: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Last-layer states (B, n, dim) of a batch of token-id sequences, and its (B, n) mask of real tokens."""
        model = self.model
        lengths = torch.tensor([len(s) for s in sequences])
        n = int(lengths.max())
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        # padded on the right whatever the tokenizer's padding_side (Qwen3-Embedding's says left): each
        # document's positions start at 0 and its masked attention never sees the padding
        input_ids = torch.full((len(sequences), n), pad, dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = torch.tensor(ids)
        mask = torch.arange(n).unsqueeze(0) < lengths.unsqueeze(1)
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask.long()}
        if self._takes_token_types:
            inputs["token_type_ids"] = torch.zeros_like(input_ids)

        scales = document_scales(lengths, self.original_length, self.max_length, self.config.scale, self.config.apply_to)
        positions = self.positions.batch(lengths, n, scales)
        multiplier = self._logit_multiplier(lengths, temperature)
        plan = AttentionPlan(
            key_mask=None if bool(mask.all()) else mask.to(self.device),
            logit_scale=None if bool((multiplier == 1).all()) else multiplier.to(self.device),
            rotary=_to_device(positions.rotary, self.device, self.dtype),
            observer=observer,
            observe_layer=observe_layer,
            max_score_elements=self.max_score_elements,
        )
        inputs = {k: v.to(self.device) for k, v in {**inputs, **positions.model_inputs}.items()}
        hidden = model(**inputs, longembed_plan=plan).last_hidden_state
        return hidden.float(), inputs["attention_mask"].bool()  # pooled and returned in float32

    def __repr__(self) -> str:
        """The settings that decide the vectors: the method with its own options (NTK's variant and
        factor, SelfExtend's g and w, ...), and the precision and quantization when not the default."""
        c = self.config
        method_options = "".join(f", {k}={v!r}" for k, v in self.positions.extension.config_values().items())
        precision = (f", dtype={c.dtype!r}" if c.dtype != "float32" else "") + (
            f", quantization={c.quantization!r}" if c.quantization is not None else "")
        return (
            f"LongContextEncoder(model={self.source.name!r}, method={self.method!r}{method_options}, "
            f"scheme={self.position_scheme}, Lo={self.original_length}, max_length={self.max_length}, "
            f"scale={c.scale!r}, apply_to={c.apply_to!r}, attention_scale={c.attention_scale!r}, "
            f"temperature={c.temperature}, pooling={self.pooling!r}{precision})"
        )


def _to_device(rotary: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """Rotary tables on the model's device, their floating-point tensors in its dtype (as Hugging Face
    casts cos/sin to the query's dtype); integer tensors (SelfExtend's windows) stay integers."""
    if rotary is None:
        return None
    if isinstance(rotary, dict):
        return {name: _to_device(tables, device, dtype) for name, tables in rotary.items()}

    def move(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, tuple):
            return tuple(move(t) for t in x)
        return x.to(device, dtype) if x.is_floating_point() else x.to(device)

    return type(rotary)(**{name: move(value) for name, value in vars(rotary).items()})


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
            float32 either way.
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
    config = EncoderConfig.from_options(model, method, max_length, dtype=dtype, **options)
    return LongContextEncoder(config, device=device, lazy=lazy)
