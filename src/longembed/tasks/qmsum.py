"""QMSum (Zhong et al., 2021) as LongEmbed uses it: query-based meeting summaries -> their meeting.

Recipe (data README; reproduces LongEmbed's QMSum exactly, as checked against MTEB's statistics):
meetings of ``qmsum/data/ALL/train`` and ``qmsum/data/ALL/val`` (197, read in that order, files sorted
by name); a meeting's document is ``"\\n".join(f"{speaker}: {content}")`` over its transcript turns; the
queries are the ``answer`` fields (the summaries) of its ``general_query_list`` and
``specific_query_list``. 1,529 answers, 1,527 distinct texts: two answers occur in two meetings each,
and LongEmbed keeps one relevant document per query; here the first meeting in the order above.
Result: 197 documents (10,507,156 characters) and 1,527 queries (661,959 characters), one relevant
document each. The loader checks both counts and raises if the files give others.

Ids: a document is named after its meeting file (``Bed005``), a query ``qmsum-q<nnnn>`` in order of
first occurrence.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longembed.errors import UserError
from longembed.tasks.base import (
    RetrievalData,
    TaskMetadata,
    check_length,
    read_json_file,
    require_dir,
    require_fields,
)
from longembed.tasks.registry import register_task

SUBDIR = "qmsum/data/ALL"
SPLITS = ("train", "val")
EXPECTED_DOCS = 197
EXPECTED_QUERIES = 1527

METADATA = TaskMetadata(
    name="qmsum",
    description="QMSum: a query-based summary of a meeting -> the meeting transcript (197 meetings).",
    main_score="ndcg@10",
    lengths=None,
    source=f"Needs <data_dir>/{SUBDIR}/{{train,val}}/*.json from https://github.com/Yale-LILY/QMSum "
    "(folder data/ALL); or the hub layout of dwzhu/LongEmbed (get_task('qmsum', source='hub')).",
    title="QMSum",
    hub_config="qmsum",
)


def meeting_document(meeting: dict) -> str:
    """The transcript of a QMSum meeting as one text, one ``speaker: content`` line per turn."""
    return "\n".join(f"{turn['speaker']}: {turn['content']}" for turn in meeting["meeting_transcripts"])


def turn_spans(meeting: dict, turn_ranges: list, where: str) -> list[tuple[int, int]]:
    """The character spans in :func:`meeting_document` of a query's ``relevant_text_span`` (QMSum's
    inclusive [first, last] turn ranges, as strings): where the transcript answers the query."""
    starts, position = [], 0
    for turn in meeting["meeting_transcripts"]:
        starts.append(position)
        position += len(f"{turn['speaker']}: {turn['content']}") + 1
    spans = []
    for pair in turn_ranges:
        try:
            first, last = (int(x) for x in pair)
        except (TypeError, ValueError):
            raise UserError(f"{where}: relevant_text_span {pair!r} is not a pair of turn numbers") from None
        if not 0 <= first <= last < len(starts):
            raise UserError(f"{where}: relevant_text_span {pair!r} names turns outside 0..{len(starts) - 1}")
        spans.append((starts[first], starts[last] + len(f"{meeting['meeting_transcripts'][last]['speaker']}: "
                                                            f"{meeting['meeting_transcripts'][last]['content']}")))
    return spans


def meeting_files(root: Path, splits: Sequence[str] = SPLITS) -> list[Path]:
    """The meeting files of ``root`` = ``<data_dir>/qmsum/data/ALL``, in LongEmbed's order."""
    return [path for split in splits for path in sorted((root / split).glob("*.json"))]


def read_meeting(path: Path) -> dict[str, Any]:
    """One QMSum meeting file, checked: a clear error naming the file for anything else."""
    meeting = require_fields(read_json_file(path), ("meeting_transcripts",), f"{path} (a QMSum meeting file)")
    for i, turn in enumerate(meeting["meeting_transcripts"]):
        require_fields(turn, ("speaker", "content"), f"{path}, meeting_transcripts[{i}]")
    return meeting


def load_qmsum(root: Path) -> RetrievalData:
    """Build the QMSum retrieval data from ``root`` = ``<data_dir>/qmsum/data/ALL``."""
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, dict[str, list[tuple[int, int]]]] = {}
    query_id_of: dict[str, str] = {}
    for path in meeting_files(root):
        meeting = require_fields(
            read_meeting(path), ("general_query_list", "specific_query_list"), f"{path} (a QMSum meeting file)"
        )
        doc_id = path.stem
        if doc_id in corpus:
            raise UserError(f"meeting {doc_id} occurs twice under {root}")
        corpus[doc_id] = meeting_document(meeting)
        for item in meeting["general_query_list"] + meeting["specific_query_list"]:
            answer = require_fields(item, ("answer",), f"{path}, a query of meeting {doc_id}")["answer"]
            if answer in query_id_of:  # the same summary in a later meeting: keep the first
                continue
            qid = f"qmsum-q{len(queries):04d}"
            query_id_of[answer] = qid
            queries[qid] = answer
            qrels[qid] = {doc_id: 1}
            spans = turn_spans(meeting, item.get("relevant_text_span") or [], f"{path}, query {answer[:40]!r}")
            if spans:
                answers[qid] = {doc_id: spans}
    if len(corpus) != EXPECTED_DOCS or len(queries) != EXPECTED_QUERIES:
        raise UserError(
            f"QMSum under {root}: {len(corpus)} meetings and {len(queries)} queries, expected "
            f"{EXPECTED_DOCS} and {EXPECTED_QUERIES} (LongEmbed's QMSum = Yale-LILY/QMSum data/ALL train+val)"
        )
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels, answers=answers).validate()


class QMSumTask:
    """LongEmbed's QMSum task, built from the original QMSum files."""

    metadata = METADATA

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        """Read ``<data_dir>/qmsum/data/ALL``; raises TaskDataMissing if it is absent."""
        check_length(METADATA, length)
        return load_qmsum(require_dir(data_dir, SUBDIR, METADATA))


register_task(METADATA, QMSumTask)
