"""Tests of the BM25 baseline (longembed.retrieval.bm25)."""

from __future__ import annotations

import numpy as np
import pytest

from longembed.evaluation.metrics import evaluate_scores, rank
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks.passkey import PasskeyTask


def test_score_matrix_shape_and_lexical_ordering() -> None:
    corpus = [
        "the cat sat on the mat",
        "a dog chased the cat across the garden",
        "quantum chromodynamics describes the strong interaction",
    ]
    queries = ["cat on a mat", "strong interaction physics", "dog garden"]
    scores = BM25Model().score(queries, corpus)
    assert scores.shape == (3, 3)
    assert scores.dtype == np.float32
    assert rank(scores, ["q0", "q1", "q2"], ["d0", "d1", "d2"], top_k=1) == {
        "q0": ["d0"],
        "q1": ["d2"],
        "q2": ["d1"],
    }
    assert scores[1, 0] == 0.0  # no shared term


def test_stopword_only_query_scores_zero_everywhere() -> None:
    scores = BM25Model().score(["the of and is", "sky"], ["the sky is blue", "of mice and men"])
    assert np.all(scores[0] == 0.0)
    assert scores[1, 0] > 0.0 and scores[1, 1] == 0.0


def test_stemming_matches_inflected_forms() -> None:
    model = BM25Model()
    assert model.stemmer_name == "snowball-english"  # PyStemmer is a dependency: the stemmer is on
    scores = model.score(["running keys"], ["he runs with a key", "nothing related here"])
    assert scores[0, 0] > 0.0 and scores[0, 1] == 0.0
    unstemmed = BM25Model(stem=False).score(["running keys"], ["he runs with a key", "nothing related here"])
    assert unstemmed[0, 0] == 0.0


@pytest.mark.parametrize("length", [256, 4096])
def test_bm25_solves_passkey(length: int) -> None:
    """Every query's person occurs in exactly one document: BM25 must rank it first."""
    data = PasskeyTask().load(None, length)
    qids, dids = list(data.queries), list(data.corpus)
    scores = BM25Model().score([data.queries[q] for q in qids], [data.corpus[d] for d in dids])
    top1 = rank(scores, qids, dids, top_k=1)
    for qid in qids:
        assert top1[qid] == list(data.qrels[qid])
    assert evaluate_scores(scores, qids, dids, data.qrels)["accuracy@1"] == 1.0
