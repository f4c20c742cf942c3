"""longembed's attention function, registered with ``transformers.AttentionInterface``.

A model instance opts in with ``model.set_attn_implementation("longembed")``; nothing else in
the process changes.  Each forward call receives an ``AttentionPlan`` through the model's
keyword arguments (``longembed_plan=...``), which transformers passes down to every attention
layer.  The plan carries what differs per document: the padding mask, the logit multiplier
(attention scaling x max(1, log n / log Lo), and TempScale's 1 / tau) and, for RoPE models,
the per-document rotary tables (PI, GP, NTK, YaRN, SelfExtend).  ALiBi slopes come from the
attention module itself (``module.alibi_slopes``, see ``longembed.models.jina_bert``).

Memory grows linearly with length.  Plain attention goes to torch's fused kernel, which never
materializes the score matrix.  Attention that needs explicit scores (ALiBi biases, SelfExtend's
merged scores, local windows) works in query blocks when the full score tensor would exceed
``AttentionPlan.max_score_elements``, so at most (batch x heads x block x n) scores exist at a
time; no n x n matrix per head is ever materialized.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

from longembed.extension.rope import RotaryTables, apply_rotary

ATTENTION_NAME = "longembed"

# Attention observers get the layer index and a function (start, stop) -> probabilities
# (B, H, stop - start, n) that recomputes rows of that layer's attention matrix on demand.
AttentionObserver = Callable[[int, Callable[[int, int], torch.Tensor]], None]


@dataclass
class AttentionPlan:
    """Per-batch instructions for the attention function.

    key_mask:      (B, n) bool, True for real tokens (padding is False).
    logit_scale:   (B,) multiplier on the attention logits, or None for 1.
    rotary:        per-document cos/sin tables for RoPE models (the model runs with
                   position_ids = 0, so q and k arrive unrotated), or None; a dict by layer
                   type for models whose layers differ (ModernBERT's local/global layers).
    max_score_elements: above this many scores (B x H x n_q x n) queries are blocked.
    observer:      optional hook called at layer ``observe_layer`` (used to measure sigma_a).
    """

    key_mask: torch.Tensor | None = None
    logit_scale: torch.Tensor | None = None
    rotary: RotaryTables | dict[str, RotaryTables] | None = None
    max_score_elements: int = 1 << 24
    observer: AttentionObserver | None = None
    observe_layer: int | None = None
    layers_seen: int = field(default=0, init=False)


def _expand_kv(x: torch.Tensor, heads: int) -> torch.Tensor:
    """Repeat grouped key/value heads (GQA) to the number of query heads."""
    kv_heads = x.shape[1]
    return x if kv_heads == heads else x.repeat_interleave(heads // kv_heads, dim=1)


def _key_mask_from(attention_mask: torch.Tensor | None, batch: int, n: int) -> torch.Tensor | None:
    """Recover a (B, n) key padding mask from what the model passed (None, bool or float 4D)."""
    if attention_mask is None:
        return None
    m = attention_mask
    if m.dtype != torch.bool:
        m = m > torch.finfo(m.dtype).min / 2
    if m.dim() == 2:
        return m
    return m[:, 0, -1, :] if m.shape[2] > 1 else m[:, 0, 0, :]


def longembed_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    longembed_plan: AttentionPlan | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Scaled dot-product attention with per-document scaling, RoPE methods and ALiBi.

    query (B, H, n, d), key/value (B, H_kv, n, d).  Returns (B, n, H, d) as transformers expects.
    """
    plan = longembed_plan or AttentionPlan()
    batch, heads, n, head_dim = query.shape
    scaling = head_dim**-0.5 if scaling is None else scaling
    key, value = _expand_kv(key, heads), _expand_kv(value, heads)
    key_mask = plan.key_mask if plan.key_mask is not None else _key_mask_from(attention_mask, batch, n)
    layer = plan.layers_seen
    plan.layers_seen += 1

    q_raw, k_raw = query, key
    tables = plan.rotary
    if isinstance(tables, dict):
        tables = tables[module.config.layer_types[module.layer_idx]]
    if tables is not None:
        query = apply_rotary(query, tables.cos, tables.sin)
        key = apply_rotary(key, tables.cos, tables.sin)
    if plan.logit_scale is not None:
        multiplier = plan.logit_scale.to(query.dtype).view(batch, 1, 1, 1)
        query, q_raw = query * multiplier, q_raw * multiplier

    causal = bool(getattr(module, "is_causal", False))
    slopes = getattr(module, "alibi_slopes", None)
    selfextend = tables is not None and tables.window is not None and bool((tables.window > 0).any())
    local = _local_window(module, causal)
    observing = plan.observer is not None and layer == plan.observe_layer
    bool_mask = None if key_mask is None or bool(key_mask.all()) else key_mask[:, None, None, :]

    block = n
    if batch * heads * n * n > plan.max_score_elements:
        block = max(1, plan.max_score_elements // (batch * heads * n))

    if slopes is None and not selfextend and local is None and not observing:
        # Plain attention: torch's fused kernel, which never materializes the score matrix when
        # the mask is a (B, 1, 1, n) key mask or causality is implicit.  Only causal attention
        # over a padded batch needs an explicit (rows x n) mask, so it goes in query blocks.
        if not causal or bool_mask is None:
            out = F.scaled_dot_product_attention(
                query, key, value, attn_mask=bool_mask, is_causal=causal, scale=scaling
            )
            return out.transpose(1, 2).contiguous(), None
        outs = []
        for start in range(0, n, block):
            stop = min(n, start + block)
            mask = _causal_block(start, stop, n, query.device)[None, None] & bool_mask
            outs.append(
                F.scaled_dot_product_attention(
                    query[:, :, start:stop], key, value, attn_mask=mask, scale=scaling
                )
            )
        return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None

    key_pos = torch.arange(n, device=query.device)
    k_t = key.transpose(-1, -2)
    if selfextend:
        k_grouped = apply_rotary(k_raw, *tables.k_grouped).transpose(-1, -2)
        window = tables.window.to(query.device)
        window = torch.where(window > 0, window, torch.full_like(window, n))  # SelfExtend off: all exact
        w_min, w_max = int(window.min()), int(window.max())
        window = window.view(batch, 1, 1, 1)

    def selfextend_scores(start: int, stop: int, rel: torch.Tensor) -> torch.Tensor:
        """SelfExtend scores for query rows start..stop, each branch only over the keys it serves.

        Grouped left keys (j <= i - w) lie below stop - w_min, grouped right keys (j >= i + w)
        at or above start + w_min, exact ones within (start - w_max, stop + w_max); keys in none
        of the first two ranges are inside every row's window.  Cost ~ n + 2w per row, not 3n.
        """
        scores = torch.empty(batch, heads, stop - start, n, dtype=query.dtype, device=query.device)
        left_end, right_start = max(0, min(n, stop - w_min)), min(n, max(0, start + w_min))
        if left_end > 0:
            q_left = _rows(q_raw, tables.q_left, start, stop)
            scores[..., :left_end] = torch.matmul(q_left, k_grouped[..., :left_end]) * scaling
        if right_start < n:
            q_right = _rows(q_raw, tables.q_right, start, stop)
            right = torch.matmul(q_right, k_grouped[..., right_start:]) * scaling
            overlap = max(0, left_end - right_start)
            if overlap:
                both = slice(right_start, left_end)
                scores[..., both] = torch.where(rel[:, both] > 0, scores[..., both], right[..., :overlap])
            scores[..., right_start + overlap :] = right[..., overlap:]
        lo, hi = max(0, start - w_max + 1), min(n, stop + w_max - 1)
        exact = torch.matmul(query[:, :, start:stop], k_t[..., lo:hi]) * scaling
        scores[..., lo:hi] = torch.where(rel[:, lo:hi].abs() < window, exact, scores[..., lo:hi])
        return scores

    def probabilities(start: int, stop: int) -> torch.Tensor:
        """Softmax rows start..stop, (B, H, stop - start, n), built from this block only."""
        rel = torch.arange(start, stop, device=query.device).unsqueeze(1) - key_pos.unsqueeze(0)  # i - j
        if selfextend:
            scores = selfextend_scores(start, stop, rel)
        else:
            scores = torch.matmul(query[:, :, start:stop], k_t) * scaling
        if slopes is not None:
            scores = scores - slopes.to(scores.dtype).view(1, heads, 1, 1) * rel.abs().to(scores.dtype)
        if bool_mask is not None:
            scores = scores.masked_fill(~bool_mask, float("-inf"))
        if causal:
            scores = scores.masked_fill(rel < 0, float("-inf"))
        if local is not None:  # local (sliding-window) attention layers
            outside = (rel >= local) | (rel < 0) if causal else rel.abs() > local
            scores = scores.masked_fill(outside, float("-inf"))
            # a padding query whose whole window is padding has no key: give it zeros, not NaN
            return torch.softmax(scores, dim=-1).nan_to_num(0.0)
        return torch.softmax(scores, dim=-1)

    if observing:
        plan.observer(layer, probabilities)
    out = torch.empty_like(query)
    for start in range(0, n, block):
        stop = min(n, start + block)
        out[:, :, start:stop] = torch.matmul(probabilities(start, stop), value)
    return out.transpose(1, 2).contiguous(), None


def _local_window(module: torch.nn.Module, causal: bool) -> int | None:
    """The sliding-window size of a local attention layer, in transformers' mask semantics.

    Bidirectional (ModernBERT): a token sees keys with |i - j| <= config.sliding_window.
    Causal (Mistral-style): keys with 0 <= i - j < sliding_window.
    """
    if getattr(module, "sliding_window", None) is None:
        return None
    return int(module.config.sliding_window if not causal else module.sliding_window)


def _rows(
    q_raw: torch.Tensor, table: tuple[torch.Tensor, torch.Tensor], start: int, stop: int
) -> torch.Tensor:
    cos, sin = table
    return apply_rotary(q_raw[:, :, start:stop], cos[:, start:stop], sin[:, start:stop])


def _causal_block(start: int, stop: int, n: int, device: torch.device) -> torch.Tensor:
    i = torch.arange(start, stop, device=device).unsqueeze(1)
    return torch.arange(n, device=device).unsqueeze(0) <= i


def padding_only_mask(
    batch_size: int,
    q_length: int,
    kv_length: int,
    attention_mask: torch.Tensor | None = None,
    **kwargs,
) -> torch.Tensor | None:
    """Mask function for the "longembed" implementation: the (B, 1, 1, n) key padding mask only.

    transformers would otherwise build a (B, 1, n, n) mask; causality and every bias are applied
    block by block inside ``longembed_attention`` instead, keeping memory linear in n.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    return attention_mask[:, -kv_length:].bool()[:, None, None, :]


AttentionInterface.register(ATTENTION_NAME, longembed_attention)
AttentionMaskInterface.register(ATTENTION_NAME, padding_only_mask)
