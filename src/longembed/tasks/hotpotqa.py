"""HotpotQA (Yang et al., 2018) as a stand-in for LongEmbed's 2WikiMultihopQA: question -> long document.

LongEmbed's 2WikiMultihopQA task (LongBench's length-balanced 2wikimqa, 300 questions) pairs each
multi-hop question with one ~6k-word document of Wikipedia passages that holds its evidence. 2WikiMQA
is not reachable here; HotpotQA's dev set (distractor setting) has the same ingredients: multi-hop
questions, each with 10 Wikipedia paragraphs of which 2 are gold supporting paragraphs and 8 are
distractors retrieved for the question.

Construction (deterministic for a seed; :func:`build_hotpotqa`):

1. Shuffle the 7,405 questions with ``random.Random(f"longembed-hotpotqa:{seed}")`` and take the first
   ``num_queries`` (300) whose 10 paragraph titles are all unused by questions taken before. So a
   passage (identified by its Wikipedia title) belongs to one question only, and the gold paragraphs
   of a question are in its document and nowhere else.
2. A question's document starts from its own 10 paragraphs (2 supporting + 8 distractors, as in the
   source datasets, where a question's context holds both).
3. It is then filled with paragraphs of *other*, unselected questions (their non-supporting
   paragraphs only, each title used once in the whole corpus, in shuffled order) while it stays within
   ``doc_words`` (6,000) words. Documents end up with 5.9k-6.0k words (LongEmbed's 2WikiMQA: 6,132 on
   average, but with a wide spread of lengths; here lengths are nearly equal).
4. The paragraphs of a document are shuffled, so the supporting paragraphs sit at random depths, and
   written as LongBench writes 2wikimqa contexts: ``"Passage <n>:\\n<title>\\n<text>"``, joined by newlines.

Queries are the questions (id ``hotpotqa-<HotpotQA _id>``); each has one relevant document.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path

from longembed.errors import UserError
from longembed.tasks.base import RetrievalData, TaskMetadata, check_length, read_json_file, require_dir
from longembed.tasks.registry import register_task

SUBDIR = "hotpotqa_dev_distractor"
FILENAME = "hotpot_dev_distractor_v1.json.gz"
DEFAULT_SEED = 20240418
DEFAULT_NUM_QUERIES = 300
DEFAULT_DOC_WORDS = 6000

METADATA = TaskMetadata(
    name="hotpotqa",
    description="HotpotQA dev (distractor): a multi-hop question -> the ~6k-word document of Wikipedia "
    "passages that holds its supporting paragraphs (300 questions); stand-in for 2WikiMultihopQA.",
    main_score="ndcg@10",
    lengths=None,
    source=f"Needs <data_dir>/{SUBDIR}/{FILENAME} (HotpotQA dev distractor set, "
    "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json; gzip it).",
    stand_in_for="2WikiMultihopQA",
    title="HotpotQA (WQA)",
)


@functools.lru_cache(maxsize=2)
def _read(path: str) -> list[dict]:
    examples = read_json_file(Path(path))
    if not isinstance(examples, list):
        raise UserError(f"{path}: expected a JSON list of HotpotQA examples, got {type(examples).__name__}")
    return examples


def read_hotpotqa(path: Path | str) -> list[dict]:
    """The HotpotQA examples of a ``.json`` or ``.json.gz`` file (cached; do not modify them)."""
    return _read(str(Path(path).resolve()))


def _passage(title: str, sentences: list[str]) -> tuple[str, str]:
    return title, "".join(sentences).strip()


def _format(n: int, title: str, text: str) -> str:
    return f"Passage {n}:\n{title}\n{text}"


def _words(title: str, text: str) -> int:
    return len(_format(0, title, text).split())


@dataclass(frozen=True)
class HotpotQASelection:
    """Which HotpotQA examples and paragraphs the task uses: ``questions`` (indices into the examples,
    in task order) and ``documents`` (each question's passages as (title, text), in document order)."""

    questions: list[int]
    documents: list[list[tuple[str, str]]]

    def question_ids(self, examples: list[dict]) -> frozenset[str]:
        """The HotpotQA ``_id`` of every question the task asks."""
        return frozenset(examples[i]["_id"] for i in self.questions)

    def titles(self) -> frozenset[str]:
        """The Wikipedia title of every paragraph in the task's corpus."""
        return frozenset(title for passages in self.documents for title, _ in passages)


def select_hotpotqa(
    examples: list[dict],
    num_queries: int = DEFAULT_NUM_QUERIES,
    doc_words: int = DEFAULT_DOC_WORDS,
    seed: int = DEFAULT_SEED,
) -> HotpotQASelection:
    """Steps 1-4 of the recipe (module docstring): the questions and each one's shuffled passages.

    Training code uses it to leave out everything the benchmark asks and searches.
    """
    rng = random.Random(f"longembed-hotpotqa:{seed}")
    order = list(range(len(examples)))
    rng.shuffle(order)

    selected: list[int] = []
    claimed: set[str] = set()
    for i in order:
        titles = {title for title, _ in examples[i]["context"]}
        supporting = {title for title, _ in examples[i]["supporting_facts"]}
        if titles & claimed or not supporting <= titles:
            continue
        selected.append(i)
        claimed |= titles
        if len(selected) == num_queries:
            break
    if len(selected) < num_queries:
        raise UserError(f"only {len(selected)} questions with disjoint passages; asked for {num_queries}")

    chosen = set(selected)
    pool: list[tuple[str, str]] = []
    for i in order:
        if i in chosen:
            continue
        supporting = {title for title, _ in examples[i]["supporting_facts"]}
        for title, sentences in examples[i]["context"]:
            if title in supporting or title in claimed:
                continue
            claimed.add(title)
            pool.append(_passage(title, sentences))

    documents: list[list[tuple[str, str]]] = []
    next_filler = 0
    for i in selected:
        passages = [_passage(title, sentences) for title, sentences in examples[i]["context"]]
        words = sum(_words(*p) for p in passages)
        while next_filler < len(pool) and words + _words(*pool[next_filler]) <= doc_words:
            words += _words(*pool[next_filler])
            passages.append(pool[next_filler])
            next_filler += 1
        if next_filler >= len(pool):
            raise UserError("ran out of filler passages; lower doc_words or num_queries")
        rng.shuffle(passages)
        documents.append(passages)
    return HotpotQASelection(selected, documents)


def build_hotpotqa(
    examples: list[dict],
    num_queries: int = DEFAULT_NUM_QUERIES,
    doc_words: int = DEFAULT_DOC_WORDS,
    seed: int = DEFAULT_SEED,
) -> RetrievalData:
    """Build the question -> long document data from HotpotQA examples (recipe in the module docstring)."""
    selection = select_hotpotqa(examples, num_queries, doc_words, seed)
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for k, (i, passages) in enumerate(zip(selection.questions, selection.documents, strict=True)):
        doc_id = f"hotpotqa-doc{k:03d}"
        corpus[doc_id] = "\n".join(_format(n, t, x) for n, (t, x) in enumerate(passages, start=1))
        qid = f"hotpotqa-{examples[i]['_id']}"
        queries[qid] = examples[i]["question"]
        qrels[qid] = {doc_id: 1}
        spans = supporting_spans(examples[i], passages)
        if spans:
            answers[qid] = {doc_id: spans}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels, answers=answers).validate()


