"""The cost estimate ``eval`` prints counts what a run encodes: whole documents cut at Lt, every naive
chunk alone, late chunks as windows of the encoder's window."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from test_runner import TinyTask

from longembed.evaluation.estimate import CostModel, text_seconds
from longembed.evaluation.runner import _sides_to_encode
from longembed.evaluation.scoring import Granularity, Side, Unit

LINEAR = CostModel(a=0.001, b=0.0)  # a second per 1000 tokens
QUADRATIC = CostModel(a=0.0, b=1e-6)
ENCODER = SimpleNamespace(method="pi", max_length=4096, original_length=512, window_length=4096)


def test_a_whole_document_is_one_input_cut_at_max_length() -> None:
    assert text_seconds(10_000, ENCODER, LINEAR) == pytest.approx(4.096)
    assert text_seconds(1_000, ENCODER, QUADRATIC) == pytest.approx(1.0)


def test_naive_chunks_are_encoded_one_by_one_and_never_longer_than_lo() -> None:
    # 10,000 tokens in chunks of 256: 40 inputs of 258 tokens (special tokens added); none cut at Lt
    assert text_seconds(10_000, ENCODER, LINEAR, "tokens:256") == pytest.approx(40 * 0.258)
    # chunks are cheaper than one long input under quadratic attention: the reason to count them
    assert text_seconds(4_000, ENCODER, QUADRATIC, "tokens:256") < text_seconds(4_000, ENCODER, QUADRATIC) / 10
    # sentence chunks: 4 sentences of about 32 tokens, then cut at Lo
    assert text_seconds(1_280, ENCODER, LINEAR, "sentences:4") == pytest.approx(10 * 0.130)
    assert text_seconds(4_000, ENCODER, LINEAR, "sentences:64") == pytest.approx(2 * 0.512)


def test_late_chunks_are_one_pass_or_overlapping_windows() -> None:
    assert text_seconds(3_000, ENCODER, QUADRATIC, "tokens:256", late=True) == pytest.approx(9.0)
    windows = math.ceil(10_000 / (4096 - 512))  # neighbours share an eighth of the window
    assert text_seconds(10_000, ENCODER, LINEAR, "tokens:256", late=True) == pytest.approx(windows * 4.096)


def test_eval_tells_the_estimate_how_documents_are_chunked() -> None:
    unit = Unit("tiny", None, TinyTask().load(None), 0.0)
    sides = {"documents": Side("documents", "", 1.0), "queries": Side("queries", "", 1.0)}
    documents, queries = _sides_to_encode(unit, sides, Granularity("chunks", "tokens:64", late=False))
    assert (documents.chunking, documents.late) == ("tokens:64", False)
    assert (queries.chunking, queries.late) == (None, False)
    documents, _ = _sides_to_encode(unit, sides, Granularity("chunks", "tokens:64", late=True))
    assert documents.late
    documents, _ = _sides_to_encode(unit, sides, Granularity())
    assert (documents.chunking, documents.late) == (None, False)
