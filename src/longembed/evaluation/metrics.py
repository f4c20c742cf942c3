"""Ranking and retrieval metrics (nDCG@k, MRR@k, recall@k, accuracy@1), equal to trec_eval's.

:func:`rank` turns a (queries x documents) score matrix into ranked document ids; :func:`retrieval_metrics`
scores rankings against graded relevance judgements. The definitions follow trec_eval (and so
pytrec_eval and MTEB), which the tests check on random runs:

* relevant = relevance > 0; gains are the relevance values (linear gain, not 2^rel - 1), the discount
  of rank r (1-based) is 1 / log2(r + 1), and the ideal DCG@k sorts *all* judged relevant documents;
* MRR@k = 1 / rank of the first relevant document within the top k (0 if none);
* recall@k = relevant documents in the top k / relevant documents judged;
* accuracy@1 = 1 if the top document is relevant (= trec_eval's P@1; with one relevant document of
  relevance 1 per query, as in passkey and needle, it equals nDCG@1 and MRR@1).

Every metric is averaged over the queries of ``qrels``; a query with no ranking, or with no relevant
document, scores 0 (as in trec_eval).

Ranking is :func:`longembed.retrieval.ranking.rank` (re-exported here), the rule ``longembed search``
ranks by too: ties by a fused run's tie-break key, then by document id, ascending (string order), which
is deterministic and independent of the order of the columns of the score matrix; trec_eval orders ties
differently (by document id, descending), so identical score matrices can give slightly different
numbers in the two when there are ties (a run file from ``longembed search`` lists strictly decreasing
scores, so it cannot). NaN scores rank last.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from longembed.errors import UserError
from longembed.retrieval.ranking import rank

DEFAULT_K_VALUES: tuple[int, ...] = (1, 3, 5, 10, 100)


#: Two documents whose scores differ by at most this for every query have the same vector, for
#: ranking's purposes: float32 vectors of one text encoded in different batches differ by ~1e-6.
TWIN_TOLERANCE = 1e-4


def same_vector_groups(
    scores: np.ndarray, doc_ids: Sequence[str], tolerance: float = TWIN_TOLERANCE
) -> dict[str, frozenset[str]]:
    """Every document -> the documents (itself included) whose column of the (queries x documents)
    score matrix equals its own for every query within ``tolerance``: the same vector, for ranking.

    Equal infinities count as equal, NaN never does.  Such columns' sums differ by at most queries x
    ``tolerance``, so the columns are taken in order of their sums and each is compared, column against
    column, only with the groups whose first member's sum lies that close: a corpus costs one sort and
    about one comparison per document, not one per pair.
    """
    scores = np.asarray(scores, dtype=np.float64)
    key = np.nan_to_num(scores, nan=np.nan, posinf=1e6, neginf=-1e6).sum(axis=0)
    gap = tolerance * max(1, scores.shape[0])
    groups: list[list[int]] = []
    window: deque[list[int]] = deque()  # the open groups, by their first member's sum
    for j in np.argsort(key, kind="stable").tolist():
        while window and key[window[0][0]] < key[j] - gap:
            window.popleft()
        match = None if np.isnan(key[j]) or not window else _matching_group(scores, j, window, tolerance)
        if match is not None:
            match.append(j)
            continue
        groups.append([j])
        if not np.isnan(key[j]):
            window.append(groups[-1])
    found = {}
    for group in groups:
        members = frozenset(doc_ids[j] for j in group)
        found |= dict.fromkeys(members, members)
    return found


def _matching_group(scores: np.ndarray, j: int, window: deque[list[int]], tolerance: float) -> list[int] | None:
    """The first group of ``window`` whose first member's column equals column ``j``: the first 32
    queries pick the candidates, all queries decide."""
    firsts = np.array([group[0] for group in window])
    candidates = np.flatnonzero(_same(scores[:32, firsts], scores[:32, [j]], tolerance))
    return next((window[c] for c in candidates.tolist()
                 if _same(scores[:, [firsts[c]]], scores[:, [j]], tolerance)[0]), None)


def _same(columns: np.ndarray, column: np.ndarray, tolerance: float) -> np.ndarray:
    """Which of ``columns`` equal ``column`` in every row within ``tolerance`` (equal infinities do;
    NaN never does)."""
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: those are decided by ==
        return ((columns == column) | (np.abs(columns - column) <= tolerance)).all(axis=0)


def _dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def per_query_metrics(
    qrels: Mapping[str, Mapping[str, int]],
    ranking: Mapping[str, Sequence[str]],
    k_values: Sequence[int] = DEFAULT_K_VALUES,
) -> dict[str, dict[str, float]]:
    """Each query's ``ndcg@k``, ``mrr@k``, ``recall@k`` (for each k) and ``accuracy@1``: metric ->
    query id -> value in [0, 1], in the order of ``qrels``.

    The per-query scores are what an interval or a paired comparison resamples.  A query with no
    relevant document or an empty ranking scores 0 (it still counts in the mean, as in BEIR/mteb).
    """
    if not qrels:
        raise UserError("qrels are empty")
    k_values = sorted(set(k_values))
    if not k_values or k_values[0] < 1:
        raise UserError(f"k_values must be positive integers, got {k_values}")
    names = [f"{m}@{k}" for m in ("ndcg", "mrr", "recall") for k in k_values] + ["accuracy@1"]
    per_query: dict[str, dict[str, float]] = {name: {} for name in names}
    for qid, judged in qrels.items():
        for name, value in _query_metrics(judged, ranking.get(qid, ()), qid, k_values).items():
            per_query[name][qid] = value
    return per_query


def _query_metrics(
    judged: Mapping[str, int], ranking: Sequence[str], qid: str, k_values: Sequence[int]
) -> dict[str, float]:
    """One query's metrics (every name present; 0.0 where nothing was found)."""
    relevant = {d: float(r) for d, r in judged.items() if r > 0}
    ranked = list(ranking)
    if len(set(ranked)) != len(ranked):
        raise UserError(f"the ranking of query {qid!r} lists a document twice")
    values = {f"{m}@{k}": 0.0 for m in ("ndcg", "mrr", "recall") for k in k_values}
    values["accuracy@1"] = 0.0
    if not relevant or not ranked:
        return values
    gains = [relevant.get(d, 0.0) for d in ranked]
    ideal = sorted(relevant.values(), reverse=True)
    first_hit = next((i for i, g in enumerate(gains) if g > 0), None)
    for k in k_values:
        values[f"ndcg@{k}"] = _dcg(gains[:k]) / _dcg(ideal[:k])
        if first_hit is not None and first_hit < k:
            values[f"mrr@{k}"] = 1.0 / (first_hit + 1)
        values[f"recall@{k}"] = sum(g > 0 for g in gains[:k]) / len(relevant)
    values["accuracy@1"] = float(gains[0] > 0)
    return values


