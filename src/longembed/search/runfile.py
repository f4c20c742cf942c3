"""TREC run files from searches: ``qid Q0 docid rank score tag``, one line per ranked document.

Scores are written strictly decreasing down each query's list, in the order the search ranked
(:func:`longembed.retrieval.ranking.strictly_decreasing`), so trec_eval, pytrec_eval or any tool that
re-sorts by score (trec_eval breaks ties by document id, descending) reads the very ranking eval
scored.  Scores are written with ``repr``, which reads back as the same float.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from longembed.search.index import SearchIndex, SearchResult
from longembed.tasks.task_dir import read_queries

#: a run's default depth (eval ranks this many documents per query)
RUN_DEPTH = 100


def run_lines(query_id: str, results: Sequence[SearchResult], tag: str) -> Iterable[str]:
    for result in results:
        yield f"{query_id} Q0 {result.id} {result.rank} {result.score!r} {tag}\n"


def write_run(index: SearchIndex, queries_file: str | Path, output: str | Path, k: int = RUN_DEPTH,
              tag: str | None = None, batch: int = 64, exact: bool = False) -> int:
    """Search every query of ``queries_file`` (BEIR queries.jsonl: ``_id``/``id`` and ``text``) and write
    the run to ``output`` (written to a temporary file first, then renamed: never half a file);
    ``exact``: scan every vector even if the index has an ANN index.  A run file has no passages, so
    none is chosen (``passages="chunk"``: nothing embedded beyond the queries).  Returns the number of queries."""
    queries = read_queries(Path(queries_file))
    tag = tag or f"longembed-{index.strategy.name}"
    output = Path(output)
    partial = output.with_name(output.name + ".partial")
    ids, texts = list(queries), list(queries.values())
    with open(partial, "w", encoding="utf-8") as handle:
        for start in range(0, len(ids), batch):
            for query_id, results in zip(ids[start : start + batch],
                                         index.search_many(texts[start : start + batch], k, exact=exact,
                                                            passages="chunk"), strict=True):
                handle.writelines(run_lines(query_id, results, tag))
    partial.replace(output)
    return len(ids)
