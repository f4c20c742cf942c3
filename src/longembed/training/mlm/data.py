"""Stage I's data: one training sequence per document, and the masking that turns a batch into MLM inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

from longembed.errors import UserError
from longembed.training.contrastive import require_training_extra
from longembed.training.masking import WholeWordMaskCollator
from longembed.training.mlm.config import MLMConfig

try:  # the ``training`` extra; without it ``require_training_extra`` says what to install
    from datasets import Dataset
except ImportError:  # pragma: no cover - exercised only without the extra
    Dataset = None  # type: ignore[assignment,misc]


def tokenize_documents(
    texts: Sequence[str], tokenizer: PreTrainedTokenizerBase, training_length: int
) -> Dataset:
    """One training sequence per document: its first ``training_length`` tokens ([CLS] ... [SEP]).

    No packing and no second sequence from a long document (paper 4.3).  Columns: input_ids,
    attention_mask, special_tokens_mask and offset_mapping (word boundaries for whole-word masking).
    """
    require_training_extra()
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise UserError("no MLM training text")

    def encode(batch: dict[str, list[str]]) -> Any:
        return tokenizer(
            batch["text"],
            truncation=True,
            max_length=training_length,
            return_special_tokens_mask=True,
            return_offsets_mapping=True,
            return_token_type_ids=False,
        )

    return Dataset.from_dict({"text": list(texts)}).map(
        encode, batched=True, remove_columns=["text"], desc="tokenizing", load_from_cache_file=False
    )


def mlm_collator(
    tokenizer: PreTrainedTokenizerBase, config: MLMConfig, seed: int | None = None
) -> WholeWordMaskCollator:
    """The masking of ``config`` (30% whole words, 80/10/10 by default), seeded by ``seed``."""
    return WholeWordMaskCollator(
        tokenizer=tokenizer,
        whole_word_mask=config.whole_word_mask,
        mlm_probability=config.mlm_probability,
        mask_replace_prob=config.mask_replace_prob,
        random_replace_prob=config.random_replace_prob,
        seed=config.seed if seed is None else seed,
    )