def judged_at_k(qrels: Mapping[str, Mapping[str, int]], ranking: Mapping[str, Sequence[str]],
                k: int = 10) -> dict[str, float]:
    """Each query's judged@k (ir_measures' ``Judged@k``): the share of its top ``k`` documents the qrels
    judge, whatever the grade (0 included), in [0, 1]; over ``min(k, len(ranking))`` documents, so a
    corpus smaller than k can be fully judged; an empty ranking scores 0."""
    shares = {}
    for qid, judged in qrels.items():
        top = list(ranking.get(qid, ()))[:k]
        shares[qid] = sum(d in judged for d in top) / len(top) if top else 0.0
    return shares


def judges_non_relevant(qrels: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether the qrels judge some document not relevant (grade <= 0): pooled judgments, whose unjudged
    documents are unknown rather than known not relevant."""
    return any(grade <= 0 for judged in qrels.values() for grade in judged.values())


def retrieval_metrics(
    qrels: Mapping[str, Mapping[str, int]],
    ranking: Mapping[str, Sequence[str]],
    k_values: Sequence[int] = DEFAULT_K_VALUES,
) -> dict[str, float]:
    """Mean ``ndcg@k``, ``mrr@k``, ``recall@k`` (for each k) and ``accuracy@1`` over the queries of ``qrels``.

    Args:
        qrels: query id -> {document id: relevance grade}; every query in it is scored.
        ranking: query id -> its documents, best first (e.g. the output of :func:`rank`); a ranking
            only needs to be as long as the largest k.
        k_values: the cut-offs of ndcg, mrr and recall.

    Returns:
        Metric name -> value in [0, 1]: the means of :func:`per_query_metrics`, summed in the order of
        ``qrels``.

    Raises:
        UserError: an empty qrels, or a ranking that lists a document twice.
    """
    return mean_metrics(per_query_metrics(qrels, ranking, k_values))


def mean_metrics(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each metric's mean over its queries (:func:`per_query_metrics`' output), summed in query order."""
    return {name: _sequential_sum(values.values()) / len(values) for name, values in per_query.items()}


def _sequential_sum(values: Iterable[float]) -> float:
    """Left-to-right float sum (Python 3.12's ``sum`` compensates rounding, which would move published
    means in their last bits)."""
    total = 0.0
    for value in values:
        total += value
    return total


def evaluate_scores(
    scores: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    k_values: Sequence[int] = DEFAULT_K_VALUES,
) -> dict[str, float]:
    """:func:`rank` then :func:`evaluate`, keeping as many documents as the largest k needs."""
    return mean_metrics(per_query_scores(scores, query_ids, doc_ids, qrels, k_values))


def per_query_scores(
    scores: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    k_values: Sequence[int] = DEFAULT_K_VALUES,
) -> dict[str, dict[str, float]]:
    """:func:`rank` then :func:`per_query_metrics`: metric -> query id -> value."""
    return per_query_metrics(qrels, rank(scores, query_ids, doc_ids, top_k=max(k_values)), k_values)
