"""JinaBERT: the encoder of Jina Embeddings v2 (Günther et al., 2023, section 4.1), in one file.

A BERT with ALiBi instead of position embeddings, a GEGLU (or ReGLU, or BERT's) feed-forward and
post-LN, under the released checkpoints' parameter names, and its MLM head (``JinaBertForMaskedLM``).
The parameter layout and the attention contract longembed's encoder relies on: docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, AutoModelForMaskedLM, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from longembed.errors import UserError
from longembed.extension.alibi import alibi_bias, alibi_slopes
from longembed.models.configuration_jina_bert import (
    GLU_ACTIVATION_NAMES,
    ORIGINAL_FEED_FORWARD,
    JinaBertConfig,
)

# Feed-forward variants (paper 4.1): the activation applied to the gate half of the GLU.
GLU_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "geglu": lambda: nn.GELU(approximate="none"),  # small and base models
    "reglu": nn.ReLU,  # large model
}
assert tuple(GLU_ACTIVATIONS) == GLU_ACTIVATION_NAMES

# transformers' own attention kernels, which know nothing of ALiBi: a JinaBERT must not run on them.
_KERNELS_WITHOUT_ALIBI = frozenset(
    {"flash_attention_2", "flash_attention_3", "flex_attention", "paged|sdpa", "paged|eager", "sdpa_paged"}
)

# Keys of released checkpoints that this model deliberately does not have: the CLS pooler and the
# MLM head (embeddings are mean-pooled), and buffers that old BERT code saved.
_JINA_UNUSED_KEYS = [r"^(bert\.)?pooler\.", r"^cls\.", r"position_ids$", r"token_type_ids$"]


class JinaBertEmbeddings(nn.Module):
    """Word + token-type embeddings, LayerNorm, dropout.  No position embeddings (ALiBi)."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros(
                inputs_embeds.shape[:-1], dtype=torch.long, device=inputs_embeds.device
            )
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(embeddings))


def _additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A padding mask as logits to add: bool (True = attend) -> 0 / most negative; float as is."""
    if attention_mask.dtype == torch.bool:
        return torch.zeros(attention_mask.shape, dtype=dtype, device=attention_mask.device).masked_fill(
            ~attention_mask, torch.finfo(dtype).min
        )
    return attention_mask.to(dtype)


def _full_alibi_bias(module: nn.Module, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """-m_h * |i - j| for the whole (n_q, n_k) matrix, shape (1, H, n_q, n_k), query dtype."""
    q_pos = torch.arange(query.shape[-2], device=query.device)
    k_pos = torch.arange(key.shape[-2], device=query.device)
    return alibi_bias(module.alibi_slopes, q_pos, k_pos).unsqueeze(0).to(query.dtype)


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T * scaling - m_h |i - j| + mask) V, explicitly (paper Figure 1a).

    q, k, v: (B, H, n, head_dim); ``attention_mask``: None, or a 4-D bool (True = attend) or
    additive float padding mask broadcastable to (B, H, n_q, n_k).  Memory is O(H n^2): for long
    inputs use a blockwise attention function instead.  Returns ((B, n, H, head_dim), weights).
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling + _full_alibi_bias(module, query, key)
    if attention_mask is not None:
        scores = scores + _additive_mask(attention_mask, scores.dtype)
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value)
    return output.transpose(1, 2).contiguous(), weights


def sdpa_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The same attention through ``torch.nn.functional.scaled_dot_product_attention``.

    ALiBi and padding are merged into one additive float mask, as Jina's own SDPA path does
    (``attention_mask + bias``), so SDPA cannot use a flash kernel; memory stays O(H n^2).
    """
    bias = _full_alibi_bias(module, query, key)
    if attention_mask is not None:
        bias = bias + _additive_mask(attention_mask, bias.dtype)
    output = nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=bias, dropout_p=dropout, scale=scaling
    )
    return output.transpose(1, 2).contiguous(), None


