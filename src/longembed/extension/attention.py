"""longembed's attention function, registered with ``transformers.AttentionInterface`` when a model loads.

A model instance opts in with ``model.set_attn_implementation("longembed")``; nothing else in
the process changes.  Each forward call receives an ``AttentionPlan`` through the model's
keyword arguments (``longembed_plan=...``), which transformers passes down to every attention
layer.  The plan carries what differs per document: the padding mask, the logit multiplier
(attention scaling x max(1, log n / log Lo), and TempScale's 1 / tau) and, for RoPE models,
the per-document rotary tables (PI, GP, NTK, YaRN, SelfExtend).  ALiBi slopes come from the
attention module itself (``module.alibi_slopes``, see ``longembed.models.jina_bert``).

Memory grows linearly with length and time stays close to plain attention's.  Plain attention
goes to torch's fused kernel, which never materializes the score matrix.  SelfExtend, ALiBi and
local windows go through fused kernels too (``longembed.extension.fused``): SelfExtend as
triangles and bands of keys merged by their log-sum-exp, ALiBi with its bias as a strided view of
one vector per head, local windows as row blocks over their band of keys.  What those paths do not
cover (padding that is not at the end, SelfExtend where no kernel returns the log-sum-exp, and
combinations no model uses) runs from explicit scores (``_ExplicitAttention``), in query blocks of
at most ``AttentionPlan.max_score_elements`` scores; no n x n matrix per head is materialized.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import torch
import torch.nn.functional as F

from longembed.extension.fused import LseKernel, alibi_attention, local_attention, selfextend_attention
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
    key_lengths: list[int] | None = field(default=None, init=False, repr=False)  # [] if not right-padded


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

    tables = plan.rotary
    if isinstance(tables, dict):  # one set per layer type (ModernBERT's local and global layers)
        tables = tables[module.config.layer_types[module.layer_idx]]
    query, key, q_raw, k_raw = _rotate_and_scale(query, key, tables, plan.logit_scale)
    causal = bool(getattr(module, "is_causal", False))
    slopes = getattr(module, "alibi_slopes", None)
    local = _local_window(module, causal)
    window = _selfextend_window(tables, n, query.device)
    explicit = _ExplicitAttention(
        query, key, value, q_raw, k_raw, tables if window is not None else None, window, slopes, causal, local,
        key_mask, scaling,
    )
    if plan.observer is not None and layer == plan.observe_layer:
        plan.observer(layer, explicit.probabilities)
    if window is not None and local is not None and local < int(window.min()) + causal:
        window = None  # every key of the local window lies inside SelfExtend's exact window

    if slopes is None and window is None and local is None:
        return _plain(query, key, value, key_mask, causal, scaling, plan.max_score_elements), None
    if plan.key_lengths is None:  # the same for every layer of this forward
        plan.key_lengths = _prefix_lengths(key_mask, batch, n)
    lengths = plan.key_lengths or None
    lse_kernel = _lse_kernel(query.device)
    if (
        lengths is None  # padding that is not at the end
        or (window is not None and (local is not None or lse_kernel is None))
        or (slopes is not None and (causal or local is not None or window is not None))  # no model has these
    ):
        out = explicit.attend(plan.max_score_elements)
    elif window is not None:
        out = _selfextend(explicit, tables, lengths, lse_kernel)
    elif slopes is not None:
        out = alibi_attention(query, key, value, slopes, lengths, scaling, plan.max_score_elements)
    else:
        out = local_attention(query, key, value, local, causal, lengths, scaling)
    return out.transpose(1, 2).contiguous(), None


def _rotate_and_scale(
    query: torch.Tensor, key: torch.Tensor, tables: RotaryTables | None, logit_scale: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(query, key) rotated by the method's tables, and (q_raw, k_raw) unrotated (SelfExtend rotates
    them again with its grouped positions); both queries times the per-document logit multiplier."""
    q_raw, k_raw = query, key
    if tables is not None:
        query = apply_rotary(query, tables.cos, tables.sin)
        key = apply_rotary(key, tables.cos, tables.sin)
    if logit_scale is not None:
        multiplier = logit_scale.to(query.dtype).view(query.shape[0], 1, 1, 1)
        query, q_raw = query * multiplier, q_raw * multiplier
    return query, key, q_raw, k_raw


