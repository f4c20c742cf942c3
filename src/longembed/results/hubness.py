"""Which documents a unit's queries ranked first, and whether one of them is a *hub*.

A hub is a document that comes first for many queries that do not ask for it: the retrieval side of
the length collapse of the third paper (long texts' vectors crowd together, so one of them sits nearest
to most queries).  It is how the retrofitted MiniLM fails passkey at 2k: one document, whose key
sentence is 19 words in, is ranked first for 96 of 200 queries; and how MiniLM + PI at 4k reads QMSum:
its shortest meeting comes first for 706 of 1,527 queries (RESULTS.md).  A score alone does not tell
a hub from vectors that are merely poor; this record does, for every unit of a run.  Documents that
share a vector (truncated to the same text) are counted as one, so identical inputs are not mistaken
for collapse.

The rule's thresholds are a judgement.  The hubness literature's threshold-free measure is kept beside
it: the skewness of N1, how many queries rank each document first, over all the unit's documents
(Radovanovic, Nanopoulos and Ivanovic, "Hubs in space", JMLR 2010, with k = 1), next to the skewness
of how many queries ask for each document, which is what perfect retrieval would give (0 for passkey
and needle, where every document is asked for by at most one query; positive on QMSum, whose queries
ask for some meetings more than others).

:func:`first_ranked_summary` computes the record from each query's first-ranked document and the
relevance judgements; :attr:`FirstRanked.is_hub` applies the rule documented on :data:`HUB_RULE`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from longembed.results.codec import Record

#: A document is a hub when it is ranked first for at least HUB_MIN_QUERIES queries, at least
#: HUB_MIN_SHARE of the unit's queries, and at least HUB_FACTOR times as many queries as judge it
#: relevant (so a document that many queries rightly ask for, as a QMSum meeting is, is no hub).
HUB_MIN_QUERIES = 5
HUB_MIN_SHARE = 0.10
HUB_FACTOR = 3
HUB_RULE = (
    f"a hub is a document ranked first for at least {HUB_MIN_QUERIES} queries and {HUB_MIN_SHARE:.0%} of "
    f"them, and for at least {HUB_FACTOR}x the queries that judge it relevant"
)


@dataclass
class FirstRanked(Record):
    """The documents one unit's queries ranked first, summarised.

    Documents with the same vector (*twins*: they score the same for every query, as documents that
    read the same after truncation do) count as one, named by their smallest id: which of them comes
    first is decided by float noise, so counted apart they would hide a hub among them.

    ``distinct``: how many different documents (twins as one) came first; ``distinct_relevant``: how
    many different documents the queries ask for (what perfect retrieval puts first).  ``top_document``
    (with its ``top_twins`` twins) came first most often, for ``top_count`` queries, and
    ``top_relevant_for`` queries judge it (or a twin) relevant; ties: the smallest document id.  A hub
    with twins is an artefact of identical inputs, not of collapse.  ``documents`` and
    ``distinct_vectors``: the unit's documents and how many different vectors they have (fewer when
    many read the same, as shared-prefix documents truncated do: then a few that differ draw the
    queries).  The last three are None when twins were not looked for.  ``skewness``: the skewness
    of N1 (queries that rank a document first) over the unit's documents, twins as one;
    ``asked_skewness``: the same of the queries that judge each document relevant, what perfect
    retrieval gives.  Both None when the unit's documents were not known.
    """

    queries: int
    distinct: int
    distinct_relevant: int
    top_document: str
    top_count: int
    top_relevant_for: int
    top_twins: int | None = field(default=None, metadata={"omit_none": True})
    documents: int | None = field(default=None, metadata={"omit_none": True})
    distinct_vectors: int | None = field(default=None, metadata={"omit_none": True})
    skewness: float | None = field(default=None, metadata={"omit_none": True})
    asked_skewness: float | None = field(default=None, metadata={"omit_none": True})

    @property
    def top_share(self) -> float:
        """The share of queries whose first document is ``top_document`` or a twin (0..1)."""
        return self.top_count / self.queries if self.queries else 0.0

    @property
    def is_hub(self) -> bool:
        """Whether ``top_document`` is a hub (:data:`HUB_RULE`)."""
        return (
            self.top_count >= HUB_MIN_QUERIES
            and self.top_share >= HUB_MIN_SHARE
            and self.top_count >= HUB_FACTOR * max(1, self.top_relevant_for)
        )

    def describe(self) -> str:
        """One line: "passkey-2048-doc017 is ranked first for 96 of 200 queries (relevant to 1); 23
        distinct documents ranked first, 200 asked for", and its twins when it has any."""
        name = self.top_document
        if self.top_twins:
            name += (f" or one of its {self.top_twins} twins (documents with its vector: identical text after "
                     "truncation?)")
        line = (
            f"{name} is ranked first for {self.top_count} of {self.queries} queries (relevant to "
            f"{self.top_relevant_for}); {self.distinct} distinct documents ranked first, "
            f"{self.distinct_relevant} asked for"
        )
        if self.shared_vectors:
            line += f"; the {self.documents} documents have only {self.distinct_vectors} distinct vectors"
        if self.skewness is not None and self.asked_skewness is not None:
            line += f"; N1 skewness {self.skewness:.1f} (perfect retrieval: {self.asked_skewness:.1f})"
        return line

    @property
    def shared_vectors(self) -> bool:
        """Whether some of the unit's documents have the same vector (known only when counted)."""
        return self.documents is not None and self.distinct_vectors is not None and \
            self.distinct_vectors < self.documents


