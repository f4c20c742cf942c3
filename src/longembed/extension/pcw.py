"""Parallel context windows (PCW): split a long input into Lo-token windows (LongEmbed 4.2).

Windows are cut from token ids, never decoded and re-tokenized.  They do not overlap, except the
last one, which is aligned to the end of the document so that it is full.  Every window is
wrapped in the model's special tokens and carries the prompt (e.g. "search_document: "), so each
one looks to the model like an ordinary input.  The document embedding is the mean of the
window embeddings (:func:`mean_over_windows`).
"""

from __future__ import annotations

import torch

from longembed.errors import UserError


def window_spans(n_content: int, window: int, overlap: int = 0) -> list[tuple[int, int]]:
    """(start, stop) spans of content tokens: windows every ``window - overlap`` tokens (PCW: no
    overlap), the last one end-aligned."""
    if window <= 0:
        raise UserError(f"window must be positive, got {window}")
    if not 0 <= overlap < window:
        raise UserError(f"overlap must be in [0, {window}), got {overlap}")
    if n_content <= window:
        return [(0, n_content)]
    spans = [(start, start + window) for start in range(0, n_content - window, window - overlap)]
    spans.append((n_content - window, n_content))
    return spans


def split_into_windows(
    head: list[int], prompt: list[int], content: list[int], tail: list[int], length: int
) -> list[list[int]]:
    """Token-id windows of at most ``length`` ids each: head + prompt + content window + tail."""
    room = length - len(head) - len(prompt) - len(tail)
    if room <= 0:
        raise UserError(f"the prompt ({len(prompt)} tokens) leaves no room in a {length}-token window")
    return [head + prompt + content[a:b] + tail for a, b in window_spans(len(content), room)]


def mean_over_windows(per_sequence: torch.Tensor, owners: list[int], n_texts: int) -> torch.Tensor:
    """(n_texts, ...) means of the rows of ``per_sequence`` that belong to each text (``owners``);
    the identity when every text is one sequence."""
    if len(owners) == n_texts:
        return per_sequence
    index = torch.tensor(owners)
    sums = torch.zeros(n_texts, *per_sequence.shape[1:], dtype=per_sequence.dtype).index_add_(0, index, per_sequence)
    counts = torch.bincount(index, minlength=n_texts).clamp(min=1).view(-1, *([1] * (per_sequence.dim() - 1)))
    return sums / counts
