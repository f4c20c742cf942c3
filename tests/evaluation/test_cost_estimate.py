"""The cost estimate ``eval`` prints counts what a run encodes: whole documents cut at Lt, every naive
chunk alone, late chunks as windows of the encoder's window."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from test_runner import TinyTask

from longembed.chunking.spans import token_chunk_spans
from longembed.evaluation.estimate import (
    CostModel,
    SideToEncode,
    count_units,
    longest_sequence,
    measure_cost_model,
    text_seconds,
)
from longembed.evaluation.runner import _sides_to_encode
from longembed.evaluation.scoring import Side, Unit
from longembed.retrieval.strategy import Strategy

LINEAR = CostModel(a=0.001, b=0.0)  # a second per 1000 tokens
QUADRATIC = CostModel(a=0.0, b=1e-6)
ENCODER = SimpleNamespace(method="pi", max_length=4096, original_length=512, window_length=4096)


def test_a_whole_document_is_one_input_cut_at_max_length() -> None:
    assert text_seconds(10_000, ENCODER, LINEAR) == pytest.approx(4.096)
    assert text_seconds(1_000, ENCODER, QUADRATIC) == pytest.approx(1.0)


def test_naive_chunks_are_encoded_one_by_one_and_never_longer_than_lo() -> None:
    # 10,000 tokens in chunks of 256: 40 inputs of 258 tokens (special tokens added); none cut at Lt
    assert text_seconds(10_000, ENCODER, LINEAR, "tokens:256") == pytest.approx(40 * 0.258)
    # overlapping chunks step by 256 - 32 tokens: 45 chunks, as token_chunk_spans cuts them
    assert text_seconds(10_000, ENCODER, LINEAR, "tokens:256:32") == pytest.approx(45 * 0.258)
    assert len(token_chunk_spans([(i, i + 1) for i in range(10_000)], 256, 32)) == 45
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
    documents, queries = _sides_to_encode(unit, sides, Strategy(granularity="chunks", chunking="tokens:64", late=False))
    assert (documents.chunking, documents.late) == ("tokens:64", False)
    assert (queries.chunking, queries.late) == (None, False)
    documents, _ = _sides_to_encode(unit, sides, Strategy(granularity="chunks", chunking="tokens:64", late=True))
    assert documents.late
    documents, _ = _sides_to_encode(unit, sides, Strategy())
    assert (documents.chunking, documents.late) == (None, False)


# ----------------------------------------------------------------------------- the warm-up


def test_the_longest_sequence_is_what_the_encoder_will_run() -> None:
    assert longest_sequence([300, 9_000], ENCODER) == 4096  # a whole document, cut at Lt
    assert longest_sequence([300, 9_000], ENCODER, "tokens:256") == 258  # a naive chunk, specials added
    assert longest_sequence([300, 9_000], ENCODER, "sentences:64") == 512  # chunks never pass Lo
    assert longest_sequence([300, 9_000], ENCODER, "tokens:256", late=True) == 4096  # a late-chunking window
    assert longest_sequence([300, 1_000], ENCODER) == 1_000 and longest_sequence([], ENCODER) == 0


class ClockedEncoder:
    """An encoder on a fake clock: a sequence of n tokens costs 1e-6 n^2 + 1e-4 n seconds, and every first call
    at a length is slowed by half (as another process on the cores would), so only the fastest repeat is exact."""

    def __init__(self, clock: list[float], method: str = "pi", max_length: int = 4096) -> None:
        self.clock, self.method, self.max_length, self.original_length = clock, method, max_length, 512
        self.calls: list[tuple[int, int]] = []

    @staticmethod
    def cost(n: int) -> float:
        return 1e-6 * n * n + 1e-4 * n

    def encode(self, texts, batch_size, normalize_embeddings, show_progress_bar):
        n = len(texts[0].split()) + 2
        slow = 1.5 if (n, len(texts)) not in self.calls else 1.0
        self.calls.append((n, len(texts)))
        self.clock[0] += slow * len(texts) * self.cost(n)


def test_the_warm_up_times_the_longest_length_and_keeps_the_fastest_repeat(monkeypatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("longembed.evaluation.estimate.time.perf_counter", lambda: clock[0])
    encoder = ClockedEncoder(clock)
    model = measure_cost_model(encoder, batch_size=32, longest=4096)
    assert [(s["tokens"], s["batch"]) for s in model.samples] == [(512, 8), (4096, 1)]
    assert [s["seconds_per_sequence"] for s in model.samples] == pytest.approx([encoder.cost(512), encoder.cost(4096)])
    assert model.seconds(4096) == pytest.approx(encoder.cost(4096))  # measured there, not extrapolated
    assert model.seconds(2048) == pytest.approx(encoder.cost(2048))  # the same quadratic through both points
    assert encoder.calls.count((4096, 1)) == 2 and encoder.calls.count((512, 8)) == 2
    pcw = measure_cost_model(ClockedEncoder([0.0], method="pcw"), batch_size=32, longest=4096)
    assert [s["tokens"] for s in pcw.samples] == [512]  # pcw runs windows of Lo: nothing longer to time
    default = ClockedEncoder([0.0])
    measure_cost_model(default, batch_size=32)
    assert (2048, 2) in default.calls  # without a longest length: 2 inputs of 2048, as before
    short = ClockedEncoder(clock)  # a run whose longest sequence is 200 tokens times 200, not 512 (3x the work)
    model = measure_cost_model(short, batch_size=32, longest=200)
    assert [(s["tokens"], s["batch"]) for s in model.samples] == [(200, 8)] and (512, 8) not in short.calls
    assert model.seconds(200) == pytest.approx(short.cost(200))


# ----------------------------------------------------------------------------- tokens to encode


class _Counting:
    """A cached encoder stand-in for :func:`count_units`: nothing cached, each text as many tokens as words."""

    def __init__(self, max_length: int) -> None:
        self.encoder = SimpleNamespace(max_length=max_length)
        self.max_length = max_length  # a CachedEncoder answers it from the wrapped encoder's metadata

    def missing(self, texts, *args, **kwargs):
        return 0, list(texts)

    def count_tokens(self, texts, prompt=""):
        return [len(t.split()) for t in texts]


def test_tokens_to_encode_count_what_the_encoder_reads() -> None:
    documents = SideToEncode(["w " * 2000, "w " * 300, "w " * 40], "docs")
    queries = SideToEncode(["w " * 7], "queries")
    rows, _ = count_units([("mine", documents, queries)], _Counting(512))  # truncate: Lo = 512
    assert rows[0].documents.tokens == 512 + 300 + 40  # min(n, Lo) per document, not 2,340
    assert rows[0].documents.max_tokens == 2000  # the longest document, in full
    rows, _ = count_units([("mine", documents, queries)], _Counting(4096))  # an extension to 4096 reads all
    assert rows[0].documents.tokens == 2340
    chunks = SideToEncode(documents.texts, "docs", chunking="tokens:256")
    late = SideToEncode(documents.texts, "docs", chunking="tokens:256", late=True)
    for side in (chunks, late):  # chunks read every token, naive or late
        rows, _ = count_units([("mine", side, queries)], _Counting(512))
        assert rows[0].documents.tokens == 2340
