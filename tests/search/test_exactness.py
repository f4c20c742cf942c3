"""Search reproduces eval exactly (issue 42): index a BEIR task folder, search all its queries into a
TREC run file, score the file with pytrec_eval (trec_eval's rules) and get ``eval --task-dir``'s
nDCG@10 on the same folder, for every strategy.

The folder (``data/tiny_beir``) holds three copies of one document (``d00``, ``dup-a``, ``dup-b``),
judged differently by two queries, so every system ties on them: a run file whose scores tied would
be re-sorted by trec_eval (document id, descending) and score differently, which
:func:`test_the_folder_has_ties_that_a_tied_run_file_would_get_wrong` checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytrec_eval
from conftest import build_tiny

from longembed.cli.main import main
from longembed.search import open_index

TASK = Path(__file__).parent / "data" / "tiny_beir"
CHUNKS = ["--granularity", "chunks", "--chunking", "tokens:16"]
PI = ["--method", "pi", "--max-length", "128"]
STRATEGIES = {
    "bm25": ["--model", "bm25"],
    "truncate": ["--method", "truncate"],
    "pi": PI,
    "naive-chunks": [*CHUNKS, "--naive"],
    "late-chunks": [*PI, *CHUNKS, "--late"],
    "pi+bm25-rrf": [*PI, "--fuse", "bm25"],
    "naive-chunks+bm25-linear": [*CHUNKS, "--naive", "--fuse", "bm25", "--fuse-method", "linear", "--fuse-weight", "0.3"],
}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def qrels() -> dict[str, dict[str, int]]:
    judged: dict[str, dict[str, int]] = {}
    for line in (TASK / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, doc, score = line.split("\t")
        judged.setdefault(query, {})[doc] = int(score)
    return judged


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        query, _, doc, _, score, _ = line.split()
        run.setdefault(query, {})[doc] = float(score)
    return run


def trec_ndcg10(run: dict[str, dict[str, float]]) -> float:
    """Mean nDCG@10 in percent by pytrec_eval over every judged query (0 for a query without results)."""
    judged = qrels()
    per_query = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10"}).evaluate(run)
    return 100 * sum(per_query.get(q, {}).get("ndcg_cut_10", 0.0) for q in judged) / len(judged)


def strategy_flags(name: str, model: Path) -> list[str]:
    """The strategy's flags for both eval and index; ``--dtype auto`` given to both (index's default, eval's
    float32), so they run in the same dtype on every machine: bfloat16 where the CPU computes it natively."""
    flags = STRATEGIES[name]
    return flags if flags[:2] == ["--model", "bm25"] else ["--model", str(model), *flags, "--dtype", "auto"]


def eval_ndcg10(flags: list[str], output: Path) -> float:
    assert main(["eval", *flags, "--task-dir", str(TASK), "--output", str(output), "--no-cache", "--no-estimate"]) == 0
    results = json.loads((output / "results.json").read_text())
    return results["tasks"]["tiny_beir"]["metrics"]["ndcg@10"]


def search_run(flags: list[str], tmp_path: Path) -> Path:
    index, run = tmp_path / "index", tmp_path / "run.trec"
    assert main(["index", str(TASK / "corpus.jsonl"), "--index", str(index), *flags, "--no-estimate"]) == 0
    assert main(["search", "--index", str(index), "--queries", str(TASK / "queries.jsonl"), "--run", str(run)]) == 0
    return run


@pytest.mark.slow
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_a_searched_run_file_scores_what_eval_scored(name: str, model: Path, tmp_path: Path) -> None:
    flags = strategy_flags(name, model)
    expected = eval_ndcg10(flags, tmp_path / "eval")
    run = read_run(search_run(flags, tmp_path))
    for query, scores in run.items():  # strictly decreasing down each list, as written
        listed = list(scores.values())
        assert all(a > b for a, b in zip(listed, listed[1:], strict=False)), query
    assert trec_ndcg10(run) == pytest.approx(expected, abs=0.01)
    # and the index recorded the very strategy eval's results.json did
    evaluated = json.loads((tmp_path / "eval" / "results.json").read_text())["config"]["strategy"]
    assert open_index(tmp_path / "index").metadata["config"] == evaluated


def test_the_folder_has_ties_that_a_tied_run_file_would_get_wrong(tmp_path: Path) -> None:
    """BM25's run with its true, tied scores (what a run file without the strict decrease would say):
    trec_eval re-sorts the three copies by id, descending, and the score moves off eval's."""
    run = read_run(search_run(STRATEGIES["bm25"], tmp_path))
    eval_score = eval_ndcg10(STRATEGIES["bm25"], tmp_path / "eval")
    tied = {q: {d: round(s, 5) for d, s in scores.items()} for q, scores in run.items()}
    assert any(len(set(s.values())) < len(s) for s in tied.values())
    assert abs(trec_ndcg10(tied) - eval_score) > 0.5
    assert trec_ndcg10(run) == pytest.approx(eval_score, abs=0.01)
