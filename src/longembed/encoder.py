"""LongContextEncoder: one encoder, every context-window extension method as a switch.

    >>> enc = load_encoder("nomic-embed-text-v1.5", method="selfextend", max_length=8192)
    >>> enc.encode(["search_document: a long text ..."], batch_size=4)

The encoder loads an unmodified model, selects longembed's attention function on that model
instance only, and passes per-batch instructions (an ``AttentionPlan``) through the model's
forward keyword arguments.  Everything a method changes is computed per document, so a text's
embedding does not depend on what else is in its batch, and inputs the method does not act on
(at most Lo tokens, by default) embed exactly as with the original model.
"""

from __future__ import annotations

import inspect
import json
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer

from longembed.config import EncoderConfig
from longembed.extension.ape import APE_METHODS, InterpolatedPositionEmbedding, ape_position_ids
from longembed.extension.attention import ATTENTION_NAME, AttentionPlan
from longembed.extension.methods import (
    APE,
    OFFSET_POSITION_MODEL_TYPES,
    ROPE,
    check_method,
    detect_position_scheme,
)
from longembed.extension.pcw import split_into_windows
from longembed.extension.rope import ROPE_METHODS, RotarySpec, rotary_tables
from longembed.extension.scaling import document_scales, length_temperature, logn_factor
from longembed.loading import resolve_model
from longembed.pooling import pool

logger = logging.getLogger(__name__)

DEFAULT_ALIBI_TRAINING_LENGTH = 512  # JinaBERT's pre-training length (Jina v2, section 3)
# Token budget per batch that the default never goes below: activations are linear in tokens.
MIN_TOKEN_BUDGET = 65_536


@dataclass
class EncodeStats:
    """What the last ``encode`` call did to its inputs (reported by the CLI)."""

    n_inputs: int = 0
    n_sequences: int = 0
    n_truncated: int = 0
    truncated_indices: list[int] = field(default_factory=list)
    longest_input_tokens: int = 0


def load_transformer(path: Path) -> torch.nn.Module:
    """The bare transformer (no head) from a Hugging Face folder, in float32."""
    config = json.loads((path / "config.json").read_text())
    if config.get("model_type") == "jina_bert" or config.get("position_embedding_type") == "alibi":
        from longembed.models.jina_bert import JinaBertModel

        return JinaBertModel.from_pretrained(path, dtype=torch.float32)
    return AutoModel.from_pretrained(path, dtype=torch.float32)


