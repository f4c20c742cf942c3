"""judged@10 (TREC's share of a top 10 that was judged): the metric, its place in an eval run over pooled
judgments (a BM25 run on a judged task folder), advise's section and warning, a later session pooling a
new strategy's results into the questions asked before, and pool indexes rebuilt only when needed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from conftest import build_tiny

from longembed.advice.judged import judged_lines, run_judged_at_10
from longembed.advice.strategies import TUNED_SUFFIX
from longembed.evaluation.metrics import judged_at_k, judges_non_relevant
from longembed.evaluation.runner import evaluate_model
from longembed.judging.indexes import build_pool_indexes, open_searchers, pool_candidates
from longembed.judging.session import JudgingSession
from longembed.results.run_results import JUDGED_AT_10
from longembed.retrieval.bm25 import BM25Model
from longembed.search.sources import Document
from longembed.tasks.judgment_log import JudgmentLog


def test_judged_at_k_counts_every_grade_over_the_top_k():
    qrels = {"q1": {"a": 2, "b": 0, "z": 1}, "q2": {"a": 1}, "q3": {"a": 1}}
    ranking = {"q1": ["a", "c", "b", "d", "e", "f"], "q2": ["x", "y"], "q3": []}
    assert judged_at_k(qrels, ranking, k=4) == {"q1": 0.5, "q2": 0.0, "q3": 0.0}
    assert judged_at_k(qrels, {"q1": ["b", "a"]}, k=10)["q1"] == 1.0  # a ranking shorter than k: its length
    assert judges_non_relevant(qrels) and not judges_non_relevant({"q2": {"a": 1}})


def folder_with_grades(root: Path, grades: dict[str, int]) -> Path:
    folder = root / "judged"
    (folder / "qrels").mkdir(parents=True)
    words = {"apple.txt": "apple orchard harvest", "pear.txt": "pear orchard", "kiwi.txt": "kiwi farm",
             "plum.txt": "plum tree", "fig.txt": "fig tree orchard"}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in words.items()))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "j1", "text": "orchard harvest"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                               "".join(f"j1\t{d}\t{g}\n" for d, g in grades.items()))
    return folder


def test_an_eval_run_reports_judged_at_10_on_pooled_judgments_only(tmp_path):
    pooled = folder_with_grades(tmp_path / "a", {"apple.txt": 2, "pear.txt": 0})
    run = evaluate_model(BM25Model(), task_dirs=[pooled], output_dir=tmp_path / "run", show_progress=False, log=None,
                         estimate=False)
    # BM25 ranks all five documents (those sharing no word with the query last), two of them judged: 2 of 5
    assert run.tasks["judged"].metrics[JUDGED_AT_10] == 40.0
    assert run_judged_at_10(run) == 40.0
    plain = folder_with_grades(tmp_path / "b", {"apple.txt": 1})  # no document judged not relevant: not pooled
    run = evaluate_model(BM25Model(), task_dirs=[plain], output_dir=tmp_path / "run2", show_progress=False, log=None,
                         estimate=False)
    assert JUDGED_AT_10 not in run.tasks["judged"].metrics and run_judged_at_10(run) is None


def test_advice_says_the_pool_and_warns_about_a_mostly_unjudged_strategy(tmp_path):
    log = JudgmentLog(tmp_path / "task")
    log.ask("q?", [{"doc_id": "a"}], 10, ["bm25", "naive-chunks"])
    advice = SimpleNamespace(strategies=[SimpleNamespace(name="bm25", judged_at_10=92.0),
                                         SimpleNamespace(name="late-chunks", judged_at_10=31.5),
                                         SimpleNamespace(name="truncate", judged_at_10=None)])
    text = "\n".join(judged_lines(advice, {"task": str(tmp_path / "task")}))
    assert "1 questions pooled from the top 10 of bm25, naive-chunks" in text
    assert "| bm25 | 92.0% | yes |" in text and "| late-chunks | 31.5% | no |" in text
    assert "truncate" not in text
    assert "Warning: the top 10 of 1 strategies was mostly unjudged** (below 50%: late-chunks 31.5%)" in text
    assert f"--out {tmp_path / 'task'} --strategies bm25,naive-chunks,late-chunks --k 10`" in text
    assert "bm25 92.0%" not in text and "shallower" not in text
    assert judged_lines(SimpleNamespace(strategies=[SimpleNamespace(name="bm25", judged_at_10=None)]), {}) == []


def fixed(docs: list[str]):
    return lambda question, k: [{"rank": i, "id": d, "source": d, "passage": {"text": d}}
                                for i, d in enumerate(docs[:k], 1)]


def test_a_new_strategy_is_pooled_into_the_questions_asked_before(tmp_path):
    first = JudgingSession(JudgmentLog(tmp_path), {"bm25": fixed(["a", "b"])}, depth=2)
    asked = first.ask("q?")
    for result in asked["results"]:
        first.judge("j1", result["doc_id"], 1)
    assert first.next_question() is None
    second = JudgingSession(JudgmentLog(tmp_path), {"bm25": fixed(["a", "b"]), "late": fixed(["b", "c", "d"])},
                            depth=2)
    assert second.extend_pools() == (1, 1)  # c only: b was pooled already, d is below the depth
    assert second.extend_pools() == (0, 0)  # done once
    following = second.next_question()
    assert following["query_id"] == "j1" and following["next"] == "c" and following["left"] == 1
    assert [r["doc_id"] for r in following["results"]][2:] == ["c"]
    question = JudgmentLog(tmp_path).question("j1")  # as the log reads back
    assert question.strategies == ["bm25", "late"] and question.ranks["b"] == {"bm25": 2, "late": 1}
    assert question.grades == {"a": 1, "b": 1}
    deeper = JudgingSession(JudgmentLog(tmp_path), {"bm25": fixed(["a", "b", "e"]), "late": fixed(["b", "c", "d"])},
                            depth=3)
    assert deeper.extend_pools() == (1, 2)  # a deeper pool: e and d
    question = JudgmentLog(tmp_path).question("j1")
    assert sorted(question.pool[:2]) == ["a", "b"] and question.pool[2] == "c" and sorted(question.pool[3:]) == ["d", "e"]
    assert question.pool_depth == 3 and deeper.extend_pools() == (0, 0)


def test_a_shallow_pool_is_said_with_a_deeper_command(tmp_path):
    log = JudgmentLog(tmp_path / "task")
    log.ask("q?", [{"doc_id": "a"}], 3, ["bm25"])
    advice = SimpleNamespace(strategies=[SimpleNamespace(name="bm25", judged_at_10=20.0)])
    text = "\n".join(judged_lines(advice, {"task": str(tmp_path / "task")}))
    assert "The pool was 3 deep, shallower than the 10 documents nDCG@10 reads." in text
    assert "--strategies bm25 --k 10`" in text


def test_a_pool_index_is_built_again_only_when_its_documents_change(tmp_path):
    candidates = pool_candidates("bm25")
    said: list[str] = []
    documents = [Document("a.txt", "a.txt", "apples in the orchard"), Document("b.txt", "b.txt", "pears")]
    build_pool_indexes(documents, candidates, tmp_path, say=said.append)
    build_pool_indexes(documents, candidates, tmp_path, say=said.append)
    changed = [documents[0], Document("b.txt", "b.txt", "pears and plums")]
    paths = build_pool_indexes(changed, candidates, tmp_path, say=said.append)
    assert [line.split(": ")[1].split(" (")[0] for line in said if line.startswith("[1/1]")] == [
        "BM25", "up to date", "BM25"]  # built, left alone, built again (b.txt changed)
    assert open_searchers(paths)["bm25"]("plums", 2)[0]["id"] == "b.txt"  # the new text is searched


def test_the_pool_holds_each_strategy_once_and_no_tuned_fusion(tmp_path):
    # a tuned fusion is fitted on judged queries: before any, it is its hybrid, whose index would be built twice
    model = build_tiny("bert", tmp_path / "bert")
    names = [candidate.name for candidate in pool_candidates(str(model), chunking="tokens:16")]
    assert names and not [name for name in names if name.endswith(TUNED_SUFFIX)]
    assert any(name.endswith("+bm25") for name in names) and len(set(names)) == len(names)
    strategies = [candidate.strategy.to_dict() for candidate in pool_candidates(str(model), chunking="tokens:16")]
    assert len({json.dumps(s, sort_keys=True) for s in strategies}) == len(strategies)
