"""Pooling token states into one vector: mean over real tokens, the first token, or the last."""

from __future__ import annotations

import torch


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """(B, n, d) token states and (B, n) mask of real tokens -> (B, d).

    "mean" matches sentence-transformers' Pooling (padding excluded), "cls" takes position 0 and
    "last" the last real token (decoder embedders such as E5-Mistral).
    """
    if mode == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "last":
        last = mask.long().sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    raise ValueError(f"unknown pooling {mode!r}; choose mean, cls or last")
