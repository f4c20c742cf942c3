"""The retrofit's training texts: benchmark-safe text (or a user's), cut into batches of random length.

Texts come from ``training.data.mlm_documents`` (SQuAD dev paragraphs and the HotpotQA paragraphs the
benchmark does not use; never QMSum, SQuALITY, the essays or the benchmark's HotpotQA items) or from a
user's file.  They are tokenized once, joined in their order into one stream of tokens (consecutive
SQuAD paragraphs are one article, so most texts read on across paragraphs), and cut into training
texts: batch b draws one length L_b uniformly from [min, Lo] and takes ``batch_size`` consecutive
stretches of L_b - 2 tokens, each between [CLS] and [SEP].  One length per batch means no padding,
so a step costs what its texts cost; the batches are then shuffled (seeded).  The plan is a pure
function of the texts, the tokenizer and the settings, so a resumed run, or a longer one, trains on
the same texts in the same order and finds the teacher's targets for them cached.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from transformers import PreTrainedTokenizerBase

from longembed.errors import MissingFileError, UserError
from longembed.textfiles import utf8_lines
from longembed.training.data import held_out_squad_articles, mlm_documents
from longembed.training.jina.data import read_texts_jsonl

#: Special tokens around every training text: [CLS] ... [SEP].
SPECIAL_TOKENS = 2


def read_text_file(path: Path | str) -> list[str]:
    """A user's texts: jsonl (``.jsonl``/``.jsonl.gz``, one ``{"text": ...}`` per line), else one text per
    line (empty lines skipped)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"no text file at {path}")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return read_texts_jsonl(path)
    texts = [line.strip() for _, line in utf8_lines(path)]
    texts = [t for t in texts if t]
    if not texts:
        raise UserError(f"{path}: no texts in the file")
    return texts


def retrofit_texts(
    data_dir: Path | str | None, text_file: Path | str | None, held_out_articles: int = 0, seed: int = 0
) -> tuple[list[str], dict[str, int], list[str]]:
    """(texts, counts, held-out titles): a user's ``text_file`` if given (nothing held out), else the
    benchmark-safe text under ``data_dir`` without the paragraphs of ``held_out_articles`` SQuAD articles
    (chosen with ``seed``), which the short-text fidelity is scored on (``retrofit.fidelity``)."""
    if text_file is not None:
        texts = read_text_file(text_file)
        return texts, {"text_file": len(texts)}, []
    if data_dir is None:
        raise UserError("retrofit needs text: give data_dir (../shared/data: SQuAD, HotpotQA) or text_file")
    if not Path(data_dir).is_dir():
        raise MissingFileError(f"data_dir {data_dir} is not a folder")
    held = held_out_squad_articles(data_dir, held_out_articles, seed)
    held_paragraphs = {p["context"].strip() for article in held for p in article["paragraphs"]}
    texts = [text for text in mlm_documents(data_dir) if text not in held_paragraphs]
    return texts, {"documents": len(texts), "held_out_articles": len(held)}, [a["title"] for a in held]


@dataclass(frozen=True)
class BatchPlan:
    """Every training batch, in training order: ``batches[b]`` is a (batch_size, L_b) int64 array of token
    ids, each row [CLS] text [SEP]; ``stream_tokens`` counts the tokens of the texts (without specials)."""

    batches: list[np.ndarray]
    stream_tokens: int

    @property
    def examples(self) -> int:
        return sum(len(b) for b in self.batches)

    def digest(self) -> str:
        """A SHA-256 of every batch's token ids in order: what the teacher's targets were computed for."""
        digest = hashlib.sha256()
        for batch in self.batches:
            digest.update(np.asarray(batch.shape, dtype=np.int64).tobytes())
            digest.update(np.ascontiguousarray(batch, dtype=np.int64).tobytes())
        return digest.hexdigest()


def token_stream(texts: Sequence[str], tokenizer: PreTrainedTokenizerBase) -> np.ndarray:
    """The texts' tokens (no special tokens), in order, as one int64 array."""
    ids = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    pieces = [np.asarray(x, dtype=np.int64) for x in ids if len(x)]
    if not pieces:
        raise UserError("the training texts hold no tokens")
    return np.concatenate(pieces)


def plan_batches(
    stream: np.ndarray,
    cls_id: int,
    sep_id: int,
    batch_size: int,
    min_length: int,
    max_length: int,
    seed: int,
) -> BatchPlan:
    """Cut ``stream`` into batches of ``batch_size`` texts of one random length each (module docstring).

    Lengths count the special tokens: a text of L tokens holds L - 2 of the stream.  The plan ends at
    the first batch the rest of the stream cannot fill; a ValueError if not even one batch fits.
    """
    rng = random.Random(f"longembed-retrofit:{seed}")
    batches, start = [], 0
    while True:
        length = rng.randint(min_length, max_length)
        body = length - SPECIAL_TOKENS
        if start + batch_size * body > len(stream):
            break
        rows = stream[start : start + batch_size * body].reshape(batch_size, body)
        start += batch_size * body
        specials = np.full((batch_size, 1), cls_id, dtype=np.int64), np.full((batch_size, 1), sep_id, dtype=np.int64)
        batches.append(np.concatenate([specials[0], rows, specials[1]], axis=1))
    if not batches:
        raise UserError(
            f"the training text has {len(stream)} tokens: too little for one batch of {batch_size} texts of "
            f"{min_length}..{max_length} tokens; give more text, a smaller batch_size or shorter lengths"
        )
    rng.shuffle(batches)
    return BatchPlan(batches, int(len(stream)))


def tokenized_plan(
    texts: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    batch_size: int,
    min_length: int,
    max_length: int,
    seed: int,
) -> BatchPlan:
    """:func:`plan_batches` over ``texts`` tokenized by the teacher's ``tokenizer`` ([CLS]/[SEP] its own)."""
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise UserError("the teacher's tokenizer has no [CLS]/[SEP] tokens: not a BERT tokenizer")
    stream = token_stream(texts, tokenizer)
    return plan_batches(
        stream, tokenizer.cls_token_id, tokenizer.sep_token_id, batch_size, min_length, max_length, seed
    )
