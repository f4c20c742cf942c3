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

    fused = _FLASH_CPU is not None and query.device.type == "cpu" and not observing
    # Rows per block: explicit scores and ALiBi biases are per head; the fused kernel's masks are not.
    per_row = batch * n * (heads if slopes is not None or not fused else 1)
    step = max(1, plan.max_score_elements // per_row)
    k_grouped = apply_rotary(k_raw, *tables.k_grouped) if selfextend else None
    window = w_min = w_max = None
    if selfextend:
        window = tables.window.to(query.device)
        window = torch.where(window > 0, window, torch.full_like(window, n))  # SelfExtend off: all exact
        w_min, w_max = int(window.min()), int(window.max())
        window = window.view(batch, 1, 1, 1)

    def parts(start: int, stop: int) -> list[_Part]:
        """The key ranges that query rows start..stop attend to, each with its own q/k and mask.

        One part for ALiBi and local windows; three for SelfExtend: grouped keys on the left
        (j <= i - w, below stop - w_min), exact keys in the window (|i - j| < w), grouped keys on
        the right (j >= i + w, from start + w_min).  The masks are disjoint and cover every key.
        """
        rows = torch.arange(start, stop, device=query.device)

        def part(q: torch.Tensor, k: torch.Tensor, a: int, b: int, allowed=None) -> _Part:
            rel = rows.unsqueeze(1) - torch.arange(a, b, device=query.device).unsqueeze(0)  # i - j
            keep = allowed(rel) if allowed is not None else None
            if causal:
                keep = rel >= 0 if keep is None else keep & (rel >= 0)
            if local is not None:
                inside = (rel < local) & (rel >= 0) if causal else rel.abs() <= local
                keep = inside if keep is None else keep & inside
            if keep is not None and keep.dim() == 2:
                keep = keep[None, None]
            if bool_mask is not None:
                keep = bool_mask[..., a:b] if keep is None else keep & bool_mask[..., a:b]
            bias = None
            if slopes is not None:  # ALiBi: -m_h |i - j|
                bias = -slopes.to(query.dtype).view(1, heads, 1, 1) * rel.abs().to(query.dtype)
            return _Part(q, k[:, :, a:b], value[:, :, a:b], a, keep, bias)

        q_rows = query[:, :, start:stop]
        if not selfextend:
            return [part(q_rows, key, 0, n)]
        q_left = apply_rotary(q_raw[:, :, start:stop], *_slice_rows(tables.q_left, start, stop))
        q_right = apply_rotary(q_raw[:, :, start:stop], *_slice_rows(tables.q_right, start, stop))
        left_end, right_start = max(0, min(n, stop - w_min)), min(n, max(0, start + w_min))
        lo, hi = max(0, start - w_max + 1), min(n, stop + w_max - 1)
        found = [part(q_rows, key, lo, hi, lambda rel: rel.abs() < window)]
        if left_end > 0:
            found.append(part(q_left, k_grouped, 0, left_end, lambda rel: rel >= window))
        if right_start < n:
            found.append(part(q_right, k_grouped, right_start, n, lambda rel: rel <= -window))
        return found

    def probabilities(start: int, stop: int) -> torch.Tensor:
        """Softmax rows start..stop over all keys, (B, H, stop - start, n), from this block only."""
        scored = [(p, _scores(p, scaling)) for p in parts(start, stop)]
        total = torch.logsumexp(torch.stack([torch.logsumexp(s, -1) for _, s in scored]), 0).unsqueeze(-1)
        probs = query.new_zeros(batch, heads, stop - start, n)
        for p, s in scored:
            probs[..., p.offset : p.offset + s.shape[-1]] += torch.exp(s - total).nan_to_num(0.0)
        return probs

    if observing:
        plan.observer(layer, probabilities)
    out = torch.empty_like(query)
    for start in range(0, n, step):
        stop = min(n, start + step)
        results = [
            _attend_fused(p, scaling) if fused else _attend_explicit(p, scaling) for p in parts(start, stop)
        ]
        out[:, :, start:stop] = _merge(results)
    return out.transpose(1, 2).contiguous(), None


# The fused CPU kernel behind scaled_dot_product_attention, which also returns the log-sum-exp
# needed to merge attention over disjoint key sets (SelfExtend).  Falls back to explicit scores
# where it is missing (other devices, other torch builds).
_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


@dataclass
class _Part:
    """Query rows attending to keys offset..offset + len(key): allowed (bool) and bias (ALiBi)."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    offset: int
    allowed: torch.Tensor | None
    bias: torch.Tensor | None


def _scores(part: _Part, scaling: float) -> torch.Tensor:
    scores = torch.matmul(part.query, part.key.transpose(-1, -2)) * scaling
    if part.bias is not None:
        scores = scores + part.bias
    if part.allowed is not None:
        scores = scores.masked_fill(~part.allowed, float("-inf"))
    return scores


def _attend_explicit(part: _Part, scaling: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, log-sum-exp) of one part from explicit scores; rows with no key give 0, -inf."""
    scores = _scores(part, scaling)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0), part.value)
    return out, lse


def _attend_fused(part: _Part, scaling: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, log-sum-exp) of one part through the fused kernel, with an additive mask."""
    mask = part.bias
    if part.allowed is not None:
        blocked = torch.zeros(part.allowed.shape, dtype=part.query.dtype, device=part.query.device)
        blocked.masked_fill_(~part.allowed, float("-inf"))
        mask = blocked if mask is None else mask + blocked
    if mask is not None:
        rows, keys = part.query.shape[2], part.key.shape[2]
        mask = mask.expand(part.query.shape[0], -1, rows, keys)
    out, lse = _FLASH_CPU(part.query, part.key, part.value, 0.0, False, attn_mask=mask, scale=scaling)
    if part.allowed is not None:  # a row with no allowed key: the kernel reports lse 0, not -inf
        lse = lse.masked_fill(~part.allowed.any(-1).expand_as(lse), float("-inf"))
    return out, lse


def _merge(results: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Combine attention over disjoint key sets: sum of outputs weighted by exp(lse - total)."""
    if len(results) == 1:
        return results[0][0]
    total = torch.logsumexp(torch.stack([lse for _, lse in results]), dim=0)
    out = torch.zeros_like(results[0][0])
    for o, lse in results:
        weight = torch.exp(lse - total).nan_to_num(0.0).unsqueeze(-1)
        out = out + torch.where(weight > 0, o * weight, torch.zeros_like(o))
    return out


def _slice_rows(table: tuple[torch.Tensor, torch.Tensor], start: int, stop: int):
    cos, sin = table
    return cos[:, start:stop], sin[:, start:stop]


def _local_window(module: torch.nn.Module, causal: bool) -> int | None:
    """The sliding-window size of a local attention layer, in transformers' mask semantics.

    Bidirectional (ModernBERT): a token sees keys with |i - j| <= config.sliding_window.
    Causal (Mistral-style): keys with 0 <= i - j < sliding_window.
    """
    if getattr(module, "sliding_window", None) is None:
        return None
    return int(module.config.sliding_window if not causal else module.sliding_window)


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
