"""Each stage's data: stage I's texts (and the long held-out articles), stages II and III's pairs."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path

from longembed.errors import MissingFileError, UserError
from longembed.tasks.base import iter_jsonl
from longembed.training.data import (
    TrainingPair,
    held_out_squad_articles,
    mlm_documents,
    split_held_out,
    training_pairs,
)
from longembed.training.jina.config import RecipeData


def read_texts_jsonl(path: Path | str) -> list[str]:
    """A user's MLM text: one JSON object per line with a non-empty ``text``."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"no MLM text file at {path}")
    texts = []
    for lineno, record in iter_jsonl(path):
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"{path}:{lineno}: each line needs a non-empty 'text'")
        texts.append(text)
    if not texts:
        raise UserError(f"{path}: no texts in the file")
    return texts


def mlm_corpus(data_dir: Path | str, held_out_articles: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """(training documents, held-out long texts) for stage I from the benchmark-safe sources.

    ``held_out_articles`` SQuAD articles, chosen with ``seed``, become one long text each (their
    paragraphs in order, 3,000-13,000 tokens); their paragraphs are removed from the training
    documents (``training.data.mlm_documents``: SQuAD dev and unused HotpotQA paragraphs).
    """
    documents = mlm_documents(data_dir)
    held = held_out_squad_articles(data_dir, held_out_articles, seed)
    held_paragraphs = {p["context"].strip() for a in held for p in a["paragraphs"]}
    held_texts = ["\n\n".join(p["context"].strip() for p in a["paragraphs"]) for a in held]
    return [d for d in documents if d not in held_paragraphs], held_texts


def recipe_pairs(
    data: RecipeData, data_dir: Path | str | None
) -> tuple[list[TrainingPair], list[TrainingPair], dict[str, int]]:
    """(training pairs, held-out pairs, counts): whole groups held out, the rest shuffled and capped.

    The pairs come from ``data.train_file`` if set, else from the allowed sources under ``data_dir``.
    """
    if data.train_file is None and data_dir is None:
        raise UserError("pairs need --data-dir (../shared/data) or data.train_file in the config")
    sources = training_pairs(data_dir, data.sources, data.train_file, data.seed)
    pairs = [p for s in sources for p in s.pairs]
    train, held = split_held_out(pairs, data.held_out_fraction, data.seed)
    random.Random(f"longembed-jina-pairs:{data.seed}").shuffle(train)
    if data.max_pairs is not None:
        train = train[: data.max_pairs]
    counts = {s.name: len(s.pairs) for s in sources}
    counts.update(train=len(train), held_out=len(held))
    return train, held, counts


def held_out_pairs(data: RecipeData, data_dir: Path | str | None) -> list[TrainingPair]:
    """The held-out pairs to score after stage I, if pairs are available and evaluation is on."""
    if not data.evaluate or (data.train_file is None and data_dir is None):
        return []
    return recipe_pairs(data, data_dir)[1]


def texts_digest(texts: Sequence[str]) -> str:
    """A SHA-256 of the MLM texts in order: the run's identity, so a resumed run reads the same text."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()