def model_slopes(config: JinaBertConfig) -> torch.Tensor:
    """The model's ALiBi slope per head: Jina's rule for its head count, times ``config.alibi_slope_scale``."""
    return alibi_slopes(config.num_attention_heads) * config.alibi_slope_scale


class JinaBertSelfAttention(nn.Module):
    """Multi-head self-attention with symmetric ALiBi; the bias itself lives in the interface."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.config = config
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.attention_head_size**-0.5
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        # m_h, one per head (paper eq. (1)) times the config's scale; derived from the config, so not saved in
        # checkpoints.
        self.register_buffer("alibi_slopes", model_slopes(config), persistent=False)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.attention_head_size)
        query = self.query(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, H, n, d)
        key = self.key(hidden_states).view(hidden_shape).transpose(1, 2)
        value = self.value(hidden_states).view(hidden_shape).transpose(1, 2)

        implementation = self.config._attn_implementation
        if implementation == "sdpa":
            attention_interface: Callable = sdpa_attention_forward
        elif implementation in (None, "eager"):
            attention_interface = eager_attention_forward
        elif implementation in _KERNELS_WITHOUT_ALIBI:
            raise UserError(
                f"JinaBERT needs the ALiBi bias, which the {implementation!r} attention does not add; "
                "use 'eager', 'sdpa' or an attention function that reads module.alibi_slopes (e.g. 'longembed')"
            )
        else:  # a registered function (e.g. longembed's): it adds the bias from module.alibi_slopes
            attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)

        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            scaling=self.scaling,
            dropout=self.dropout.p if self.training else 0.0,
            **kwargs,
        )
        return attn_output.reshape(*input_shape, -1).contiguous(), attn_weights


class JinaBertSelfOutput(nn.Module):
    """Output projection, then post-LN: LayerNorm(x + dropout(dense(attention)))."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class JinaBertAttention(nn.Module):
    """The attention sub-layer: ``self`` (ALiBi attention) and ``output`` (projection + post-LN)."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.self = JinaBertSelfAttention(config)
        self.output = JinaBertSelfOutput(config)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attn_output, attn_weights = self.self(hidden_states, attention_mask, **kwargs)
        return self.output(attn_output, hidden_states), attn_weights


class JinaBertGLUMLP(nn.Module):
    """GEGLU feed-forward with post-LN (Shazeer 2020; paper 4.1).

    gated_layers: hidden -> 2 * intermediate without bias.  As in Jina's code the *first* half
    goes through the activation and gates the second half: act(h[:, :I]) * h[:, I:].
    """

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.intermediate_size = config.intermediate_size
        self.gated_layers = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.act = GLU_ACTIVATIONS[config.feed_forward_type]()
        self.wo = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        residual = hidden_states
        projected = self.gated_layers(hidden_states)
        gated, non_gated = projected[..., : self.intermediate_size], projected[..., self.intermediate_size :]
        hidden_states = self.dropout(self.act(gated) * non_gated)
        return self.layernorm(self.wo(hidden_states) + residual)


def _activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """transformers' activation ``name`` (``config.hidden_act``), or a ValueError naming it."""
    if name not in ACT2FN:
        raise UserError(f"hidden_act {name!r} is not a transformers activation")
    return ACT2FN[name]


