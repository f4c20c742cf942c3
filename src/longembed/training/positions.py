"""What position tuning adds to contrastive training: PoSE position ids and the frozen original rows.

LongEmbed, Appendix B: a training text x_0..x_{n-1} (n <= Lo) gets position ids {u, ..., u + n - 1}
with u drawn for every text from U{0, ..., Lt - Lo}, so short training texts exercise every part of
the Lt-row table at the cost of short training.  Section 4.3 / Figure 4 (right): only the added rows
learn; the original model, and the original rows inside the extended table, stay frozen.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from longembed.errors import UserError
from longembed.training.contrastive import SentenceTransformerDataCollator


def pose_position_ids(
    attention_mask: torch.Tensor,
    target_length: int,
    original_length: int,
    offset: int = 0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(B, n) int64 ids: offset + u_b + (0..n-1) for row b, u_b ~ U{0..Lt-Lo}; padding gets ``offset``.

    Rows are right-padded (``attention_mask`` 1 then 0), as sentence-transformers' tokenizers pad.
    """
    batch, n = attention_mask.shape
    if n > original_length:
        raise UserError(f"PoSE training texts must have at most Lo={original_length} tokens, got {n}")
    u = torch.randint(0, target_length - original_length + 1, (batch, 1), generator=generator)
    ids = u + torch.arange(n).unsqueeze(0)
    ids = torch.where(attention_mask.bool().cpu(), ids, torch.zeros_like(ids))
    return ids + offset


@dataclass
class PoseDataCollator(SentenceTransformerDataCollator):
    """sentence-transformers' collator plus ``<column>_position_ids`` drawn by :func:`pose_position_ids`.

    The trainer hands every ``<column>_*`` feature to the model, and BERT-style models take
    ``position_ids`` as an input: PoSE needs no change to the model or the trainer.

    The draws of batch ``i`` (counted from the start of the run) come from a generator seeded with
    (``seed``, ``i``), not from one generator carried from batch to batch: a resumed run, which starts
    a fresh collator, sets ``batches_drawn`` to the batches its checkpoint trained (:meth:`skip_to`) and
    draws what the uninterrupted run drew (a carried generator restarted at batch 0's draws, so a
    killed and resumed ``tune`` ended 3.9e-4 away from an uninterrupted one, issue 51).
    """

    target_length: int = 0
    original_length: int = 0
    position_offset: int = 0
    seed: int = 0
    batches_drawn: int = field(default=0, repr=False)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().__call__(features)
        generator = torch.Generator().manual_seed(batch_seed(self.seed, self.batches_drawn))
        self.batches_drawn += 1
        for key in [k for k in batch if k.endswith("_attention_mask")]:
            column = key[: -len("attention_mask")]
            batch[f"{column}position_ids"] = pose_position_ids(
                batch[key], self.target_length, self.original_length, self.position_offset, generator
            )
        return batch

    def skip_to(self, batches_trained: int) -> None:
        """Continue a run whose checkpoint trained ``batches_trained`` batches: the next call draws batch
        ``batches_trained``'s positions (batches skipped on resume are never collated)."""
        self.batches_drawn = batches_trained


def batch_seed(seed: int, batch: int) -> int:
    """The seed of batch ``batch``'s PoSE draws in a run seeded ``seed`` (a 63-bit hash of both)."""
    digest = hashlib.sha256(f"longembed-pose:{seed}:{batch}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def freeze_all_but_new_rows(model: nn.Module, kept_rows: torch.Tensor, offset: int = 0) -> nn.Parameter:
    """Freeze every parameter of a BERT-style model but its position table, and in that table the rows
    that are the original vectors (``kept_rows``, a bool mask over positions; the first ``offset``
    rows, a fairseq padding block, are frozen too).  Returns the table.

    Frozen rows get an exactly-zero gradient (a hook on the table), so Adam leaves them bit-identical
    (its moments stay 0) as long as weight decay is 0 for the table: decoupled weight decay would
    shrink every row, frozen or not.
    """
    table = model.embeddings.position_embeddings.weight
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    table.requires_grad_(True)
    learnable = torch.cat([torch.zeros(offset, dtype=torch.bool), ~kept_rows.bool()])
    if learnable.shape[0] != table.shape[0]:
        raise UserError(f"row mask covers {learnable.shape[0]} rows, the table has {table.shape[0]}")
    mask = learnable.to(table.dtype).unsqueeze(1)
    table.register_hook(lambda grad: grad * mask.to(grad.device, grad.dtype))
    return table
