"""The loss of contextual training: InSeNT (ConTEB, arXiv 2505.24782) over late-chunked chunk vectors, plus
distillation of standalone short texts towards the original model.

For a query q whose chunk is p in document D, with s(q, c) = cos(q, c) / tau:

- in-sequence:  -log exp s(q, p) / sum over the chunks c of D of exp s(q, c)
- in-batch:     -log exp s(q, p) / (exp s(q, p) + sum over the chunks c of the step's other documents of exp s(q, c))

loss = w x mean in-sequence + (1 - w) x mean in-batch (ConTEB's "weighted" loss, w = 0.5, tau = 1/20).
A query with several positive chunks (HotpotQA's two supporting passages) counts once per positive, the
other positives left out of its denominators (they are not negatives).

Distillation: 1 - cos(model's vector of a short text embedded alone, the original model's), averaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class QueryTarget:
    """A query row's document (its index in the step) and its positive chunk indices (within the document)."""

    document: int
    positives: tuple[int, ...]


def insent_loss(
    queries: torch.Tensor,
    chunks: Sequence[torch.Tensor],
    targets: Sequence[QueryTarget],
    temperature: float,
    in_sequence_weight: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(loss, {"in_sequence_loss", "in_batch_loss"}) of ``queries`` (Q, dim) against each document's chunk
    vectors ``chunks[d]`` (n_d, dim); ``targets[i]`` says where query i's answer is."""
    if len(targets) != len(queries):
        raise ValueError(f"{len(queries)} query vectors and {len(targets)} targets")
    q = F.normalize(queries.float(), dim=-1)
    flat = F.normalize(torch.cat([c.float() for c in chunks]), dim=-1)
    owner = torch.cat([torch.full((len(c),), d) for d, c in enumerate(chunks)])
    starts = [0]
    for c in chunks:
        starts.append(starts[-1] + len(c))
    scores = q @ flat.T / temperature  # (Q, all chunks)
    in_seq, in_batch = [], []
    for i, target in enumerate(targets):
        mine = owner == target.document
        for p in target.positives:
            index = starts[target.document] + p
            others = torch.tensor([starts[target.document] + k for k in target.positives if k != p], dtype=torch.long)
            excluded = torch.zeros(len(flat), dtype=torch.bool)
            excluded[others] = True
            row = scores[i]
            seq = row.masked_fill(~mine | excluded, float("-inf"))
            batch = row.masked_fill(mine | excluded, float("-inf"))
            batch = torch.cat([row[index : index + 1], batch])
            in_seq.append(torch.logsumexp(seq, 0) - row[index])
            in_batch.append(torch.logsumexp(batch, 0) - row[index])
    parts = {"in_sequence_loss": torch.stack(in_seq).mean(), "in_batch_loss": torch.stack(in_batch).mean()}
    loss = in_sequence_weight * parts["in_sequence_loss"] + (1 - in_sequence_weight) * parts["in_batch_loss"]
    return loss, parts


def distill_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean over rows of 1 - cos(student's vector, teacher's)."""
    return (1 - F.cosine_similarity(student.float(), teacher.float(), dim=-1)).mean()