class JinaBertIntermediate(nn.Module):
    """BERT's feed-forward, first half: dense hidden -> intermediate, then ``config.hidden_act``."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = _activation(config.hidden_act)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(hidden_states))


class JinaBertOutput(nn.Module):
    """BERT's feed-forward, second half, with post-LN: LayerNorm(x + dropout(dense(h)))."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class JinaBertLayer(nn.Module):
    """One post-LN block: attention sub-layer, then the feed-forward sub-layer.

    GEGLU/ReGLU under ``mlp``; the "original" (BERT) feed-forward under ``intermediate`` and
    ``output``, as in Jina's remote code and BERT, so a BERT's layer weights load under their own names.
    """

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.attention = JinaBertAttention(config)
        self.glu = config.feed_forward_type != ORIGINAL_FEED_FORWARD
        if self.glu:
            self.mlp = JinaBertGLUMLP(config)
        else:
            self.intermediate = JinaBertIntermediate(config)
            self.output = JinaBertOutput(config)

    def feed_forward(self, attention_output: torch.Tensor) -> torch.Tensor:
        """The feed-forward sub-layer, with its residual and post-LN."""
        if self.glu:
            return self.mlp(attention_output)
        return self.output(self.intermediate(attention_output), attention_output)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attention_output, attn_weights = self.attention(hidden_states, attention_mask, **kwargs)
        return self.feed_forward(attention_output), attn_weights


class JinaBertEncoder(nn.Module):
    """The stack of layers, named ``encoder.layer.N`` as in the checkpoints."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.layer = nn.ModuleList([JinaBertLayer(config) for _ in range(config.num_hidden_layers)])


class JinaBertPreTrainedModel(PreTrainedModel):
    """Weight init and loading rules shared by JinaBERT models."""

    config_class = JinaBertConfig
    base_model_prefix = "bert"  # checkpoints saved from the MLM model prefix keys with "bert."
    _supports_sdpa = True
    _supports_attention_backend = True  # custom registered functions (they must add ALiBi)
    _no_split_modules = ["JinaBertEmbeddings", "JinaBertLayer"]
    _keys_to_ignore_on_load_unexpected = _JINA_UNUSED_KEYS

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, JinaBertSelfAttention):
            # Non-persistent buffer: from_pretrained builds the model on the meta device and
            # never loads it, so it must be recomputed here.
            init.copy_(module.alibi_slopes, model_slopes(module.config))
        elif isinstance(module, JinaBertLMPredictionHead):
            init.zeros_(module.bias)  # a bare Parameter: the generic rules above do not reach it


class JinaBertModel(JinaBertPreTrainedModel):
    """The JinaBERT encoder: token ids -> contextual token states (mean-pool them outside)."""

    def __init__(self, config: JinaBertConfig):
        super().__init__(config)
        self.embeddings = JinaBertEmbeddings(config)
        self.encoder = JinaBertEncoder(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.word_embeddings = value

    def _padding_mask(self, attention_mask: torch.Tensor | None, embeddings: torch.Tensor) -> Any:
        """The padding-only mask for the attention interface, built as BertModel builds it.

        ``create_bidirectional_mask`` returns None (no padding), a 4-D bool mask (sdpa) or a
        4-D float mask (eager).  For an attention name with no mask function registered in
        ``ALL_MASK_ATTENTION_FUNCTIONS`` it would return None and silently drop the padding,
        so such backends get the sdpa-style 4-D bool mask (B, 1, n, n) (an expanded view, no
        n^2 memory), True where a key may be attended to.
        """
        implementation = self.config._attn_implementation
        if (
            attention_mask is not None
            and attention_mask.ndim == 2
            and implementation not in ("eager", "sdpa")
            and implementation not in ALL_MASK_ATTENTION_FUNCTIONS
        ):
            if bool(attention_mask.all()):
                return None
            batch, n = attention_mask.shape
            return attention_mask.to(device=embeddings.device, dtype=torch.bool)[:, None, None, :].expand(
                batch, 1, n, n
            )
        return create_bidirectional_mask(
            config=self.config, inputs_embeds=embeddings, attention_mask=attention_mask
        )

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> BaseModelOutput:
        """Encode a (padded) batch.

        ``attention_mask`` (B, n) marks real tokens with 1, padding with 0.  Extra ``kwargs``
        (e.g. ``longembed_plan=``) reach the attention interface of every layer unchanged.
        Returns ``BaseModelOutput``: ``last_hidden_state`` (B, n, hidden), plus the embedding
        output and every layer's output in ``hidden_states`` and each layer's attention weights
        in ``attentions`` when requested (weights only from the eager implementation).
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise UserError("pass exactly one of input_ids or inputs_embeds")
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if output_attentions is None:
            output_attentions = self.config.output_attentions

        hidden_states = self.embeddings(input_ids, token_type_ids, inputs_embeds)
        mask = self._padding_mask(attention_mask, hidden_states)

        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for layer in self.encoder.layer:
            hidden_states, attn_weights = layer(hidden_states, mask, **kwargs)
            if all_hidden_states is not None:
                all_hidden_states.append(hidden_states)
            if all_attentions is not None:
                all_attentions.append(attn_weights)

        output = BaseModelOutput(
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden_states) if all_hidden_states is not None else None,
            attentions=tuple(all_attentions) if all_attentions is not None else None,
        )
        if return_dict is False:
            return output.to_tuple()
        return output


