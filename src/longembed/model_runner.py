"""ModelRunner: how an encoder's model runs token ids under its extension method (``encoder.runner``).

The internal half of :class:`~longembed.encoder.LongContextEncoder`, called directly by the server (planned
inputs and windows), the contextual trainer (states with gradients) and the collapse study (attention).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoTokenizer

from longembed.batching import length_batches
from longembed.chunking.tokens import TokenEmbeddings, assemble_tokens, plan_windows, window_inputs
from longembed.config import EncoderConfig, check_scale_factor, check_temperature
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
    tokenize_bounded,
)
from longembed.loading import DTYPES, ModelSource, load_model_for_encoding, load_transformer_config
from longembed.pooling import pool
from longembed.threads import forward_threads

__all__ = ["AttentionView", "ModelRunner", "RunOptions"]

# Token budget per batch that the default never goes below: activations are linear in tokens.
MIN_TOKEN_BUDGET = 65_536
#: The modules whose frames a truncation warning looks past, to point at the code that called the encoder.
ENCODER_MODULES = frozenset({__name__, "longembed.encoder"})


@dataclass(frozen=True)
class RunOptions:
    """How one call runs the model: texts per forward pass, padded tokens per batch (None: batch_size
    full-length inputs, capped at max(batch_size x Lo, 65,536)), the TempScale tau of this call (None: the
    configured one) and a progress bar.  The one place these arguments are checked: the encoder's methods
    make one, the runner's entry points take it."""

    batch_size: int = 32
    max_tokens_per_batch: int | None = None
    temperature: float | None = None
    show_progress_bar: bool = False

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise UserError(f"batch_size must be positive, got {self.batch_size}")
        if self.temperature is not None:
            object.__setattr__(self, "temperature", check_temperature(self.temperature))


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