def first_ranked_summary(
    first: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    twins: Mapping[str, Collection[str]] | None = None,
    documents: Collection[str] | None = None,
) -> FirstRanked | None:
    """The :class:`FirstRanked` of the queries in ``first`` (query id -> its first-ranked document)
    judged in ``qrels`` (query id -> document id -> relevance; relevant = relevance > 0).

    ``twins`` maps every document of the unit to the documents with its vector, itself included
    (None: not known; every document counts alone, and the counts of twins and vectors are None).
    ``documents``: the unit's documents, for the skewness when ``twins`` is None (with twins, their
    keys are the documents).  None when no judged query was ranked."""
    judged = {q: d for q, d in first.items() if q in qrels}
    if not judged:
        return None
    group = {d: frozenset(twins[d]) if twins is not None else frozenset((d,)) for d in set(judged.values())}
    counts = Counter(min(group[d]) for d in judged.values())
    top_document = min(counts, key=lambda d: (-counts[d], d))
    top_group = next(g for g in group.values() if min(g) == top_document)
    relevant = [{d for d, rel in qrels[q].items() if rel > 0} for q in judged]
    vectors = _vector_names(twins, documents)
    asked = None if vectors is None else Counter(
        name for docs in relevant for name in {vectors[d] for d in docs if d in vectors}
    )
    names = None if vectors is None else set(vectors.values())
    return FirstRanked(
        queries=len(judged),
        distinct=len(counts),
        distinct_relevant=len(set().union(*relevant)),
        top_document=top_document,
        top_count=counts[top_document],
        top_relevant_for=sum(bool(top_group & docs) for docs in relevant),
        top_twins=None if twins is None else len(top_group) - 1,
        documents=None if twins is None else len(twins),
        distinct_vectors=None if twins is None else len({frozenset(g) for g in twins.values()}),
        skewness=None if names is None else _rounded(skewness([counts.get(n, 0) for n in sorted(names)])),
        asked_skewness=None if names is None else _rounded(skewness([asked.get(n, 0) for n in sorted(names)])),
    )


def _vector_names(twins: Mapping[str, Collection[str]] | None,
                  documents: Collection[str] | None) -> dict[str, str] | None:
    """Every document -> the name of its vector (the smallest id among its twins); None if unknown."""
    if twins is not None:
        return {d: min(group) for d, group in twins.items()}
    return None if documents is None else {d: d for d in documents}


def skewness(values: Sequence[float]) -> float:
    """The population skewness m3 / m2^1.5 of ``values`` (``scipy.stats.skew(bias=True)``); 0 when
    they are all equal."""
    n = len(values)
    mean = sum(values) / n
    m2 = sum((v - mean) ** 2 for v in values) / n
    m3 = sum((v - mean) ** 3 for v in values) / n
    return 0.0 if m2 <= 1e-12 * max(1.0, mean * mean) else m3 / math.sqrt(m2) ** 3


def _rounded(value: float) -> float:
    return round(value, 3)


def hub_line(task: str, length: int | None, stats: FirstRanked) -> str:
    """What ``eval`` prints for a hub: "hub at passkey/2048: passkey-2048-doc383 is ranked first ..."."""
    return f"hub at {task if length is None else f'{task}/{length}'}: {stats.describe()}"
