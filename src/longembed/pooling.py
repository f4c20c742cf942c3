"""Pooling token states into one vector: mean over real tokens, the first token, or the last."""

from __future__ import annotations

import torch

from longembed.errors import UserError


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """(B, n, d) token states and (B, n) mask of real tokens -> (B, d).

    "mean" matches sentence-transformers' Pooling (padding excluded), "cls" takes position 0 and
    "last" the last real token (decoder embedders such as E5-Mistral and Qwen3-Embedding, whose
    tokenizer appends the EOS token that is pooled), wherever the padding is: on the right or, as
    Qwen3-Embedding's tokenizer pads, on the left.
    """
    if mode == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "last":
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last_real_index(mask)]
    raise UserError(f"unknown pooling {mode!r}; choose mean, cls or last")


def last_real_index(mask: torch.Tensor) -> torch.Tensor:
    """(B, n) mask of real tokens -> (B,) index of each row's last real token (0 for a row without one).

    The highest index whose mask is set, so left, right or no padding all give the same token
    (as sentence-transformers' lasttoken pooling finds it).
    """
    positions = torch.arange(mask.shape[1], device=mask.device)
    return (positions * mask.long()).amax(dim=1)
