"""SQuALITY (Wang et al., 2022) as a stand-in for LongEmbed's SummScreenFD: summary -> story.

SummScreenFD (human summary of a TV episode -> its ~5.6k-word transcript) is not reachable here.
SQuALITY has the same shape: 127 Project Gutenberg short stories (3.3k-6.8k words, mean 5.0k) with
human-written summaries. Every story comes with five questions; question 1 is always "What is the
plot of the story?", answered by four different writers: a general summary of the whole story, the
counterpart of a SummScreenFD recap. The other four questions ask about one character or detail and
are not used (they are query-focused, closer to QMSum).

Task: queries = the four plot summaries of every story (508 queries, mean 425 words; a SummScreenFD
query has ~100 words), documents = the 127 stories (``document`` field, verbatim), one relevant
document per query. ``max_summaries_per_story`` keeps only the first k writers' summaries. All three
files (train, dev, test) are used: none of them is used to train anything here.

Ids: a story is named ``squality-<passage_id>``, a query ``squality-<passage_id>-s<k>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from longembed.errors import MissingFileError, UserError
from longembed.tasks.base import (
    RetrievalData,
    TaskMetadata,
    check_length,
    iter_jsonl,
    require_dir,
    require_fields,
)
from longembed.tasks.registry import register_task

SUBDIR = "squality/data/v1-3/txt"
FILES = ("train.jsonl", "dev.jsonl", "test.jsonl")
PLOT_QUESTION = "What is the plot of the story?"

METADATA = TaskMetadata(
    name="squality",
    description="SQuALITY: a human plot summary of a short story -> the story (127 stories); "
    "stand-in for SummScreenFD.",
    main_score="ndcg@10",
    lengths=None,
    source=f"Needs <data_dir>/{SUBDIR}/{{train,dev,test}}.jsonl from https://github.com/nyu-mll/SQuALITY "
    "(folder data/v1-3/txt).",
    stand_in_for="SummScreenFD",
    title="SQuALITY (SFD)",
)


def read_stories(root: Path, require_all: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, story) for every story of the train, dev and test files of ``root``, checked.

    ``require_all=False`` reads the files that exist (at least one), for uses that need stories, not
    the benchmark's exact set.
    """
    present = [name for name in FILES if (root / name).exists()]
    if not present or (require_all and len(present) < len(FILES)):
        missing = [name for name in FILES if name not in present]
        raise MissingFileError(f"{root}: {', '.join(missing)} missing (SQuALITY has train, dev and test files)")
    for name in present:
        path = root / name
        for lineno, story in iter_jsonl(path):
            where = f"{path}:{lineno}"
            require_fields(story, ("metadata", "document", "questions"), where)
            require_fields(story["metadata"], ("passage_id",), where + " metadata")
            yield where, story


def load_squality(root: Path, max_summaries_per_story: int | None = None) -> RetrievalData:
    """Build the summary -> story data from ``root`` = ``<data_dir>/squality/data/v1-3/txt``."""
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for _, story in read_stories(root):
        doc_id = f"squality-{story['metadata']['passage_id']}"
        if doc_id in corpus:
            raise UserError(f"story {doc_id} occurs twice under {root}")
        corpus[doc_id] = story["document"]
        plot = [q for q in story["questions"] if q["question_text"].strip() == PLOT_QUESTION]
        if len(plot) != 1:
            raise UserError(f"story {doc_id}: {len(plot)} questions {PLOT_QUESTION!r}, expected 1")
        responses = plot[0]["responses"][:max_summaries_per_story]
        for k, response in enumerate(responses):
            qid = f"{doc_id}-s{k}"
            queries[qid] = response["response_text"]
            qrels[qid] = {doc_id: 1}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels).validate()


class SQuALITYTask:
    """Plot summary -> story retrieval on SQuALITY (stand-in for SummScreenFD)."""

    metadata = METADATA

    def __init__(self, max_summaries_per_story: int | None = None) -> None:
        if max_summaries_per_story is not None and max_summaries_per_story < 1:
            raise UserError("max_summaries_per_story must be at least 1 (or None for all)")
        self.max_summaries_per_story = max_summaries_per_story

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        """Read ``<data_dir>/squality/data/v1-3/txt``; raises TaskDataMissing if it is absent."""
        check_length(METADATA, length)
        return load_squality(require_dir(data_dir, SUBDIR, METADATA), self.max_summaries_per_story)


register_task(METADATA, SQuALITYTask)