class JinaBertPredictionHeadTransform(nn.Module):
    """dense -> activation (``config.hidden_act``) -> LayerNorm, before the tied decoder."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = _activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class JinaBertLMPredictionHead(nn.Module):
    """The decoder D of paper eq. (2): transform, then logits over the vocabulary.

    ``decoder.weight`` is the word-embedding matrix and ``decoder.bias`` is ``bias`` (both tied by
    ``JinaBertForMaskedLM._tied_weights_keys``), so the head adds only the transform and one bias.
    """

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.transform = JinaBertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=True)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(hidden_states))


class JinaBertOnlyMLMHead(nn.Module):
    """The ``cls`` module of the checkpoints: only ``predictions`` (no next-sentence head)."""

    def __init__(self, config: JinaBertConfig):
        super().__init__()
        self.predictions = JinaBertLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return self.predictions(sequence_output)


class JinaBertForMaskedLM(JinaBertPreTrainedModel):
    """JinaBERT with the MLM head: the model of pre-training (paper section 4.3).

    ``labels`` (B, n) hold the original token id at masked positions and -100 elsewhere; the loss
    is the cross entropy of eq. (2), averaged over the masked tokens of the batch.
    """

    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }
    # the head is this model's own: only the pooler and old buffers are left unread
    _keys_to_ignore_on_load_unexpected = [k for k in _JINA_UNUSED_KEYS if k != r"^cls\."]

    def __init__(self, config: JinaBertConfig):
        super().__init__(config)
        self.bert = JinaBertModel(config)
        self.cls = JinaBertOnlyMLMHead(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> MaskedLMOutput:
        """Logits (B, n, vocab) for every token, and the MLM loss when ``labels`` are given.

        ``num_items_in_batch`` (passed by transformers' Trainer with gradient accumulation) makes the
        loss the sum over this batch's masked tokens divided by the masked tokens of the whole
        accumulated batch, so every masked token weighs the same.
        """
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            **kwargs,
        )
        logits = self.cls(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            flat_logits = logits.view(-1, self.config.vocab_size).float()
            flat_labels = labels.view(-1).to(logits.device)
            if num_items_in_batch is None:
                loss = nn.functional.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
            else:
                loss = nn.functional.cross_entropy(flat_logits, flat_labels, ignore_index=-100, reduction="sum")
                loss = loss / torch.as_tensor(num_items_in_batch, device=loss.device)
        output = MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )
        if return_dict is False:
            return output.to_tuple()
        return output


AutoModel.register(JinaBertConfig, JinaBertModel, exist_ok=True)
AutoModelForMaskedLM.register(JinaBertConfig, JinaBertForMaskedLM, exist_ok=True)

__all__ = [
    "JinaBertConfig",
    "JinaBertForMaskedLM",
    "JinaBertModel",
    "JinaBertPreTrainedModel",
    "eager_attention_forward",
    "sdpa_attention_forward",
]
