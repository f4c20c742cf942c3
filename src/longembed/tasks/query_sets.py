"""How many queries a generated task (passkey, needle) asks per length, and the nesting of its sets.

LongEmbed asks 50 queries per length over 100 shared documents: two documents per query.  With
``queries_per_length=N`` the sets stay two documents per query, and they are nested, so that the
published 50-query numbers stay comparable and cached vectors stay useful:

* N = 50: exactly the paper's set (byte-identical to what longembed always generated);
* N > 50: the 50-set, plus 2(N - 50) new documents and N - 50 new queries about them, drawn from a
  second random stream (so the 50-set is untouched and the N-set is a prefix of every larger one);
* N < 50: :func:`first_queries` of the 50-set: its first N queries, their relevant documents and the
  lowest-numbered other documents up to 2N (document ids keep their numbers).

Every query of a set ranks against all of the set's documents (candidates "all", the default), so a
larger set is a harder task: its queries face 2N documents, where the paper's face 100.  Candidates
"blocks" keep the paper's difficulty with N queries' precision: :func:`paper_blocks` cuts the set into
N / 50 blocks (the 50-set and its 100 documents, then each next 50 new queries and their 100 new
documents), and a query ranks only its own block's documents.
"""

from __future__ import annotations

from dataclasses import replace

from longembed.errors import UserError
from longembed.tasks.base import Blocks, RetrievalData

#: LongEmbed's queries per length (section 3.2); the default.
PAPER_QUERIES = 50
#: Documents per query (LongEmbed: 100 candidate documents shared by 50 queries).
DOCUMENTS_PER_QUERY = 2


#: Which documents a query ranks: every document of its set, or its block's (:func:`paper_blocks`).
ALL_CANDIDATES, BLOCK_CANDIDATES = "all", "blocks"
CANDIDATE_MODES = (ALL_CANDIDATES, BLOCK_CANDIDATES)


def check_queries_per_length(n: int) -> int:
    """``n`` if it is a whole number >= 1, else a ValueError."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UserError(f"queries_per_length must be a whole number >= 1, got {n!r}")
    return n


def first_queries(data: RetrievalData, n: int) -> RetrievalData:
    """The first ``n`` queries of ``data`` (in its order), their relevant documents and the first other
    documents (in corpus order) up to ``2 n`` documents; ``data`` itself if it has at most ``n`` queries."""
    if n >= len(data.queries):
        return data
    qids = list(data.queries)[:n]
    relevant = {doc for qid in qids for doc, rel in data.qrels[qid].items() if rel > 0}
    others = [doc for doc in data.corpus if doc not in relevant]
    keep = relevant | set(others[: max(0, DOCUMENTS_PER_QUERY * n - len(relevant))])
    return RetrievalData(
        corpus={doc: text for doc, text in data.corpus.items() if doc in keep},
        queries={qid: data.queries[qid] for qid in qids},
        qrels={qid: {doc: rel for doc, rel in data.qrels[qid].items() if doc in keep} for qid in qids},
    ).validate()


def check_candidates(candidates: str, queries_per_length: int = PAPER_QUERIES) -> str:
    """``candidates`` if it is one of :data:`CANDIDATE_MODES` and fits the set's size, else a ValueError:
    blocks need a whole number of the paper's 50-query blocks."""
    if candidates not in CANDIDATE_MODES:
        raise UserError(f"candidates must be one of {', '.join(CANDIDATE_MODES)}, got {candidates!r}")
    if candidates == BLOCK_CANDIDATES and queries_per_length % PAPER_QUERIES:
        raise UserError(
            f"candidates 'blocks' ranks each {PAPER_QUERIES} queries among their own {DOCUMENTS_PER_QUERY * PAPER_QUERIES} "
            f"documents: the queries per length must be a multiple of {PAPER_QUERIES}, got {queries_per_length}"
        )
    return candidates


def with_candidates(data: RetrievalData, candidates: str) -> RetrievalData:
    """``data`` as the run's ``candidates`` mode scores it: itself ("all"), or cut into :func:`paper_blocks`."""
    return paper_blocks(data) if check_candidates(candidates, len(data.queries)) == BLOCK_CANDIDATES else data


def paper_blocks(data: RetrievalData) -> RetrievalData:
    """A generated set cut into blocks of the paper's size, in its order: query j is in block j // 50,
    document i in block i // 100.  The nesting of the sets (module docstring) puts every query's
    documents in its block; :meth:`RetrievalData.validate` checks it."""
    if len(data.queries) % PAPER_QUERIES or len(data.corpus) != DOCUMENTS_PER_QUERY * len(data.queries):
        raise UserError(
            f"blocks need {PAPER_QUERIES} queries and {DOCUMENTS_PER_QUERY * PAPER_QUERIES} documents per block; the set "
            f"has {len(data.queries)} queries and {len(data.corpus)} documents"
        )
    per_block = DOCUMENTS_PER_QUERY * PAPER_QUERIES
    blocks = Blocks(
        queries={qid: j // PAPER_QUERIES for j, qid in enumerate(data.queries)},
        documents={doc: i // per_block for i, doc in enumerate(data.corpus)},
    )
    return replace(data, blocks=blocks).validate()
