"""Whole-word masking for MLM pre-training (Jina v2 section 4.3), owned here so a seed means the same masks.

The recipe: choose ``mlm_probability`` of the *words* (a word is a maximal run of non-special tokens
whose character offsets touch, so "word." is one word); every token of a chosen word is a target;
each target becomes [MASK] with probability ``mask_replace_prob`` (0.8), a random token with
``random_replace_prob`` (0.1), and stays itself otherwise (0.1), decided token by token as in Google's
original whole-word masking.  Special tokens and padding are never targets.

Why not transformers' ``DataCollatorForLanguageModeling``: its random state is private (when the
generator is created, re-created and advanced changed in transformers 5.24), so the same seed gave
other masks from one release to the next, and a run resumed from a checkpoint no longer ended at the
weights of an uninterrupted one.  Here every batch draws from its own ``torch.Generator`` seeded by
the run's seed and the batch's token ids: the masks of a batch depend on nothing else, not on how many
batches came before (a resumed run skips the batches it trained on) nor on any library's version.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from longembed.errors import UserError

#: Label of a position that is not a target (ignored by the cross entropy).
IGNORE_INDEX = -100


@dataclass
class WholeWordMaskCollator:
    """Pads a list of tokenized examples and masks them: ``{input_ids, attention_mask, labels}``.

    Each example is a mapping with ``input_ids`` and, for whole-word masking, ``offset_mapping``
    (character spans) and ``special_tokens_mask``; ``attention_mask`` is taken when present.  Without
    ``special_tokens_mask`` the tokenizer's special ids are looked up.  ``tokenizer`` needs
    ``pad_token_id``, ``mask_token_id`` and a length (the range of random replacement tokens).
    """

    tokenizer: Any
    mlm_probability: float = 0.3
    whole_word_mask: bool = True
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    seed: int | None = None
    pad_to_multiple_of: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.mlm_probability < 1:
            raise UserError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        if min(self.mask_replace_prob, self.random_replace_prob) < 0 or (
            self.mask_replace_prob + self.random_replace_prob > 1
        ):
            raise UserError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1")
        if self.tokenizer.mask_token_id is None or self.tokenizer.pad_token_id is None:
            raise UserError("MLM masking needs a tokenizer with a [MASK] and a [PAD] token")
        self.mask_replace_prob = float(self.mask_replace_prob)
        self.random_replace_prob = float(self.random_replace_prob)

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        if not examples:
            raise UserError("cannot collate an empty batch")
        input_ids, attention_mask, special, word_ids = self._padded(examples)
        generator = None
        if self.seed is not None:
            generator = torch.Generator().manual_seed(batch_seed(self.seed, examples))
        targets = self._choose_targets(word_ids, special, generator)
        return {"input_ids": self._replace(input_ids, targets, generator), "attention_mask": attention_mask,
                "labels": input_ids.masked_fill(~targets, IGNORE_INDEX)}

    def _padded(self, examples: Sequence[Mapping[str, Any]]) -> tuple[torch.Tensor, ...]:
        """Token ids, attention mask, "not a target" mask and word ids, padded to the longest example."""
        longest = max(len(e["input_ids"]) for e in examples)
        if self.pad_to_multiple_of:
            longest = math.ceil(longest / self.pad_to_multiple_of) * self.pad_to_multiple_of
        shape = (len(examples), longest)
        input_ids = torch.full(shape, int(self.tokenizer.pad_token_id), dtype=torch.long)
        attention_mask = torch.zeros(shape, dtype=torch.long)
        special = torch.ones(shape, dtype=torch.bool)  # padding is never a target
        word_ids = torch.full(shape, -1, dtype=torch.long)
        for row, example in enumerate(examples):
            ids = list(example["input_ids"])
            n = len(ids)
            input_ids[row, :n] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, :n] = torch.tensor(example.get("attention_mask", [1] * n), dtype=torch.long)
            special[row, :n] = torch.tensor(self._special_mask(example), dtype=torch.bool)
            if self.whole_word_mask:
                word_ids[row, :n] = torch.tensor(word_starts(example["offset_mapping"], special[row, :n]))
            else:  # every token is its own word
                word_ids[row, :n] = torch.arange(n)
        word_ids[special] = -1
        return input_ids, attention_mask, special, word_ids

    def _special_mask(self, example: Mapping[str, Any]) -> list[int]:
        if "special_tokens_mask" in example:
            return list(example["special_tokens_mask"])
        return self.tokenizer.get_special_tokens_mask(list(example["input_ids"]), already_has_special_tokens=True)

    def _choose_targets(
        self, word_ids: torch.Tensor, special: torch.Tensor, generator: torch.Generator | None
    ) -> torch.Tensor:
        """Each word chosen with probability ``mlm_probability``; all its tokens become targets."""
        draws = torch.rand(word_ids.shape, generator=generator)
        first_token = torch.zeros_like(special)
        first_token[:, 0] = ~special[:, 0]
        first_token[:, 1:] = ~special[:, 1:] & (word_ids[:, 1:] != word_ids[:, :-1])
        chosen_start = first_token & (draws < self.mlm_probability)
        # A token is a target when the first token of its word was chosen: word ids grow along a row,
        # so the chosen starts of each row, looked up by word id, mark the whole word.
        targets = torch.zeros_like(special)
        for row in range(word_ids.shape[0]):
            chosen_words = word_ids[row][chosen_start[row]]
            targets[row] = torch.isin(word_ids[row], chosen_words) & ~special[row]
        return targets

    def _replace(
        self, input_ids: torch.Tensor, targets: torch.Tensor, generator: torch.Generator | None
    ) -> torch.Tensor:
        """80% of the targets -> [MASK], 10% -> a random token, 10% kept (the configured shares)."""
        draws = torch.rand(input_ids.shape, generator=generator)
        random_tokens = torch.randint(len(self.tokenizer), input_ids.shape, generator=generator)
        as_mask = targets & (draws < self.mask_replace_prob)
        as_random = targets & ~as_mask & (draws < self.mask_replace_prob + self.random_replace_prob)
        masked = input_ids.clone()
        masked[as_mask] = int(self.tokenizer.mask_token_id)
        masked[as_random] = random_tokens[as_random]
        return masked


def word_starts(offsets: Sequence[Sequence[int]], special: torch.Tensor) -> list[int]:
    """Word id of each token: a new word starts at a non-special token whose start is not the end of
    the previous token (or whose previous token is special).  Special tokens get -1."""
    ids, word, previous_end, previous_special = [], -1, None, True
    for (start, end), is_special in zip(offsets, special.tolist(), strict=True):
        if is_special:
            ids.append(-1)
            previous_special = True
            continue
        if previous_special or start != previous_end:
            word += 1
        ids.append(word)
        previous_end, previous_special = end, False
    return ids


def batch_seed(seed: int, examples: Sequence[Any]) -> int:
    """A 63-bit seed from the run's seed and the token ids of a batch (order included)."""
    digest = hashlib.sha256(str(seed).encode())
    for example in examples:
        ids = example["input_ids"] if isinstance(example, Mapping) else example
        digest.update(np.asarray(ids, dtype=np.int64).tobytes())
        digest.update(b"|")
    return int.from_bytes(digest.digest()[:8], "little") >> 1
