"""What ``longembed tune`` trains the added position rows for (``--objective contrastive|distill|both``).

- ``contrastive`` (LongEmbed, Appendix B): InfoNCE on the pairs, every text at PoSE positions
  (``training.contrastive.info_nce_loss``).
- ``distill``: self-distillation of the original model's own vector.  A training text x of n <= Lo
  tokens is embedded twice by the same network: at its PoSE rows u..u+n-1 of the extended table
  (v_pose), and at the rows that hold the original positions 0..n-1 (v_orig: rows 0, s, 2s, ... for
  PI, 0..n-1 for RP), which is exactly how the original model embeds x, since those rows are frozen
  copies of its table.  The loss is the mean over texts of 1 - cos(v_pose, v_orig), with v_orig
  computed without gradient and without dropout.  Why this target: a long input reaches the new
  rows, and the only thing a new row has to do is let the model read the text placed on it as the
  original model reads it.  Here every text teaches that directly, with no labels, on every row
  PoSE reaches; InfoNCE teaches it only through whatever the pairs' ranking reveals, and at the
  scale run here (150 steps of 32 pairs) tuned PI tied plain PI.  The issue's other suggestion,
  the teacher's mean over the Lo-token windows of a long text, makes the long vector a
  chunk average, close to what PCW computes (each window read alone, one mean over all tokens), and PCW scored below PI on passkey here (8.5 against
  34.3 at 200 queries), so it was not chosen as the target.
- ``both``: InfoNCE + ``distill_weight`` x the distillation term, on the same forward pass.

Every text of a pair row (query, positive, negatives) is a distillation text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from longembed.errors import UserError
from longembed.training.config import TUNE_OBJECTIVES
from longembed.training.contrastive import SentenceTransformer, info_nce_loss

try:  # the ``training`` extra (``contrastive.require_training_extra`` says what to install)
    from sentence_transformers.base.losses.merged_forward import embed_columns
except ImportError:  # pragma: no cover - exercised only without the extra
    embed_columns = None  # type: ignore[assignment]


def original_position_ids(attention_mask: torch.Tensor, original_rows: torch.Tensor, offset: int) -> torch.Tensor:
    """(B, n) ids of the extended table's rows that hold the original positions 0..n-1 (``original_rows``:
    their row indices, in order, without ``offset``); padding gets ``offset``, as PoSE's ids do."""
    n = attention_mask.shape[1]
    if n > len(original_rows):
        raise UserError(f"a text of {n} tokens is longer than the {len(original_rows)} original positions")
    rows = original_rows[:n].to(attention_mask.device).unsqueeze(0).expand_as(attention_mask)
    return torch.where(attention_mask.bool(), rows, torch.zeros_like(rows)) + offset


@contextmanager
def _without_dropout(model: nn.Module) -> Iterator[None]:
    """The model in eval mode for a target forward, back in its mode afterwards."""
    training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(training)


class PositionDistillationLoss(nn.Module):
    """sentence-transformers loss for ``distill`` and ``both`` (module docstring): every column's texts are
    embedded at the collator's PoSE ids (the student) and at the original rows (the target)."""

    def __init__(
        self,
        model: SentenceTransformer,
        original_rows: torch.Tensor,
        offset: int,
        contrastive: nn.Module | None = None,
        distill_weight: float = 1.0,
    ) -> None:
        super().__init__()
        self.model = model
        self.original_rows = original_rows.long()
        self.offset = offset
        self.contrastive = contrastive
        self.distill_weight = distill_weight

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        features = list(sentence_features)
        embeddings = embed_columns(self.model, features)
        distill = torch.stack([self.distillation(f, e) for f, e in zip(features, embeddings, strict=True)]).mean()
        if self.contrastive is None:
            return distill
        return self.contrastive.compute_loss_from_embeddings(embeddings, labels) + self.distill_weight * distill

    def distillation(self, features: dict[str, torch.Tensor], embeddings: torch.Tensor) -> torch.Tensor:
        """Mean over the column's texts of 1 - cos(their vectors at PoSE ids, at the original rows)."""
        ids = original_position_ids(features["attention_mask"], self.original_rows, self.offset)
        with torch.no_grad(), _without_dropout(self.model):
            target = self.model({**features, "position_ids": ids})["sentence_embedding"]
        return (1 - nn.functional.cosine_similarity(embeddings.float(), target.float(), dim=-1)).mean()

    def get_config_dict(self) -> dict[str, Any]:
        return {"objective": "both" if self.contrastive is not None else "distill",
                "distill_weight": self.distill_weight}


def check_objective(objective: str, distill_weight: float) -> None:
    """A ValueError for an unknown objective or a distillation weight that is not positive."""
    if objective not in TUNE_OBJECTIVES:
        raise UserError(f"objective must be one of {TUNE_OBJECTIVES}, got {objective!r}")
    if not distill_weight > 0:
        raise UserError(f"distill_weight must be positive, got {distill_weight}")


def tuning_loss(
    model: SentenceTransformer,
    objective: str,
    temperature: float,
    original_rows: torch.Tensor,
    offset: int,
    distill_weight: float = 1.0,
) -> nn.Module:
    """The loss of ``objective`` (contrastive, distill, both) for position tuning."""
    check_objective(objective, distill_weight)
    contrastive = info_nce_loss(model, temperature, symmetric=False)
    if objective == "contrastive":
        return contrastive
    return PositionDistillationLoss(
        model, original_rows, offset, contrastive if objective == "both" else None, distill_weight
    )
