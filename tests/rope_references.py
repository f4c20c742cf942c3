"""Independent references for RoPE extension methods, shared by the tests of every RoPE family
(tests/extension/test_extension_references.py, tests/models/test_qwen3.py): the model rebuilt with
Hugging Face's own rope types, and SelfExtend as naive attention on its relative positions."""

from __future__ import annotations

import torch
from conftest import LO
from transformers import AutoConfig, AutoModel

S = 4  # scale factor: Lt = 4 * Lo, s = ceil(Lt / Lo) = 4
LT = S * LO
ATOL = 1e-5


def rope_variant(folder, **rope_parameters) -> torch.nn.Module:
    """The model loaded with its rope parameters updated by ``rope_parameters`` (HF's own rope types)."""
    config = AutoConfig.from_pretrained(folder)
    config.rope_parameters = {**config.rope_parameters, **rope_parameters}
    return AutoModel.from_pretrained(folder, config=config).eval()


def rope_theta(folder) -> float:
    return float(AutoConfig.from_pretrained(folder).rope_parameters["rope_theta"])


def selfextend_relative(n: int, g: int, w: int) -> torch.Tensor:
    """SelfExtend relative positions (Jin et al. 2024), both directions: i - j when |i - j| < w, else
    the grouped distance floor(i/g) - floor(j/g) moved away from zero by w - floor(w/g)."""
    i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
    grouped = i // g - j // g + torch.sign(i - j) * (w - w // g)
    return torch.where((i - j).abs() < w, i - j, grouped)


def naive_selfextend(rel: torch.Tensor, inv_freq: torch.Tensor, causal: bool):
    """Attention function: softmax_j(<R(rel_ij) q_i, k_j> * scaling) v_j on unrotated q, k (rotate-half)."""
    angles = rel.unsqueeze(-1).float() * inv_freq  # (n, n, d/2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        groups = query.shape[1] // key.shape[1]  # grouped-query attention: each kv head serves `groups` heads
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
        half = query.shape[-1] // 2
        q_half = torch.cat((-query[..., half:], query[..., :half]), -1)
        rotated = query.unsqueeze(3) * cos + q_half.unsqueeze(3) * sin  # (B, H, n, n, d): R(rel_ij) q_i
        scores = (rotated * key.unsqueeze(2)).sum(-1) * scaling
        if causal:
            n = scores.shape[-1]
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return (torch.softmax(scores, -1) @ value).transpose(1, 2).contiguous(), None

    return attention