class LongContextEncoder:
    """Embeds texts of any length with a chosen context-window extension method."""

    def __init__(self, config: EncoderConfig, device: str | torch.device | None = None):
        self.config = config
        self.source = resolve_model(config.model)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = AutoTokenizer.from_pretrained(self.source.transformer_path)
        self.model = load_transformer(self.source.transformer_path).to(self.device).eval()
        self.model.set_attn_implementation(ATTENTION_NAME)
        model_config = self.model.config

        self.position_scheme = config.position_scheme or detect_position_scheme(model_config)
        self.method = check_method(config.method, self.position_scheme).name
        self.position_offset = 0
        if (
            self.position_scheme == APE
            and getattr(model_config, "model_type", "") in OFFSET_POSITION_MODEL_TYPES
        ):
            self.position_offset = model_config.pad_token_id + 1
        self.original_length = config.original_length or self._original_length(model_config)
        self.max_length = self._max_length(model_config)
        self.pooling = config.pooling or self.source.pooling
        self.prompts = {**self.source.prompts, **config.prompts}
        self.normalize = self.source.normalize
        self.rotary = self._rotary_specs(model_config) if self.position_scheme == ROPE else None
        self.num_layers = model_config.num_hidden_layers
        self._head, self._tail = self._special_token_layout()
        self._takes_token_types = "token_type_ids" in inspect.signature(self.model.forward).parameters
        self.last_stats = EncodeStats()
        # Scores (batch x heads x queries x keys) held at once before attention works in query
        # blocks; a memory knob only, results do not depend on it.
        self.max_score_elements = 1 << 24
        if self.method == "pi" and self.position_scheme == APE:
            embeddings = self.model.embeddings
            if not isinstance(embeddings.position_embeddings, InterpolatedPositionEmbedding):
                embeddings.position_embeddings = InterpolatedPositionEmbedding(embeddings.position_embeddings)

    # ------------------------------------------------------------------ set-up helpers
    def _original_length(self, model_config) -> int:
        """Lo: the context the model was trained for."""
        if self.position_scheme == APE:
            return model_config.max_position_embeddings - self.position_offset
        if self.position_scheme == ROPE:
            params = getattr(model_config, "rope_parameters", None) or {}
            return int(params.get("original_max_position_embeddings") or model_config.max_position_embeddings)
        return int(getattr(model_config, "training_length", DEFAULT_ALIBI_TRAINING_LENGTH))

    @staticmethod
    def _rotary_specs(model_config) -> RotarySpec | dict[str, RotarySpec]:
        """One rotary spec, or one per layer type when layers differ (ModernBERT local/global)."""
        params = getattr(model_config, "rope_parameters", None) or {}
        layer_types = set(getattr(model_config, "layer_types", None) or ())
        if layer_types and all(isinstance(params.get(t), dict) for t in layer_types):
            return {t: RotarySpec.from_config(model_config, t) for t in sorted(layer_types)}
        return RotarySpec.from_config(model_config)

    def _max_length(self, model_config) -> int:
        """Lt: the longest input accepted, from the config or the method's natural default."""
        lo, requested = self.original_length, self.config.max_length
        if requested is None:
            if self.method == "truncate":
                return lo
            if self.method == "native":
                return int(model_config.max_position_embeddings)
            raise ValueError(
                f"method {self.method!r} extends the context window to max_length tokens: "
                f"pass max_length (the target length Lt, e.g. {lo * 8}); this model's Lo is {lo}"
            )
        if self.position_scheme == APE and self.method == "truncate" and requested > lo:
            raise ValueError(
                f"this model has {lo} position embeddings, so truncate keeps at most {lo} tokens; "
                f"to go to {requested} use an extension method (pcw, gp, rp or pi)"
            )
        return requested

    def _special_token_layout(self) -> tuple[int, int]:
        """How many special tokens the tokenizer puts before and after the content."""
        with_special = self.tokenizer("a", add_special_tokens=True)["input_ids"]
        plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        for head in range(len(with_special) - len(plain) + 1):
            if with_special[head : head + len(plain)] == plain:
                return head, len(with_special) - head - len(plain)
        raise ValueError("cannot locate the content tokens among the special tokens of this tokenizer")

    # ------------------------------------------------------------------ public API
    @property
    def embedding_dim(self) -> int:
        return self.model.config.hidden_size

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
    ) -> np.ndarray:
        """Embed ``texts``; returns float32 (len(texts), dim) in input order (a 1-D vector for a str).

        normalize_embeddings: None follows the model folder (unit vectors if it has a Normalize
        module, as sentence-transformers does), True forces L2 normalization, False returns the
        raw pooled vectors.  prompt / prompt_name: a prefix, given literally or by name
        ("query", "document", ...) from the model's prompts.  Inputs longer than max_length are
        truncated with a warning, or rejected when the encoder was built with on_overflow="error".
        max_tokens_per_batch bounds padded tokens per batch (default: batch_size x max_length,
        capped at max(batch_size x Lo, 65,536)): inputs are batched by length, never in input order.
        temperature overrides the configured TempScale tau for this call (e.g. separate query
        and document temperatures).
        """
        single = isinstance(texts, str)
        sequences, owners, n_texts = self._prepare(texts, prompt, prompt_name)
        norm = self.normalize if normalize_embeddings is None else normalize_embeddings
        if temperature is not None and not 0 < temperature <= 1:
            raise ValueError(f"temperature must be in (0, 1] (TempScale), got {temperature!r}")
        per_sequence = self._run(
            sequences,
            batch_size,
            max_tokens_per_batch,
            show_progress_bar,
            normalize=norm and self.normalize,
            temperature=temperature,
        )
        embeddings = self._merge_windows(per_sequence, owners, n_texts)
        if norm:
            embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
        out = embeddings.numpy().astype(np.float32, copy=False)
        return out[0] if single else out

    def attention_sigma_a(
        self,
        texts: Sequence[str],
        prompt: str | None = None,
        prompt_name: str | None = None,
        layer: int = -1,
        show_progress_bar: bool = False,
        iters: int = 30,
    ) -> np.ndarray:
        """sigma_a of one layer's attention (default the last), mean over heads, per text.

        sigma_a = ||(I - 11^T/n) A||_2, the length-collapse paper's filter-rate bound (Theorem 2),
        found by Lanczos iteration on rows of A recomputed block by block (never n x n at once).
        For pcw, the value is the mean over the text's windows.
        """
        from longembed.collapse.spectral import sigma_a_blockwise

        sequences, owners, n_texts = self._prepare(texts, prompt, prompt_name)
        target = layer % self.num_layers
        values = torch.zeros(len(sequences))

        def observe_into(index: int) -> Callable:
            def observer(layer_index: int, probabilities: Callable[[int, int], torch.Tensor]) -> None:
                if layer_index == target:
                    n = len(sequences[index])
                    values[index] = sigma_a_blockwise(
                        lambda a, b: probabilities(a, b)[0], n, iters=iters
                    ).mean()

            return observer

        with torch.inference_mode():
            for i in tqdm(range(len(sequences)), desc="sigma_a", disable=not show_progress_bar):
                self._forward([sequences[i]], observer=observe_into(i), observe_layer=target)
        return self._merge_windows(values.unsqueeze(1), owners, n_texts).squeeze(1).numpy()

    # ------------------------------------------------------------------ internals
    def _resolve_prompt(self, prompt: str | None, prompt_name: str | None) -> str:
        if prompt is not None and prompt_name is not None:
            raise ValueError("pass either prompt or prompt_name, not both")
        if prompt_name is None:
            return prompt or ""
        if prompt_name not in self.prompts:
            known = ", ".join(repr(k) for k in self.prompts) or "none"
            raise ValueError(
                f"unknown prompt_name {prompt_name!r}; this model's prompts: {known} (or pass prompt=)"
            )
        return self.prompts[prompt_name]

    def _prepare(
        self, texts: str | Sequence[str], prompt: str | None, prompt_name: str | None
    ) -> tuple[list[list[int]], list[int], int]:
        """Token-id sequences to run, and for each the index of the text it belongs to."""
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, Sequence):
            raise TypeError(f"texts must be a string or a sequence of strings, got {type(texts).__name__}")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str; convert or drop it")
            if not text.strip():
                raise ValueError(f"texts[{i}] is empty; an empty text has no meaningful embedding: drop it")
        prefix = self._resolve_prompt(prompt, prompt_name)
        encoded = self.tokenizer(
            [prefix + t for t in texts], add_special_tokens=True, truncation=False, verbose=False
        )["input_ids"]
        stats = EncodeStats(
            n_inputs=len(texts), longest_input_tokens=max((len(x) for x in encoded), default=0)
        )
        limit = self.max_length
        for i, ids in enumerate(encoded):
            if len(ids) > limit:
                stats.n_truncated += 1
                stats.truncated_indices.append(i)
                encoded[i] = ids[: limit - self._tail] + ids[len(ids) - self._tail :]
        if stats.n_truncated:
            first = stats.truncated_indices[:5]
            message = (
                f"{stats.n_truncated} of {len(texts)} inputs exceed max_length={limit} tokens "
                f"(longest: {stats.longest_input_tokens}; first indices: {first})"
            )
            if self.config.on_overflow == "error":
                raise ValueError(message + "; raise max_length or shorten them (on_overflow='error')")
            warnings.warn(message + "; they were truncated to max_length", stacklevel=3)

        if self.method != "pcw":
            sequences, owners = encoded, list(range(len(encoded)))
        else:
            prompt_ids = self.tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
            sequences, owners = [], []
            for i, ids in enumerate(encoded):
                head, tail = ids[: self._head], ids[len(ids) - self._tail :] if self._tail else []
                content = ids[self._head : len(ids) - self._tail]
                shared = prompt_ids if prompt_ids and content[: len(prompt_ids)] == prompt_ids else []
                windows = split_into_windows(head, shared, content[len(shared) :], tail, self.original_length)
                sequences.extend(windows)
                owners.extend([i] * len(windows))
        stats.n_sequences = len(sequences)
        self.last_stats = stats
        return sequences, owners, len(texts)

    def _run(
        self,
        sequences: list[list[int]],
        batch_size: int,
        max_tokens: int | None,
        show_progress_bar: bool,
        normalize: bool,
        temperature: float | None = None,
    ) -> torch.Tensor:
        from longembed.batching import length_batches

        lengths = [len(s) for s in sequences]
        budget = max_tokens or self._default_token_budget(batch_size, max(lengths, default=1))
        out = torch.empty(len(sequences), self.embedding_dim)
        with (
            torch.inference_mode(),
            tqdm(total=len(sequences), desc="encoding", unit="seq", disable=not show_progress_bar) as bar,
        ):
            for batch in length_batches(lengths, batch_size, budget):
                pooled = self._forward([sequences[i] for i in batch], temperature=temperature)
                if normalize:
                    pooled = torch.nn.functional.normalize(pooled, dim=-1)
                out[batch] = pooled.float().cpu()
                bar.update(len(batch))
        return out

    def _default_token_budget(self, batch_size: int, longest: int) -> int:
        """Padded tokens per batch: batch_size full-length inputs, capped at the larger of
        batch_size x Lo and MIN_TOKEN_BUDGET (memory grows with tokens, not their square), and
        never less than the longest input."""
        cap = max(batch_size * self.original_length, MIN_TOKEN_BUDGET)
        return max(min(batch_size * self.max_length, cap), longest)

    @staticmethod
    def _merge_windows(per_sequence: torch.Tensor, owners: list[int], n_texts: int) -> torch.Tensor:
        """Mean over each text's windows (PCW); the identity when every text is one sequence."""
        if len(owners) == n_texts:
            return per_sequence
        index = torch.tensor(owners)
        sums = torch.zeros(n_texts, per_sequence.shape[1]).index_add_(0, index, per_sequence)
        counts = torch.bincount(index, minlength=n_texts).clamp(min=1).unsqueeze(1)
        return sums / counts

    def _forward(
        self,
        sequences: list[list[int]],
        observer: Callable | None = None,
        observe_layer: int | None = None,
        temperature: float | None = None,
    ) -> torch.Tensor:
        """Pooled embeddings (B, dim) of a batch of token-id sequences."""
        lengths = torch.tensor([len(s) for s in sequences])
        n = int(lengths.max())
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(sequences), n), pad, dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = torch.tensor(ids)
        mask = torch.arange(n).unsqueeze(0) < lengths.unsqueeze(1)
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask.long()}
        if self._takes_token_types:
            inputs["token_type_ids"] = torch.zeros_like(input_ids)

        config = self.config
        scales = document_scales(
            lengths, self.original_length, self.max_length, config.scale, config.apply_to
        )
        multiplier = torch.ones(len(sequences))
        if config.attention_scale == "logn":
            multiplier = multiplier * logn_factor(lengths, self.original_length)
        tau = length_temperature(
            lengths,
            config.temperature if temperature is None else temperature,
            config.temperature_decay,
            config.temperature_reference,
        )
        multiplier = multiplier / tau
        plan = AttentionPlan(
            key_mask=None if bool(mask.all()) else mask.to(self.device),
            logit_scale=None if bool((multiplier == 1).all()) else multiplier.to(self.device),
            observer=observer,
            observe_layer=observe_layer,
            max_score_elements=self.max_score_elements,
        )
        if self.position_scheme == APE and self.method in APE_METHODS:
            inputs["position_ids"] = ape_position_ids(
                self.method, lengths, n, scales, self.original_length, self.position_offset
            )
        elif self.position_scheme == ROPE:
            # position 0 makes the model's own rotation the identity; the attention function rotates.
            inputs["position_ids"] = torch.zeros_like(input_ids)
            method = self.method if self.method in ROPE_METHODS else "none"

            def tables(spec: RotarySpec):
                return rotary_tables(
                    method,
                    spec,
                    n,
                    scales,
                    self.original_length,
                    ntk_factor=config.ntk_factor,
                    group_size=config.group_size,
                    window=config.window,
                    yarn_options=config.yarn_options,
                ).to(self.device)

            specs = self.rotary
            plan.rotary = (
                {t: tables(spec) for t, spec in specs.items()} if isinstance(specs, dict) else tables(specs)
            )
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        hidden = self.model(**inputs, longembed_plan=plan).last_hidden_state
        return pool(hidden, inputs["attention_mask"].bool(), self.pooling)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"LongContextEncoder(model={self.source.name!r}, method={self.method!r}, scheme={self.position_scheme}, "
            f"Lo={self.original_length}, max_length={self.max_length}, scale={c.scale!r}, apply_to={c.apply_to!r}, "
            f"attention_scale={c.attention_scale!r}, temperature={c.temperature}, pooling={self.pooling!r})"
        )


def load_encoder(
    model: str | Path | None = "default",
    method: str = "truncate",
    max_length: int | None = None,
    device: str | torch.device | None = None,
    **options: Any,
) -> LongContextEncoder:
    """Load ``model`` with a context-window extension ``method`` (see ``EncoderConfig``)."""
    config = EncoderConfig.from_options(
        "default" if model is None else str(model), method, max_length, **options
    )
    return LongContextEncoder(config, device=device)
