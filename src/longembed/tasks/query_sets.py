"""How many queries a generated task (passkey, needle) asks per length, and the nesting of its sets.

LongEmbed asks 50 queries per length over 100 shared documents: two documents per query.  With
``queries_per_length=N`` the sets stay two documents per query, and they are nested, so that the
published 50-query numbers stay comparable and cached vectors stay useful:

* N = 50: exactly the paper's set (byte-identical to what longembed always generated);
* N > 50: the 50-set, plus 2(N - 50) new documents and N - 50 new queries about them, drawn from a
  second random stream (so the 50-set is untouched and the N-set is a prefix of every larger one);
* N < 50: :func:`first_queries` of the 50-set: its first N queries, their relevant documents and the
  lowest-numbered other documents up to 2N (document ids keep their numbers).

Every query of a set ranks against all of the set's documents.
"""

from __future__ import annotations

from longembed.tasks.base import RetrievalData

#: LongEmbed's queries per length (section 3.2); the default.
PAPER_QUERIES = 50
#: Documents per query (LongEmbed: 100 candidate documents shared by 50 queries).
DOCUMENTS_PER_QUERY = 2


def check_queries_per_length(n: int) -> int:
    """``n`` if it is a whole number >= 1, else a ValueError."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"queries_per_length must be a whole number >= 1, got {n!r}")
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
