"""Batching by length under a token budget.

Sorting inputs by length and filling each batch up to a padded-token budget keeps padding, and
so wasted compute, small on mixed-length corpora; results are returned in input order.  Batch
composition never changes a text's embedding (see ``encoder.py``), only the speed.
"""

from __future__ import annotations

from collections.abc import Sequence

from longembed.errors import UserError

#: An item joins a batch only if the batch's longest input is at most this many times its length:
#: padding a 50-token input to a 4k-token batch would cost a whole 4k-token forward for nothing.
MAX_PADDING_RATIO = 2.0


def length_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int, max_padding_ratio: float = MAX_PADDING_RATIO
) -> list[list[int]]:
    """Indices grouped into batches, longest first: at most ``batch_size`` items and at most
    ``max_tokens`` padded tokens (items x longest) per batch, and no item padded to more than
    ``max_padding_ratio`` times its length; an item longer than the budget gets a batch of its own.
    """
    if batch_size < 1 or max_tokens < 1:
        raise UserError(f"batch_size and max_tokens must be positive, got {batch_size}, {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]
        full = len(current) == batch_size or longest * (len(current) + 1) > max_tokens
        if current and (full or longest > max_padding_ratio * lengths[i]):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
