"""Late interaction (``--granularity tokens``): which token vectors a text keeps, eval's MaxSim against a
reference built from ``encode_tokens`` and a double loop, the cache, and ``longembed eval``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import words
from test_chunk_retrieval import PassageTask, WordsTask

from longembed import load_encoder
from longembed.chunking.multivector import encode_token_vectors, kept_tokens
from longembed.chunking.tokens import TokenEmbeddings
from longembed.cli.main import main as cli_main
from longembed.errors import UserError
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.cache.storage import EmbeddingCache
from longembed.evaluation.runner import _sides_to_encode, evaluate_model
from longembed.evaluation.scoring import Side, Unit
from longembed.report.labels import run_label
from longembed.retrieval.strategy import Strategy
from longembed.search.build import build_index

EVAL = {"estimate": False, "show_progress": False, "log": None, "batch_size": 4}


def _text_ids(enc, text: str) -> list[int]:
    return enc.tokenizer(text, add_special_tokens=False)["input_ids"]


def test_documents_keep_their_own_tokens_but_punctuation_and_queries_every_text_token(tiny_models) -> None:
    enc = load_encoder(tiny_models["bert"], method="pi", max_length=128)
    text = words(20, seed=1) + " . " + words(10, seed=2) + " ,"
    ids = _text_ids(enc, text)
    punctuation = {enc.tokenizer.convert_tokens_to_ids(p) for p in ".,"}
    (document,) = encode_token_vectors(enc, [text], prompt="the of ")
    (query,) = encode_token_vectors(enc, [text], document=False, prompt="the of ")
    assert document.dtype == np.float16 and query.dtype == np.float16
    assert len(document) == sum(i not in punctuation for i in ids) and len(query) == len(ids)  # no [CLS], [SEP], prompt
    np.testing.assert_allclose(np.linalg.norm(document.astype(np.float32), axis=1), 1, atol=2e-3)
    (states,) = enc.encode_tokens([text], prompt="the of ")
    text_states = states.embeddings[states.text_tokens]
    expected = text_states / np.linalg.norm(text_states, axis=1, keepdims=True)
    np.testing.assert_allclose(query.astype(np.float32), expected, atol=2e-3)


def test_one_pass_runs_windows_of_lt_and_naive_tokens_are_each_chunks_own() -> None:
    """By hand: a text of punctuation keeps its text tokens; one of special tokens only keeps them all."""
    offsets = np.array([[-1, -1], [0, 1], [2, 3], [-1, -1]])
    tokens = TokenEmbeddings(np.zeros((4, 2), np.float32), offsets, np.array([2, 90, 91, 3]))
    assert kept_tokens(tokens, {90}).tolist() == [2] and kept_tokens(tokens, {90, 91}).tolist() == [1, 2]
    specials = TokenEmbeddings(np.zeros((2, 2), np.float32), np.full((2, 2), -1), np.array([2, 3]))
    assert kept_tokens(specials).tolist() == [0, 1]


def test_late_tokens_of_a_long_text_are_every_token_and_naive_ones_differ(tiny_models) -> None:
    enc = load_encoder(tiny_models["bert"], method="pi", max_length=64)
    text = words(150, seed=3)
    n = len(_text_ids(enc, text))
    assert n > 64  # longer than Lt: one pass runs as windows, nothing is cut
    (late,) = encode_token_vectors(enc, [text])
    (naive,) = encode_token_vectors(enc, [text], late=False, chunking="tokens:16")
    assert len(late) == n == len(naive)
    assert not np.allclose(late.astype(np.float32), naive.astype(np.float32), atol=1e-2)  # context differs


def _reference_scores(enc, data) -> np.ndarray:
    """(queries x documents) MaxSim recomputed from encode_tokens by a double loop: text tokens only,
    documents without '.' and ','."""
    skip = [enc.tokenizer.convert_tokens_to_ids(p) for p in ".,"]

    def vectors(texts, document: bool):
        out = []
        for t in enc.encode_tokens(texts, window_overlap=enc.window_length // 8):
            states = t.embeddings[t.text_tokens & (~np.isin(t.input_ids, skip) if document else True)]
            out.append(states / np.linalg.norm(states, axis=1, keepdims=True))
        return out

    queries, documents = vectors(list(data.queries.values()), False), vectors(list(data.corpus.values()), True)
    return np.array([[sum(max(float(qt @ dt) for dt in d) for qt in q) for d in documents] for q in queries])


def test_eval_scores_maxsim_over_token_vectors_and_the_estimate_finds_them_cached(tiny_models, tmp_path: Path) -> None:
    enc = load_encoder(tiny_models["bert"], method="pi", max_length=64)
    run = evaluate_model(enc, tasks=[WordsTask()], output_dir=tmp_path / "run", cache_dir=tmp_path / "cache",
                         granularity="tokens", **EVAL)
    assert run.config.strategy["granularity"] == "tokens" and run.config.strategy["late"] is True
    assert run_label(run).endswith("late tokens maxsim")
    scores = _reference_scores(enc, WordsTask().load(None))
    ranks = [1 + int((scores[i] > scores[i, i] + 1e-3).sum()) for i in range(len(scores))]  # q{i}'s document is d{i}
    assert len(set(ranks)) > 2  # a test of the order, not of one lucky first place
    ndcg = np.mean([100 / np.log2(r + 1) for r in ranks])  # 8 documents: every rank is within 10
    assert run.tasks["words"].metrics["ndcg@10"] == pytest.approx(ndcg, abs=1e-3)
    assert run.tasks["words"].interval is not None and run.tasks["words"].counts.documents_truncated == 0
    # the estimate looks the token vectors up where eval stored them (else it would count them all as missing)
    unit = Unit("words", None, WordsTask().load(None), 0.0)
    sides = {"documents": Side("documents", "", 1.0), "queries": Side("queries", "", 1.0)}
    cached = CachedEncoder(enc, tmp_path / "cache", log=None)
    for side in _sides_to_encode(unit, sides, Strategy(granularity="tokens")):
        assert side.quantity.startswith("tokens/late/") and side.late
        assert cached.missing(side.texts, side.shard, side.prompt, side.temperature, quantity=side.quantity) == (8, [])


def test_one_pass_tokens_on_a_passage_task_say_they_are_not_built(tiny_models) -> None:
    enc = load_encoder(tiny_models["bert"], method="pi", max_length=64)
    with pytest.raises(UserError, match="passage task.*issue 56.*--naive"):
        evaluate_model(enc, tasks=[PassageTask()], granularity="tokens", use_cache=False, **EVAL)


@pytest.mark.slow
def test_longembed_eval_granularity_tokens_naive_runs_records_it_and_reruns_from_the_cache(tiny_models, tmp_path: Path) -> None:
    out = tmp_path / "run"
    flags = ["eval", "--model", str(tiny_models["bert"]), "--method", "pi", "--max-length", "512", "--tasks",
             "passkey", "--lengths", "256", "--queries-per-length", "4", "--granularity", "tokens", "--naive",
             "--chunking", "tokens:64", "--cache-dir", str(tmp_path / "cache"), "--no-estimate"]
    assert cli_main([*flags, "--output", str(out)]) == 0
    assert cli_main([*flags, "--output", str(tmp_path / "again")]) == 0
    results = json.loads((out / "results.json").read_text())
    again = json.loads((tmp_path / "again" / "results.json").read_text())["tasks"]["passkey"]
    assert again["cache"]["documents_encoded"] == again["cache"]["queries_encoded"] == 0  # float16 read back
    assert again["lengths"]["256"]["per_query"] == results["tasks"]["passkey"]["lengths"]["256"]["per_query"]
    strategy = results["config"]["strategy"]
    assert (strategy["granularity"], strategy["late"], strategy["chunking"]) == ("tokens", False, "tokens:64")
    task = results["tasks"]["passkey"]
    assert len(task["lengths"]["256"]["per_query"]) == 4 and "interval" in task


def test_an_index_of_token_vectors_is_refused_naming_the_issue(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="eval only for now \\(issue 56\\)"):
        build_index(tmp_path / "index", [], Strategy("m", granularity="tokens"), log=None)
    assert not (tmp_path / "index").exists()


def test_token_matrices_stay_float16_through_the_cache_and_its_compaction(tmp_path: Path) -> None:
    space = EmbeddingCache(tmp_path).namespace({"model": "m", "quantity": "tokens/late/documents"})
    rng = np.random.default_rng(0)
    entries = {key: rng.normal(size=(n, 4)).astype(np.float16) for key, n in (("a", 3), ("b", 1), ("c", 5))}
    space.add("s", ["a", "b"], [entries["a"], entries["b"]], [3, 1])
    space.add("s", ["c"], [entries["c"]], [5])
    space.compact("s")
    fresh = EmbeddingCache(tmp_path).namespace({"model": "m", "quantity": "tokens/late/documents"}).load("s")
    for key, matrix in entries.items():
        assert fresh.vectors[key].dtype == np.float16
        np.testing.assert_array_equal(fresh.vectors[key], matrix)