def _selfextend_window(tables: RotaryTables | None, n: int, device: torch.device) -> torch.Tensor | None:
    """SelfExtend's w per document (n where it is off: every position exact), or None when no
    document of the batch uses it."""
    if tables is None or tables.window is None or not bool((tables.window > 0).any()):
        return None
    window = tables.window.to(device=device, dtype=torch.long)
    return torch.where(window > 0, window, torch.full_like(window, n))


def _selfextend(
    explicit: _ExplicitAttention, tables: RotaryTables, lengths: list[int], lse_kernel: LseKernel
) -> torch.Tensor:
    """SelfExtend through the fused kernels: exact and grouped rotations of the same q and k."""
    queries = {
        "exact": explicit.query,
        "left": apply_rotary(explicit.q_raw, *tables.q_left),
        "right": apply_rotary(explicit.q_raw, *tables.q_right),
    }
    keys = {"exact": explicit.key, "grouped": explicit.k_grouped}
    windows = [int(w) for w in tables.window.tolist()]
    return selfextend_attention(
        queries, keys, explicit.value, lengths, windows, explicit.causal, explicit.scaling, lse_kernel
    )


def _plain(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor | None,
    causal: bool,
    scaling: float,
    max_score_elements: int,
) -> torch.Tensor:
    """Plain attention, (B, n, H, d), through torch's fused kernel.

    The kernel never materializes the score matrix when the mask is a (B, 1, 1, n) key mask or
    causality is implicit.  Only causal attention over a padded batch needs an explicit
    (rows x n) mask, so it goes in query blocks.
    """
    batch, heads, n, _ = query.shape
    bool_mask = None if key_mask is None or bool(key_mask.all()) else key_mask[:, None, None, :]
    if not causal or bool_mask is None:
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=bool_mask, is_causal=causal, scale=scaling
        )
        return out.transpose(1, 2).contiguous()
    block = max(1, max_score_elements // (batch * heads * n))
    outs = []
    for start in range(0, n, block):
        stop = min(n, start + block)
        mask = _causal_block(start, stop, n, query.device)[None, None] & bool_mask
        outs.append(
            F.scaled_dot_product_attention(query[:, :, start:stop], key, value, attn_mask=mask, scale=scaling)
        )
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous()


# The fused CPU kernel behind scaled_dot_product_attention, which also returns the log-sum-exp
# SelfExtend needs to merge attention over disjoint key sets.  It is a private op of torch's CPU
# build; where it is missing (other devices, other builds), SelfExtend uses ``_ExplicitAttention``.
_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _lse_kernel(device: torch.device) -> LseKernel | None:
    """The (output, log-sum-exp) kernel for tensors on ``device``, or None where there is none."""
    flash = _FLASH_CPU
    if flash is None or device.type != "cpu":
        return None

    def kernel(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool,
        scale: float,
        mask: torch.Tensor | None,
    ):
        return flash(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)

    return kernel


def _prefix_lengths(key_mask: torch.Tensor | None, batch: int, n: int) -> list[int]:
    """Each document's key count L when its real keys are 0..L - 1 (right padding), else []."""
    if key_mask is None:
        return [n] * batch
    lengths = key_mask.sum(-1)
    prefix = torch.arange(n, device=key_mask.device).unsqueeze(0) < lengths.unsqueeze(1)
    return [int(x) for x in lengths.tolist()] if bool((prefix == key_mask).all()) else []


class _ExplicitAttention:
    """Attention of one layer from explicit scores, rows start..stop at a time.

    The definition every fused path must equal (and the fallback where none applies): for query
    i and key j, the score is q_i . k_j * scaling with exact positions, or with SelfExtend's
    grouped positions where |i - j| >= w (left rotation for j < i, right for j > i); ALiBi adds
    -m_h |i - j|; keys are dropped by padding, causality (j > i) and a local window.  Memory: at
    most ``max_score_elements`` scores (x3 for SelfExtend) at a time.
    """

    def __init__(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        q_raw: torch.Tensor,
        k_raw: torch.Tensor,
        tables: RotaryTables | None,
        window: torch.Tensor | None,
        slopes: torch.Tensor | None,
        causal: bool,
        local: int | None,
        key_mask: torch.Tensor | None,
        scaling: float,
    ):
        self.query, self.key, self.value, self.q_raw = query, key, value, q_raw
        self.tables, self.slopes, self.causal, self.local = tables, slopes, causal, local
        self.key_mask, self.scaling = key_mask, scaling
        self.k_raw = k_raw
        self.window = window.view(-1, 1, 1, 1) if window is not None else None

    @cached_property
    def k_grouped(self) -> torch.Tensor:
        return apply_rotary(self.k_raw, *self.tables.k_grouped)

    def scores(self, start: int, stop: int) -> torch.Tensor:
        """Scores (B, H, stop - start, n) of rows start..stop, -inf where a key is not allowed."""
        q = self.query[:, :, start:stop]
        n = self.key.shape[2]
        rel = torch.arange(start, stop, device=q.device)[:, None] - torch.arange(n, device=q.device)  # i - j
        scores = torch.matmul(q, self.key.transpose(-1, -2)) * self.scaling
        if self.tables is not None:
            raw = self.q_raw[:, :, start:stop]
            grouped = self.k_grouped.transpose(-1, -2)
            left = torch.matmul(apply_rotary(raw, *_slice_rows(self.tables.q_left, start, stop)), grouped)
            right = torch.matmul(apply_rotary(raw, *_slice_rows(self.tables.q_right, start, stop)), grouped)
            scores = torch.where(rel >= self.window, left * self.scaling, scores)
            scores = torch.where(rel <= -self.window, right * self.scaling, scores)
        if self.slopes is not None:  # ALiBi: -m_h |i - j|
            scores = scores - self.slopes.to(scores.dtype).view(1, -1, 1, 1) * rel.abs().to(scores.dtype)
        allowed = torch.ones_like(rel, dtype=torch.bool)
        if self.causal:
            allowed &= rel >= 0
        if self.local is not None:
            allowed &= (rel < self.local) & (rel >= 0) if self.causal else rel.abs() <= self.local
        allowed = allowed[None, None]
        if self.key_mask is not None:
            allowed = allowed & self.key_mask[:, None, None, :]
        return scores.masked_fill(~allowed, float("-inf"))

    def probabilities(self, start: int, stop: int) -> torch.Tensor:
        """Softmax rows start..stop over all keys, (B, H, stop - start, n); 0 for a row with no key."""
        return torch.softmax(self.scores(start, stop), dim=-1).nan_to_num(0.0)

    def attend(self, max_score_elements: int) -> torch.Tensor:
        """The attention output (B, H, n, d), in query blocks of at most ``max_score_elements`` scores."""
        batch, heads, n, _ = self.query.shape
        per_row = batch * heads * n * (3 if self.tables is not None else 1)
        step = max(1, max_score_elements // per_row)
        out = torch.empty_like(self.query)
        for start in range(0, n, step):
            stop = min(n, start + step)
            out[:, :, start:stop] = torch.matmul(self.probabilities(start, stop), self.value)
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


def register_attention_function() -> str:
    """Register :func:`longembed_attention` (and its mask) with transformers under ``ATTENTION_NAME``.

    Called when a model is loaded, not when this module is imported: transformers' attention
    registries live in ``modeling_utils``, whose import (with torchao and torch.distributed behind
    it) costs more than a fully cached benchmark rerun does.  Registering again is harmless.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, longembed_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, padding_only_mask)
    return ATTENTION_NAME
