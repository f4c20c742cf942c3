"""Training data that exists on these machines and never touches the benchmark's test data.

``../shared/data/README.md`` ("Training data") says what may be trained on:

- SQuAD 2.0 dev (``squad/dev-v2.0.json``): every answerable question -> its paragraph; the other
  paragraphs of the same article are natural hard negatives.
- HotpotQA dev (distractor) questions that the benchmark's ``hotpotqa`` task does not use:
  question -> each supporting paragraph; the question's distractor paragraphs are hard negatives.
  Every question the task asks and every paragraph (by Wikipedia title) in the task's corpus is
  left out, found by running the task's own selection (``tasks.hotpotqa.select_hotpotqa``).
- A user's own pairs: jsonl with ``query``, ``positive`` and optional ``negatives`` (a list).

QMSum, SQuALITY and the needle haystack (Paul Graham essays) are never read here.  The same sources
give MLM text (:func:`mlm_documents`): SQuAD paragraphs and the unused HotpotQA paragraphs.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from longembed.errors import MissingFileError, UserError
from longembed.tasks.base import iter_jsonl, read_json_file, require_fields
from longembed.tasks.hotpotqa import FILENAME as HOTPOTQA_FILENAME
from longembed.tasks.hotpotqa import SUBDIR as HOTPOTQA_SUBDIR
from longembed.tasks.hotpotqa import read_hotpotqa, select_hotpotqa
from longembed.training.config import SOURCES

SQUAD_FILE = "squad/dev-v2.0.json"
HOTPOTQA_FILE = f"{HOTPOTQA_SUBDIR}/{HOTPOTQA_FILENAME}"


@dataclass(frozen=True)
class TrainingPair:
    """A query, its relevant text, and texts that look relevant but are not (hard negatives).

    ``group`` ties pairs that share texts (a SQuAD article, a HotpotQA question): a held-out split
    keeps a group on one side, so no held-out text was seen in training.
    """

    query: str
    positive: str
    negatives: tuple[str, ...] = ()
    group: str = ""


@dataclass
class PairSource:
    """Pairs and where they came from (for the run's record)."""

    name: str
    pairs: list[TrainingPair] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)


def _data_file(data_dir: Path | str, relative: str) -> Path:
    path = Path(data_dir) / relative
    if not path.is_file():
        raise MissingFileError(f"training data {relative} not found under {data_dir} (expected {path})")
    return path


def squad_pairs(data_dir: Path | str, seed: int = 0) -> PairSource:
    """SQuAD 2.0 dev: answerable question -> its paragraph; negatives: the article's other paragraphs."""
    path = _data_file(data_dir, SQUAD_FILE)
    data = read_json_file(path)
    rng = random.Random(f"longembed-squad:{seed}")
    source = PairSource("squad", excluded={"unanswerable questions": 0})
    for article in require_fields(data, ("data",), str(path))["data"]:
        paragraphs = [p["context"].strip() for p in article["paragraphs"]]
        for k, paragraph in enumerate(article["paragraphs"]):
            others = paragraphs[:k] + paragraphs[k + 1 :]
            for qa in paragraph["qas"]:
                if qa.get("is_impossible"):
                    source.excluded["unanswerable questions"] += 1
                    continue
                negatives = rng.sample(others, len(others))
                source.pairs.append(
                    TrainingPair(qa["question"].strip(), paragraphs[k], tuple(negatives), group=f"squad:{article['title']}")
                )
    return source


def hotpotqa_paragraph(title: str, sentences: Sequence[str]) -> str:
    """A HotpotQA paragraph as a training text: its title, a newline, its sentences."""
    return f"{title}\n{''.join(sentences).strip()}"


def hotpotqa_pairs(data_dir: Path | str, seed: int = 0) -> PairSource:
    """HotpotQA questions the benchmark does not use: question -> each supporting paragraph.

    Left out: every question the ``hotpotqa`` task asks, and every question one of whose supporting
    paragraphs is in the task's corpus.  Distractor paragraphs in the corpus are dropped from the
    negatives.  The task's default parameters decide what it uses (``select_hotpotqa``).
    """
    path = _data_file(data_dir, HOTPOTQA_FILE)
    examples = read_hotpotqa(path)
    selection = select_hotpotqa(examples)
    used_questions = set(selection.questions)
    used_titles = selection.titles()
    rng = random.Random(f"longembed-hotpotqa-train:{seed}")
    source = PairSource(
        "hotpotqa",
        excluded={"benchmark questions": len(used_questions), "questions with a benchmark paragraph": 0,
                  "benchmark distractors": 0},
    )
    for i, example in enumerate(examples):
        if i in used_questions:
            continue
        supporting = {title for title, _ in example["supporting_facts"]}
        context = {title: sentences for title, sentences in example["context"]}
        if supporting & used_titles or not supporting <= set(context):
            source.excluded["questions with a benchmark paragraph"] += 1
            continue
        negatives = []
        for title, sentences in example["context"]:
            if title in supporting:
                continue
            if title in used_titles:
                source.excluded["benchmark distractors"] += 1
                continue
            negatives.append(hotpotqa_paragraph(title, sentences))
        rng.shuffle(negatives)
        for title in sorted(supporting):
            source.pairs.append(
                TrainingPair(
                    example["question"].strip(),
                    hotpotqa_paragraph(title, context[title]),
                    tuple(negatives),
                    group=f"hotpotqa:{example['_id']}",
                )
            )
    return source


