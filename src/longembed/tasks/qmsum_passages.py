"""QMSum passages: a specific query -> the passages of its meeting that answer it.

LongEmbed's QMSum asks "which meeting?"; a RAG user asks "where in the meeting?".  QMSum's specific
queries (the ``query`` field of ``specific_query_list``) come with the transcript turns that answer
them (``relevant_text_span``: inclusive ranges of turn indices).  Here the corpus is the meetings cut
into passages, and a query searches the passages of its own meeting (``query_contexts``): a passage
is relevant when it holds at least one answering turn.

Passages are model-independent, so every model and chunking method is scored on the same corpus:
consecutive turns packed while they fit in ``PASSAGE_WORDS`` = 192 words (about 256 tokens at
LongEmbed's 0.75 words per token); a turn longer than that is cut into 192-word pieces.  A meeting's
text is the one the ``qmsum`` task embeds (``speaker: content`` lines).  Data: the 197 meetings of
``qmsum/data/ALL/{train,val}`` (the ``qmsum`` task's meetings), 1,332 specific queries.

Ids: passage ``<meeting>-p<nnn>``, query ``<meeting>-s<nn>`` (the same question asked of two meetings
is two queries).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from longembed.errors import UserError
from longembed.tasks.base import (
    Passage,
    RetrievalData,
    TaskMetadata,
    check_length,
    require_dir,
    require_fields,
)
from longembed.tasks.qmsum import SPLITS, SUBDIR, meeting_document, meeting_files, read_meeting
from longembed.tasks.registry import register_task

PASSAGE_WORDS = 192

METADATA = TaskMetadata(
    name="qmsum_passages",
    description="QMSum specific queries -> the ~192-word passages of their meeting that hold the answering turns.",
    main_score="ndcg@10",
    lengths=None,
    source=f"Needs <data_dir>/{SUBDIR}/{{train,val}}/*.json from https://github.com/Yale-LILY/QMSum (folder data/ALL).",
)

_WORD = re.compile(r"\S+")


def turn_spans(meeting: dict) -> list[tuple[int, int]]:
    """Character span of each turn's line in :func:`~longembed.tasks.qmsum.meeting_document`."""
    spans, start = [], 0
    for turn in meeting["meeting_transcripts"]:
        line = f"{turn['speaker']}: {turn['content']}"
        spans.append((start, start + len(line)))
        start += len(line) + 1  # the "\n" between lines
    return spans


def meeting_passages(document: str, turns: list[tuple[int, int]], words: int = PASSAGE_WORDS) -> list[tuple[int, int, list[int]]]:
    """(start, end, turn indices) of each passage: turns packed up to ``words`` words, long turns cut."""
    passages: list[tuple[int, int, list[int]]] = []
    current: list[int] = []
    count = 0

    def close() -> None:
        nonlocal current, count
        if current:
            passages.append((turns[current[0]][0], turns[current[-1]][1], current))
        current, count = [], 0

    for index, (start, end) in enumerate(turns):
        found = [m.span() for m in _WORD.finditer(document, start, end)]
        if len(found) > words:
            close()
            for k in range(0, len(found), words):
                piece = found[k : k + words]
                passages.append((piece[0][0], piece[-1][1], [index]))
            continue
        if count + len(found) > words:
            close()
        current.append(index)
        count += len(found)
    close()
    return passages


def relevant_turns(item: dict, n_turns: int, where: str) -> set[int]:
    """The turn indices of a query's ``relevant_text_span`` (inclusive [start, end] pairs)."""
    turns: set[int] = set()
    for pair in item["relevant_text_span"]:
        start, end = int(pair[0]), int(pair[1])
        if not 0 <= start <= end < n_turns:
            raise UserError(f"{where}: relevant_text_span {pair} is outside the meeting's {n_turns} turns")
        turns.update(range(start, end + 1))
    return turns


def load_qmsum_passages(root: Path, words: int = PASSAGE_WORDS, splits: Sequence[str] = SPLITS) -> RetrievalData:
    """Build the passage task from the meetings of ``splits`` in ``root`` = ``<data_dir>/qmsum/data/ALL``."""
    corpus: dict[str, str] = {}
    contexts: dict[str, str] = {}
    passages: dict[str, Passage] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    query_contexts: dict[str, str] = {}
    for path in meeting_files(root, splits):
        meeting = require_fields(read_meeting(path), ("specific_query_list",), f"{path} (a QMSum meeting file)")
        meeting_id = path.stem
        document = meeting_document(meeting)
        contexts[meeting_id] = document
        turns = turn_spans(meeting)
        passage_of_turn: dict[int, list[str]] = {}
        for k, (start, end, turn_ids) in enumerate(meeting_passages(document, turns, words)):
            doc_id = f"{meeting_id}-p{k:03d}"
            corpus[doc_id] = document[start:end]
            passages[doc_id] = Passage(meeting_id, start, end)
            for t in turn_ids:
                passage_of_turn.setdefault(t, []).append(doc_id)
        for j, item in enumerate(meeting["specific_query_list"]):
            where = f"{path}, specific_query_list[{j}]"
            require_fields(item, ("query", "relevant_text_span"), where)
            qid = f"{meeting_id}-s{j:02d}"
            queries[qid] = item["query"]
            query_contexts[qid] = meeting_id
            relevant = relevant_turns(item, len(turns), where)
            qrels[qid] = {doc_id: 1 for t in sorted(relevant) for doc_id in passage_of_turn[t]}
    data = RetrievalData(corpus, queries, qrels, contexts=contexts, passages=passages, query_contexts=query_contexts)
    return data.validate()


class QMSumPassagesTask:
    """The passage-level QMSum task (see the module docstring)."""

    metadata = METADATA

    def __init__(self, passage_words: int = PASSAGE_WORDS, splits: Sequence[str] = SPLITS):
        """splits: QMSum's "train" and/or "val" meetings (default both; "val" alone is 35 of the 197)."""
        if passage_words < 1:
            raise UserError(f"passage_words must be positive, got {passage_words}")
        unknown = sorted(set(splits) - set(SPLITS))
        if unknown or not splits:
            raise UserError(f"splits must be a non-empty selection of {SPLITS}, got {tuple(splits)}")
        self.passage_words = passage_words
        self.splits = tuple(splits)

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        """Read ``<data_dir>/qmsum/data/ALL``; raises TaskDataMissing if it is absent."""
        check_length(METADATA, length)
        return load_qmsum_passages(require_dir(data_dir, SUBDIR, METADATA), self.passage_words, self.splits)


register_task(METADATA, QMSumPassagesTask)