class ModelRunner:
    """The model of one encoder and how its inputs run: tokenizing, the overflow policy, PCW windows,
    batching by length, the forward with the extension method's positions and scaling, pooling.

    Every input is computed alone (its positions, scales and TempScale per document), so a text's
    result does not depend on its batch neighbours.  ``lazy=True`` reads only the model's configuration
    and tokenizer now and its weights at the first forward.
    """

    def __init__(self, config: EncoderConfig, source: ModelSource, device: torch.device, lazy: bool = False):
        self.config = config
        self.source = source
        self.device = device
        self.dtype = DTYPES[config.dtype]
        self.tokenizer = AutoTokenizer.from_pretrained(source.transformer_path)
        self.model_config = load_transformer_config(source.transformer_path)
        self.positions = position_scheme_for(
            self.model_config,
            build_method(config),
            config.position_scheme,
            config.original_length,
            extended=source.extended_table,
        )
        self.max_length = self.positions.target_length(config.max_length)
        if config.max_length is not None:
            check_scale_factor(config.max_length, self.original_length)
        self.pooling = config.pooling or source.pooling
        self.normalize = source.normalize
        self.special_tokens = special_token_layout(self.tokenizer)
        self.overflow = resolve_overflow(config.on_overflow, "encoder", "on_overflow")
        # Scores (batch x heads x queries x keys) held at once before attention works in query
        # blocks; a memory knob only, results do not depend on it.
        self.max_score_elements = 1 << 24
        self._model: torch.nn.Module | None = None
        if not lazy:
            self._load_model()

    # ------------------------------------------------------------------ what it runs
    @property
    def method(self) -> str:
        """The extension method's name ("pi", "selfextend", ...)."""
        return self.positions.method

    @property
    def original_length(self) -> int:
        """Lo: the longest input the model was trained on."""
        return self.positions.original_length

    @property
    def window_length(self) -> int:
        """The longest single model input: Lo under PCW (its windows), else max_length."""
        return self.original_length if self.method == "pcw" else self.max_length

    @property
    def embedding_dim(self) -> int:
        return self.model_config.hidden_size

    @property
    def num_layers(self) -> int:
        return self.model_config.num_hidden_layers

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

    # ------------------------------------------------------------------ entry points
    def tokenize(self, texts: str | Sequence[str], prefix: str = "") -> list[TokenizedInput]:
        """Check ``texts`` and tokenize ``prefix + text`` once, as the model will run it (nothing cut yet)."""
        return tokenize(check_texts(texts), self.tokenizer, prefix, self.special_tokens)

    def tokenize_to_limit(self, texts: str | Sequence[str], prefix: str = "") -> list[TokenizedInput]:
        """:meth:`tokenize`, each text's tokens past the overflow limit left unread (bounded by the limit,
        not the text: :func:`~longembed.inputs.tokenize_bounded`); what an input cut or refused there needs."""
        limit = self.overflow.limit_for(self.original_length, self.max_length)
        return tokenize_bounded(check_texts(texts), self.tokenizer, prefix, self.special_tokens, limit)

    def prepare(self, inputs: Sequence[TokenizedInput]) -> PreparedInputs:
        """The model inputs of tokenized inputs: the overflow policy applied (a cut is warned about, at
        the caller of the encoder), then under PCW each input's windows of Lo tokens; with the stats."""
        kept, stats = apply_overflow(inputs, self.overflow, self.original_length, self.max_length, _outside_stacklevel())
        return prepare_inputs(kept, stats, window=self.original_length if self.method == "pcw" else None)

    def encode_tokenized(
        self, inputs: Sequence[TokenizedInput], options: RunOptions, normalize_embeddings: bool | None = None
    ) -> tuple[np.ndarray, EncodeStats]:
        """Pooled vectors, float32 (len(inputs), dim), of tokenized inputs (PCW: the mean over each one's
        windows), and what the call did to them.  ``normalize_embeddings`` None follows the model folder."""
        prepared = self.prepare(inputs)
        norm = self.normalize if normalize_embeddings is None else normalize_embeddings
        per_sequence = self._run(prepared.sequences, options, normalize=norm and self.normalize)
        embeddings = mean_over_windows(per_sequence, prepared.owners, prepared.n_texts)
        if norm:
            embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
        return embeddings.numpy().astype(np.float32, copy=False), prepared.stats

    def token_embeddings(
        self, inputs: Sequence[TokenizedInput], options: RunOptions, window_overlap: int | None = None
    ) -> tuple[list[TokenEmbeddings], EncodeStats]:
        """Per input, its token states with their character offsets, and what the call did to them.

        Inputs longer than the overflow limit are cut as :meth:`encode_tokenized` cuts them, unless
        ``window_overlap`` is given: then nothing is cut, and a long input runs as windows of
        :attr:`window_length` tokens sharing ``window_overlap`` tokens, each token's state taken from
        the window where it is farthest from an edge.
        """
        require_offsets(inputs, self.tokenizer)
        if window_overlap is None:
            inputs, stats = apply_overflow(
                inputs, self.overflow, self.original_length, self.max_length, _outside_stacklevel()
            )
        else:
            stats = EncodeStats(n_inputs=len(inputs), longest_input_tokens=max((x.n_tokens for x in inputs), default=0))
        window = self.window_length
        plans = [
            plan_windows(x.n_tokens - x.lead - x.tail, window - x.lead - x.tail, window_overlap or 0)
            for x in inputs
        ]
        sequences = [ids for x, plan in zip(inputs, plans, strict=True) for ids in window_inputs(x, plan)]
        stats.n_sequences = len(sequences)
        states = self._run_states(sequences, options)
        out, k = [], 0
        for x, plan in zip(inputs, plans, strict=True):
            out.append(assemble_tokens(x, plan, states[k : k + len(plan)]))
            k += len(plan)
        return out, stats

    def token_states(self, sequences: Sequence[Sequence[int]], options: RunOptions) -> list[np.ndarray]:
        """Last-layer states, (len, dim) float32, of token-id sequences run as they are: each one is a
        model input already (its special and prompt tokens in it); nothing is added, cut or windowed.
        What :meth:`token_embeddings` runs per window, for callers that plan windows themselves (the
        server batches windows of many requests together)."""
        return self._run_states(check_model_inputs(sequences, self.window_length), options)

    def forward_states(self, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Last-layer states (B, n, dim) float32 of a batch of model inputs (right-padded), and its (B, n)
        mask of real tokens, run as every encode runs them (the method's positions, scaling, TempScale)
        but outside inference mode: gradients flow, so a trainer fine-tunes the model through the
        extension method it will be used with (``longembed train contextual``)."""
        return self._hidden(check_model_inputs(sequences, self.window_length))

    def observe_attention(
        self,
        inputs: Sequence[TokenizedInput],
        observer: Callable[[AttentionView], None],
        layer: int = -1,
        options: RunOptions | None = None,
    ) -> None:
        """Run every model input of ``inputs`` alone and show ``observer`` the attention of ``layer``.

        The observer is called once per sequence (PCW: per window) with an :class:`AttentionView`
        of that layer; attention rows are recomputed block by block on request, so memory stays
        linear in the length (``longembed.collapse.sigma`` measures sigma_a this way).  Of ``options``,
        the temperature and the progress bar apply (each sequence is its own batch).
        """
        options = options or RunOptions()
        prepared = self.prepare(inputs)
        target = layer % self.num_layers

        def hook(index: int) -> Callable:
            def on_layer(layer_index: int, rows: Callable[[int, int], torch.Tensor]) -> None:
                view = AttentionView(
                    layer_index, index, prepared.owners[index], len(prepared.sequences[index]),
                    lambda start, stop: rows(start, stop)[0],
                )
                observer(view)

            return on_layer

        disable = not options.show_progress_bar
        with torch.inference_mode():
            for i in tqdm(range(len(prepared.sequences)), desc="attention", disable=disable):
                self._pooled(
                    [prepared.sequences[i]], observer=hook(i), observe_layer=target, temperature=options.temperature
                )

    # ------------------------------------------------------------------ internals
    def _default_token_budget(self, batch_size: int, longest: int) -> int:
        """Padded tokens per batch: batch_size full-length inputs, capped at the larger of
        batch_size x Lo and MIN_TOKEN_BUDGET (memory grows with tokens, not their square), and
        never less than the longest input."""
        cap = max(batch_size * self.original_length, MIN_TOKEN_BUDGET)
        return max(min(batch_size * self.max_length, cap), longest)

    def _batched(self, sequences: list[list[int]], options: RunOptions) -> Iterator[list[int]]:
        """Indices of ``sequences`` in batches by length under the token budget, run under
        inference mode with one progress bar (advanced after each batch)."""
        lengths = [len(s) for s in sequences]
        budget = options.max_tokens_per_batch or self._default_token_budget(options.batch_size, max(lengths, default=1))
        with (
            torch.inference_mode(),
            tqdm(total=len(sequences), desc="encoding", unit="seq", disable=not options.show_progress_bar) as bar,
        ):
            for batch in length_batches(lengths, options.batch_size, budget):
                yield batch
                bar.update(len(batch))

    def _run(self, sequences: list[list[int]], options: RunOptions, normalize: bool) -> torch.Tensor:
        """Pooled vectors (len(sequences), dim) of every sequence, batched by length."""
        out = torch.empty(len(sequences), self.embedding_dim)
        for batch in self._batched(sequences, options):
            pooled = self._pooled([sequences[i] for i in batch], temperature=options.temperature)
            if normalize:
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
            out[batch] = pooled.float().cpu()
        return out

    def _run_states(self, sequences: list[list[int]], options: RunOptions) -> list[np.ndarray]:
        """Last-layer token states (len, dim) float32 of every sequence, batched by length."""
        out: list[np.ndarray] = [np.zeros((0, self.embedding_dim), dtype=np.float32)] * len(sequences)
        for batch in self._batched(sequences, options):
            hidden, _ = self._hidden([sequences[i] for i in batch], temperature=options.temperature)
            hidden = hidden.float().cpu().numpy()
            for row, i in enumerate(batch):
                out[i] = hidden[row, : len(sequences[i])].copy()
        return out

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

    def _pooled(
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
        with forward_threads(int(input_ids.numel()), self.device):
            hidden = model(**inputs, longembed_plan=plan).last_hidden_state
        return hidden.float(), inputs["attention_mask"].bool()  # pooled and returned in float32


def check_model_inputs(sequences: Sequence[Sequence[int]], window_length: int) -> list[list[int]]:
    """``sequences`` as lists, each one model input of 1..``window_length`` tokens (else a UserError)."""
    longest = max((len(s) for s in sequences), default=0)
    if longest > window_length:
        raise UserError(f"a sequence has {longest} tokens, more than one model input holds ({window_length})")
    if any(len(s) == 0 for s in sequences):
        raise UserError("an empty token sequence has no states")
    return [list(s) for s in sequences]


def _outside_stacklevel() -> int:
    """The ``stacklevel``, counted from this function's caller, of the first frame outside the encoder's
    modules: a truncation warning points at the user's call, however deep in the encoder it was made."""
    here = inspect.currentframe()
    frame, level = (here.f_back if here is not None else None), 1
    while frame is not None and frame.f_globals.get("__name__") in ENCODER_MODULES:
        frame, level = frame.f_back, level + 1
    return level


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
