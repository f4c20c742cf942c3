"""``--candidates blocks``: a generated set of N queries cut into N / 50 blocks of the paper's size, each
50 queries ranking only their own 100 documents (longembed.tasks.query_sets.paper_blocks), against a
naive per-block loop, the 50-query run, and the errors and records around it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA_DIR, require_data
from test_runner import HashEncoder

from longembed.cli.main import main
from longembed.evaluation.runner import evaluate_model
from longembed.evaluation.scoring import candidates, lexical_scores
from longembed.results import RunResults, compare
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import Blocks, Passage, RetrievalData, get_task
from longembed.tasks import passkey as passkey_mod
from longembed.tasks.query_sets import check_candidates, paper_blocks


def run(model: Any, tmp_path: Path, name: str, **kwargs: Any) -> RunResults:
    kwargs.setdefault("cache_dir", tmp_path / "cache")
    return evaluate_model(model, output_dir=tmp_path / name, show_progress=False, log=None, estimate=False, **kwargs)


def naive_accuracy(encoder: HashEncoder, data: RetrievalData) -> tuple[dict[str, float], set[str]]:
    """Accuracy@1 per query, each query scored against its own block's documents only, by hand (float64);
    and the queries whose best two documents tie to 1e-6, which float32 rounding may order either way."""
    doc_ids = list(data.corpus)
    docs = encoder.encode(list(data.corpus.values()), prompt=encoder.prompts["document"]).astype(np.float64)
    accuracy, tied = {}, set()
    for qid, text in data.queries.items():
        (query,) = encoder.encode([text], prompt=encoder.prompts["query"]).astype(np.float64)
        block = [i for i, d in enumerate(doc_ids) if data.blocks.documents[d] == data.blocks.queries[qid]]
        best, second = sorted(block, key=lambda i: -float(docs[i] @ query))[:2]
        accuracy[qid] = 100.0 * (doc_ids[best] in data.qrels[qid])
        if abs(float(docs[best] @ query) - float(docs[second] @ query)) < 1e-6:
            tied.add(qid)
    return accuracy, tied


@pytest.mark.parametrize("name", ["passkey", "needle"])
def test_block_zero_is_the_papers_set_and_every_block_has_its_size(name: str) -> None:
    if name == "needle":
        require_data("paul_graham_essays")
    paper = get_task(name).load(DATA_DIR, 256)
    data = get_task(name, queries_per_length=200, candidates="blocks").load(DATA_DIR, 256)
    assert data.blocks is not None and data.blocks.count() == 4
    zero_queries = [q for q, b in data.blocks.queries.items() if b == 0]
    zero_documents = [d for d, b in data.blocks.documents.items() if b == 0]
    assert zero_queries == list(paper.queries) and zero_documents == list(paper.corpus)
    for block in range(4):
        queries = [q for q, b in data.blocks.queries.items() if b == block]
        documents = {d for d, b in data.blocks.documents.items() if b == block}
        assert len(queries) == 50 and len(documents) == 100
        assert all(set(data.qrels[q]) <= documents for q in queries)


@pytest.mark.slow
def test_block_scores_match_a_naive_per_block_loop_and_the_50_query_run(tmp_path: Path) -> None:
    encoder = HashEncoder(tmp_path / "m")
    blocks = run(encoder, tmp_path, "blocks", tasks=["passkey"], lengths=[256], queries_per_length=200,
                 candidates="blocks")
    unit = blocks.tasks["passkey"].lengths[256]
    data = passkey_mod.generate(256, queries_per_length=200, candidates="blocks")
    expected, tied = naive_accuracy(encoder, data)
    assert len(tied) < 25  # bag-of-words vectors of passkey documents tie often; 175+ queries are checked
    assert {q: v for q, v in unit.per_query.items() if q not in tied} == {q: v for q, v in expected.items()
                                                                         if q not in tied}
    assert all(data.blocks.documents[unit.first_ranked[q]] == data.blocks.queries[q] for q in data.queries)
    paper = run(encoder, tmp_path, "paper", tasks=["passkey"], lengths=[256]).tasks["passkey"].lengths[256]
    assert {q: unit.per_query[q] for q in paper.per_query} == paper.per_query
    # ranked among all 400 documents instead, queries lose their block's protection: the scores differ
    every = run(encoder, tmp_path, "all", tasks=["passkey"], lengths=[256], queries_per_length=200)
    assert every.tasks["passkey"].lengths[256].score < unit.score


@pytest.mark.parametrize("model", ["bm25", "fused"])
def test_a_block_scores_as_the_papers_set_alone_for_bm25_and_fusion(tmp_path: Path, model: str) -> None:
    """BM25 indexes each block alone (its own document frequencies), so block 0 of a blocks run is the
    50-query run to the digit, alone or fused with a dense model."""
    encoder, options = (BM25Model(), {}) if model == "bm25" else (HashEncoder(tmp_path / "m"), {"fuse": "bm25"})
    blocks = run(encoder, tmp_path, "blocks", tasks=["passkey"], lengths=[256], queries_per_length=100,
                 candidates="blocks", **options).tasks["passkey"].lengths[256]
    paper = run(encoder, tmp_path, "paper", tasks=["passkey"], lengths=[256], **options).tasks["passkey"].lengths[256]
    assert {q: blocks.per_query[q] for q in paper.per_query} == paper.per_query
    assert {q: blocks.first_ranked[q] for q in paper.first_ranked} == paper.first_ranked
    data = passkey_mod.generate(256, queries_per_length=100, candidates="blocks")
    assert all(data.blocks.documents[blocks.first_ranked[q]] == data.blocks.queries[q] for q in data.queries)


def test_blocks_are_recorded_logged_and_not_compared_with_all(tmp_path: Path) -> None:
    lines: list[str] = []
    blocks = evaluate_model(BM25Model(), tasks=["passkey"], lengths=[256], queries_per_length=100,
                            candidates="blocks", output_dir=tmp_path / "b", cache_dir=tmp_path / "c",
                            show_progress=False, log=lines.append, estimate=False)
    assert blocks.config.task_options == {"queries_per_length": 100, "candidates": "blocks"}
    assert any(line.startswith("candidates: blocks: each 50 queries rank only their own 100 documents")
               for line in lines)
    every = run(BM25Model(), tmp_path, "a", tasks=["passkey"], lengths=[256], queries_per_length=100)
    assert every.config.task_options == {"queries_per_length": 100}
    with pytest.raises(ValueError, match=r"scored different data for passkey at length 256 .*their task "
                                         r"options differ \(candidates: 'blocks' vs the default\)"):
        compare([blocks, every])
    assert compare([blocks, blocks]) is not None


def test_a_refusal_names_a_different_haystack_by_path_and_content(tmp_path: Path) -> None:
    def haystack(name: str, word: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "doc.txt").write_text(" ".join(f"{word} {i} stays in the garden." for i in range(400)), encoding="utf-8")
        return folder

    runs = [run(BM25Model(), tmp_path, name, tasks=["passkey"], lengths=[256], haystack=haystack(f"h{name}", word))
            for name, word in (("a", "Clause"), ("b", "Section"))]
    with pytest.raises(ValueError, match=r"options differ \(haystack: .*ha \(sha256 \w{12}\) vs .*hb \(sha256 \w{12}\)\)"):
        compare(runs)


def test_candidate_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="candidates must be one of all, blocks, got 'some'"):
        check_candidates("some")
    with pytest.raises(ValueError, match="must be a multiple of 50, got 120"):
        get_task("passkey", queries_per_length=120, candidates="blocks")
    with pytest.raises(ValueError, match="must be a multiple of 50, got 20"):
        passkey_mod.generate(256, queries_per_length=20, candidates="blocks")
    with pytest.raises(ValueError, match="blocks need 50 queries and 100 documents per block; the set has 3"):
        paper_blocks(passkey_mod.generate(256, queries_per_length=3))
    base = ["eval", "--model", "bm25", "--lengths", "256", "--output", str(tmp_path / "r")]
    assert main([*base, "--tasks", "passkey", "--candidates", "blocks", "--queries-per-length", "75"]) == 2
    assert "must be a multiple of 50, got 75" in capsys.readouterr().err
    assert main([*base, "--tasks", "hotpotqa", "--candidates", "blocks"]) == 2
    assert "--candidates: only passkey and needle take it" in capsys.readouterr().err
    task = get_task("passkey", queries_per_length=100)
    with pytest.raises(ValueError, match="ranks 'all' candidates but the run asks for 'blocks'"):
        run(BM25Model(), tmp_path, "x", tasks=[task], lengths=[256], queries_per_length=100, candidates="blocks")


def test_eval_candidates_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["eval", "--model", "bm25", "--tasks", "passkey", "--lengths", "256", "--queries-per-length",
                 "100", "--candidates", "blocks", "--output", str(out)]) == 0
    results = RunResults.load(out)
    assert results.config.task_options["candidates"] == "blocks"
    assert results.tasks["passkey"].lengths[256].counts.documents == 200


def test_validation_refuses_inconsistent_blocks() -> None:
    data = passkey_mod.generate(256, queries_per_length=100, candidates="blocks")
    moved = dict(data.blocks.documents)
    (relevant,) = data.qrels["passkey-256-q000"]
    moved[relevant] = 1
    with pytest.raises(ValueError, match="query 'passkey-256-q000' ranks block 0 but its relevant documents"):
        dataclasses.replace(data, blocks=Blocks(data.blocks.queries, moved)).validate()
    missing = {q: b for q, b in data.blocks.queries.items() if q != "passkey-256-q007"}
    with pytest.raises(ValueError, match=r"every query needs exactly one block; \['passkey-256-q007'\]"):
        dataclasses.replace(data, blocks=Blocks(missing, data.blocks.documents)).validate()


def test_blocks_and_query_contexts_are_one_or_the_other() -> None:
    passage = RetrievalData(corpus={"a": "one", "b": "two"}, queries={"q": "one?"}, qrels={"q": {"a": 1}},
                            contexts={"c": "one two"}, passages={"a": Passage("c", 0, 3), "b": Passage("c", 4, 7)},
                            query_contexts={"q": "c"}).validate()
    with pytest.raises(ValueError, match="blocks and query_contexts both limit a query's candidates"):
        dataclasses.replace(passage, blocks=Blocks({"q": 0}, {"a": 0, "b": 0})).validate()


def test_fingerprint_of_data_without_blocks_is_the_old_formula() -> None:
    """Runs written before blocks (and answers) existed keep comparing with new ones: the hash omits an
    absent field, and never holds the answer spans (they judge passages, not the ranking)."""
    data = passkey_mod.generate(256)
    assert data.answers  # passkey locates its key sentence, and the hash is still the old one
    old = {k: v for k, v in dataclasses.asdict(data).items() if k not in ("blocks", "answers")}
    blob = json.dumps(old, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert data.fingerprint() == hashlib.sha256(blob.encode("utf-8")).hexdigest()
    assert paper_blocks(data).fingerprint() != data.fingerprint()


def test_bm25_indexes_each_block_alone() -> None:
    """A block's BM25 scores are those of an index of its 100 documents only (their own document
    frequencies), and -inf outside the block."""
    data = passkey_mod.generate(256, queries_per_length=100, candidates="blocks")
    query_texts, doc_texts = list(data.queries.values()), list(data.corpus.values())
    scores = lexical_scores(BM25Model(), data, query_texts, doc_texts)
    for rows, columns in ((slice(0, 50), slice(0, 100)), (slice(50, 100), slice(100, 200))):
        alone = BM25Model().score(query_texts[rows], doc_texts[columns])
        np.testing.assert_allclose(scores[rows, columns], alone, rtol=1e-6)
    assert np.isneginf(scores[:50, 100:]).all() and np.isneginf(scores[50:, :100]).all()
    whole = BM25Model().score(query_texts, doc_texts)
    assert not np.allclose(whole[:50, :100], scores[:50, :100])  # the whole set's frequencies differ


def test_the_mask_is_the_block_structure() -> None:
    """A query ranks its block only; every query ranks every document without blocks."""
    data = passkey_mod.generate(256, queries_per_length=100, candidates="blocks")
    allowed = candidates(data, list(data.queries), list(data.corpus))
    expected = np.zeros((100, 200), dtype=bool)
    expected[:50, :100] = expected[50:, 100:] = True
    assert np.array_equal(allowed, expected)
    no_blocks = dataclasses.replace(data, blocks=None)
    assert candidates(no_blocks, list(data.queries), list(data.corpus)) is None