def read_pairs_jsonl(path: Path | str) -> PairSource:
    """A user's pairs: one JSON object per line with ``query``, ``positive`` and optional ``negatives``."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"no training pairs file at {path}")
    source = PairSource(path.name)
    for lineno, record in iter_jsonl(path):
        where = f"{path}:{lineno}"
        record = require_fields(record, ("query", "positive"), where)
        negatives = record.get("negatives", [])
        if isinstance(negatives, str) or not isinstance(negatives, list):
            raise UserError(f"{where}: 'negatives' must be a list of texts, got {type(negatives).__name__}")
        texts = [record["query"], record["positive"], *negatives]
        if not all(isinstance(t, str) and t.strip() for t in texts):
            raise UserError(f"{where}: query, positive and negatives must be non-empty texts")
        group = str(record.get("group", f"{path.name}:{lineno}"))
        source.pairs.append(TrainingPair(record["query"], record["positive"], tuple(negatives), group))
    if not source.pairs:
        raise UserError(f"{path}: no training pairs in the file")
    return source


def training_pairs(
    data_dir: Path | str | None = None,
    sources: Iterable[str] = SOURCES,
    train_file: Path | str | None = None,
    seed: int = 0,
) -> list[PairSource]:
    """The pairs to train on: a user's file if given, else the allowed sources under ``data_dir``."""
    if train_file is not None:
        return [read_pairs_jsonl(train_file)]
    if data_dir is None:
        raise UserError("give a data directory (../shared/data) or a pairs file (train_file)")
    readers = {"squad": squad_pairs, "hotpotqa": hotpotqa_pairs}
    unknown = sorted(set(sources) - set(readers))
    if unknown:
        raise UserError(f"unknown training source(s) {unknown}; choose from {SOURCES}")
    return [readers[name](data_dir, seed) for name in sources]


def split_held_out(
    pairs: Sequence[TrainingPair], fraction: float, seed: int = 0
) -> tuple[list[TrainingPair], list[TrainingPair]]:
    """(train, held out): whole groups go to the held-out side until it has ``fraction`` of the pairs."""
    if not 0 <= fraction < 1:
        raise UserError(f"held-out fraction must be in [0, 1), got {fraction}")
    groups = sorted({p.group for p in pairs})
    random.Random(f"longembed-split:{seed}").shuffle(groups)
    target, held, chosen = fraction * len(pairs), 0, set()
    sizes: dict[str, int] = {}
    for p in pairs:
        sizes[p.group] = sizes.get(p.group, 0) + 1
    for group in groups:
        if held >= target:
            break
        chosen.add(group)
        held += sizes[group]
    return [p for p in pairs if p.group not in chosen], [p for p in pairs if p.group in chosen]


def mlm_documents(data_dir: Path | str) -> list[str]:
    """Wikipedia paragraphs for masked-language-model training: SQuAD dev's paragraphs and the
    HotpotQA paragraphs outside the benchmark's corpus (each text once, in a fixed order)."""
    squad = read_json_file(_data_file(data_dir, SQUAD_FILE))
    texts = [p["context"].strip() for article in squad["data"] for p in article["paragraphs"]]
    examples = read_hotpotqa(_data_file(data_dir, HOTPOTQA_FILE))
    used_titles = select_hotpotqa(examples).titles()
    seen: set[str] = set()
    for example in examples:
        for title, sentences in example["context"]:
            if title in used_titles or title in seen:
                continue
            seen.add(title)
            texts.append(hotpotqa_paragraph(title, sentences))
    return list(dict.fromkeys(texts))


def held_out_squad_articles(data_dir: Path | str, count: int, seed: int = 0) -> list[dict]:
    """``count`` SQuAD dev articles (``{"title", "paragraphs"}``), chosen with ``seed``, for a run to keep
    out of its training text and score on afterwards (the Jina recipe's long texts, the retrofit's
    short-text fidelity)."""
    if count < 0:
        raise UserError(f"held-out article count must be >= 0, got {count}")
    squad = read_json_file(_data_file(data_dir, SQUAD_FILE))
    articles = sorted(squad["data"], key=lambda a: a["title"])
    random.Random(f"longembed-jina-mlm:{seed}").shuffle(articles)  # the seed string of the first user, kept
    return articles[:count]


def pairs_digest(pairs: Sequence[TrainingPair]) -> str:
    """A SHA-256 of the pairs' texts in order: a run's identity, so a resumed run trains on the same pairs."""
    digest = hashlib.sha256()
    for pair in pairs:
        digest.update(json.dumps([pair.query, pair.positive, list(pair.negatives)]).encode())
    return digest.hexdigest()
