"""The retrofit's optional contrastive term (``--pairs``): a batch of benchmark-safe pairs beside each step.

Distillation alone copies the teacher at up to Lo tokens; it says nothing about what the student
should do with a longer text, where the teacher has no output to copy.  With ``pairs_weight > 0``,
every step adds ``pairs_weight`` x InfoNCE over a batch of (query, positive, hard negatives) rows:
the one trainer's loss (``training.contrastive``, asymmetric form), written here on the student's
mean-pooled vectors q_i and d,

    -1/k sum_i ln( e^{s(q_i, p_i)/tau} / sum_j [ e^{s(q_i, p_j)/tau} + sum_l e^{s(q_i, n_{j,l})/tau} ] ),

s the cosine, tau ``pairs_temperature``.  The pairs are ``training.data``'s (SQuAD dev and the
HotpotQA questions the benchmark does not use) or a user's jsonl; their texts are cut at Lo like
the distillation texts, so this term also trains only within the teacher's window.

Pair batch b goes with planned batch b (:func:`plan_pair_batches`), so a resumed run, or a run
whose epochs repeat the plan, sees the same pairs with the same texts.  As sentence-transformers'
``NO_DUPLICATES`` batch sampler does, a row sharing any text with a row already in the batch waits
for the next batch: two questions about one paragraph would otherwise make each other's positive
a negative.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from longembed.errors import UserError
from longembed.training.contrastive import pairs_dataset
from longembed.training.data import TrainingPair

#: A row of a pair batch: (query, positive, negative_1, ..., negative_m).
PairRow = tuple[str, ...]


def plan_pair_batches(
    pairs: Sequence[TrainingPair], batch_size: int, count: int, hard_negatives: int, seed: int
) -> list[list[PairRow]]:
    """``count`` batches of ``batch_size`` rows, in a seeded order that cycles through every pair.

    Each row has ``hard_negatives`` negatives (too few are filled with other groups' positives, as
    ``contrastive.pairs_dataset`` does).  No two rows of a batch share a text; a deferred row leads
    the next batch.  A ValueError when the pairs cannot fill one such batch.
    """
    columns = pairs_dataset(pairs, hard_negatives, seed).to_dict()
    names = ["query", "positive", *(f"negative_{j + 1}" for j in range(hard_negatives))]
    rows = [tuple(columns[name][i] for name in names) for i in range(len(pairs))]
    order = list(range(len(rows)))
    random.Random(f"longembed-retrofit-pairs:{seed}").shuffle(order)
    upcoming = itertools.cycle(order)
    pending: deque[int] = deque()  # rows an earlier batch could not take, in their order
    batches: list[list[PairRow]] = []
    for _ in range(count):
        batch: list[PairRow] = []
        texts: set[str] = set()
        rejected: list[int] = []
        for _scan in range(len(rows) + len(pending)):  # one pass over every row decides it
            i = pending.popleft() if pending else next(upcoming)
            if texts.isdisjoint(rows[i]):
                batch.append(rows[i])
                texts.update(rows[i])
                if len(batch) == batch_size:
                    break
            else:
                rejected.append(i)
        if len(batch) < batch_size:
            raise UserError(
                f"the {len(rows)} training pairs cannot fill a batch of {batch_size} rows that share no text; "
                "give more pairs or a smaller pairs batch size"
            )
        pending.extendleft(reversed(rejected))
        batches.append(batch)
    return batches


def contrastive_loss(queries: torch.Tensor, documents: torch.Tensor, temperature: float) -> torch.Tensor:
    """InfoNCE of k queries against ``documents`` = [positives (k), negative_1 of every row (k), ...]:
    cross-entropy of cos(q_i, d) / tau with target p_i (the module docstring's formula), in float32."""
    queries = torch.nn.functional.normalize(queries.float(), dim=-1)
    documents = torch.nn.functional.normalize(documents.float(), dim=-1)
    scores = queries @ documents.T / temperature
    return torch.nn.functional.cross_entropy(scores, torch.arange(len(queries), device=scores.device))


def batch_texts(rows: Sequence[PairRow], prompts: dict[str, str]) -> tuple[list[str], list[str]]:
    """(queries, documents) of a pair batch with the model's prompts: documents column by column, the
    positives first, then every row's first negative, and so on (the order :func:`contrastive_loss` reads)."""
    query_prompt, document_prompt = prompts.get("query", ""), prompts.get("document", "")
    queries = [query_prompt + row[0] for row in rows]
    documents = [document_prompt + row[c] for c in range(1, len(rows[0])) for row in rows]
    return queries, documents


@dataclass
class PairInputs:
    """Pair batch b as the student's inputs: ``pair_query_*`` and ``pair_document_*`` (``input_ids``,
    ``attention_mask``), tokenized by the teacher's tokenizer and cut at ``max_length`` (Lo)."""

    batches: Sequence[list[PairRow]]
    tokenizer: PreTrainedTokenizerBase
    prompts: dict[str, str]
    max_length: int

    def __call__(self, batch: int) -> dict[str, torch.Tensor]:
        queries, documents = batch_texts(self.batches[batch], self.prompts)
        inputs = {}
        for role, texts in (("query", queries), ("document", documents)):
            encoded = self.tokenizer(
                texts, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
            )
            inputs[f"pair_{role}_input_ids"] = encoded["input_ids"]
            inputs[f"pair_{role}_attention_mask"] = encoded["attention_mask"]
        return inputs