def supporting_spans(example: dict, passages: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """The character spans, in the document built from ``passages``, of the example's supporting facts
    (HotpotQA's (title, sentence number) pairs): where the document answers the question.  A fact whose
    sentence is only whitespace is skipped."""
    sentences = {title: list(s) for title, s in example["context"]}
    spans, position = [], 0
    for n, (title, text) in enumerate(passages, start=1):
        body = position + len(_format(n, title, text)) - len(text)  # where the passage's text starts
        if title in sentences:
            joined = "".join(sentences[title])
            lead = len(joined) - len(joined.lstrip())  # _passage strips the joined sentences
            for fact_title, index in example["supporting_facts"]:
                if fact_title != title or not 0 <= index < len(sentences[title]):
                    continue
                start = sum(len(s) for s in sentences[title][:index]) - lead
                sentence = sentences[title][index]
                first = start + len(sentence) - len(sentence.lstrip())
                last = start + len(sentence.rstrip())
                if last > first:
                    spans.append((body + max(first, 0), body + min(last, len(text))))
        position += len(_format(n, title, text)) + 1
    return sorted(spans)


class HotpotQATask:
    """Multi-hop question -> long Wikipedia document (stand-in for 2WikiMultihopQA)."""

    metadata = METADATA

    def __init__(
        self,
        num_queries: int = DEFAULT_NUM_QUERIES,
        doc_words: int = DEFAULT_DOC_WORDS,
        seed: int = DEFAULT_SEED,
    ) -> None:
        self.num_queries = num_queries
        self.doc_words = doc_words
        self.seed = seed

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        """Read ``<data_dir>/hotpotqa_dev_distractor/hotpot_dev_distractor_v1.json.gz`` and build the task."""
        check_length(METADATA, length)
        path = require_dir(data_dir, f"{SUBDIR}/{FILENAME}", METADATA)
        return build_hotpotqa(read_hotpotqa(path), self.num_queries, self.doc_words, self.seed)


register_task(METADATA, HotpotQATask)
