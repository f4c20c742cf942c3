"""Masked-token accuracy by sequence length of a saved MLM model (Jina v2's Figure 2).

The APE twin runs past its position table with PI or RP position ids (``longembed.extension.ape``);
a JinaBERT (ALiBi) model needs no method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from longembed.errors import UserError
from longembed.extension.ape import APE_METHODS, InterpolatedPositionEmbedding, ape_position_ids
from longembed.loading import resolve_device
from longembed.training.masking import IGNORE_INDEX
from longembed.training.mlm.config import MLMConfig
from longembed.training.mlm.data import mlm_collator
from longembed.training.mlm.model import is_alibi_folder, load_mlm_model, load_tokenizer


@dataclass
class LengthAccuracy:
    """Masked-token accuracy at one sequence length (one point of the paper's Figure 2)."""

    length: int
    positions: str
    windows: int
    masked_tokens: int
    correct: int
    accuracy: float | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def mlm_accuracy_by_length(
    model_folder: Path | str,
    texts: Sequence[str],
    lengths: Sequence[int],
    *,
    position_method: str | None = None,
    mlm_probability: float = 0.3,
    seed: int = 0,
    batch_tokens: int = 8192,
    device: str | None = None,
) -> list[LengthAccuracy]:
    """Accuracy of the top-1 prediction at masked tokens of held-out ``texts``, per sequence length.

    Every text is tokenized once and cut into consecutive windows of L - 2 tokens, each run as
    [CLS] window [SEP] of L tokens, so every length scores (nearly) the same tokens and only the
    context differs.  (The paper truncates each of 50,000 C4 documents to L; long held-out texts are
    few here, so windows give every length enough masked tokens.)  Masking as in training: whole
    words, ``mlm_probability``, 80/10/10, seeded.

    An APE model (the twin) runs up to its position table; beyond it the row says so (accuracy None),
    unless ``position_method`` is "pi" or "rp": then longer windows get position ids
    ``ape_position_ids(method, ...)`` with s = ceil(L / Lo) (PI interpolates between table rows).
    An ALiBi model needs no method.
    """
    if position_method not in (None, *APE_METHODS):
        raise UserError(f"position_method must be None or one of {APE_METHODS}, got {position_method!r}")
    if not lengths or any(int(n) < 8 for n in lengths):
        raise UserError(f"lengths must be integers >= 8, got {list(lengths)}")
    folder = Path(model_folder)
    alibi = is_alibi_folder(folder)
    if alibi and position_method is not None:
        raise UserError("an ALiBi model has no position ids to remap; measure it with position_method=None")
    model = load_mlm_model(folder)
    tokenizer = load_tokenizer(folder)
    run_device = resolve_device(device)
    model.to(run_device)
    if position_method == "pi":
        embeddings = model.base_model.embeddings
        embeddings.position_embeddings = InterpolatedPositionEmbedding(embeddings.position_embeddings)
    measure = _LengthMeasure(
        model=model,
        tokenizer=tokenizer,
        encoded=tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False),
        collator=mlm_collator(tokenizer, MLMConfig(mlm_probability=mlm_probability, seed=seed), seed=seed),
        device=run_device,
        table=None if alibi else int(model.config.max_position_embeddings),
        method=position_method,
        label="alibi" if alibi else position_method or "absolute",
        batch_tokens=batch_tokens,
    )
    return [measure.at(int(n)) for n in lengths]


@dataclass
class _LengthMeasure:
    """One model's masked-token accuracy, measured one length at a time (in the order asked: the
    collator's seeded masks follow the batches)."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    encoded: Any
    collator: Any
    device: torch.device
    table: int | None
    method: str | None
    label: str
    batch_tokens: int

    def at(self, length: int) -> LengthAccuracy:
        windows = _windows(self.encoded, self.tokenizer, length)
        if not windows:
            return LengthAccuracy(length, self.label, 0, 0, 0, None, "no text is that long")
        if self.table is not None and length > self.table and self.method is None:
            note = f"beyond the {self.table}-position table"
            return LengthAccuracy(length, self.label, len(windows), 0, 0, None, note)
        per_batch = max(1, self.batch_tokens // length)
        masked = correct = 0
        for start in range(0, len(windows), per_batch):
            batch = self.collator(windows[start : start + per_batch])
            hits, count = _masked_hits(self.model, batch, self.device, self.table, self.method)
            correct += hits
            masked += count
        accuracy = correct / masked if masked else None
        return LengthAccuracy(length, self.label, len(windows), masked, correct, accuracy)


def _windows(encoded: Any, tokenizer: PreTrainedTokenizerBase, length: int) -> list[dict[str, Any]]:
    """Consecutive full windows of ``length`` tokens ([CLS] + length - 2 tokens + [SEP]) of every text."""
    body = length - 2
    out = []
    for ids, offsets in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True):
        for start in range(0, len(ids) - body + 1, body):
            out.append(
                {
                    "input_ids": [tokenizer.cls_token_id, *ids[start : start + body], tokenizer.sep_token_id],
                    "attention_mask": [1] * length,
                    "special_tokens_mask": [1] + [0] * body + [1],
                    "offset_mapping": [[0, 0], *[list(o) for o in offsets[start : start + body]], [0, 0]],
                }
            )
    return out


@torch.no_grad()
def _masked_hits(
    model: PreTrainedModel,
    batch: dict[str, torch.Tensor],
    device: torch.device,
    table: int | None,
    method: str | None,
) -> tuple[int, int]:
    """(correct top-1 predictions, masked tokens) of one masked batch."""
    labels = batch["labels"].to(device)
    inputs = {
        "input_ids": batch["input_ids"].to(device),
        "attention_mask": batch["attention_mask"].to(device),
        "token_type_ids": torch.zeros_like(batch["input_ids"]).to(device),
    }
    if table is not None and method is not None:
        lengths = batch["attention_mask"].sum(dim=1)
        seq_len = batch["input_ids"].shape[1]
        scales = torch.clamp(torch.ceil(lengths / table), min=1).long()
        inputs["position_ids"] = ape_position_ids(method, lengths, seq_len, scales, table).to(device)
    logits = model(**inputs).logits
    chosen = labels != IGNORE_INDEX
    hits = (logits.argmax(dim=-1) == labels) & chosen
    return int(hits.sum()), int(chosen.sum())
