"""The encode progress bar's remaining time: it counts the tokens an encoder reads (missing texts are
encoded longest first, so a bar of texts saw the slowest first and put the remaining time about three
times too high), and its clock starts after a lazy encoder has loaded its weights.  No timing: a
recording bar stands in for tqdm, and the encoder's work is counted in tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_runner import HashEncoder

from longembed.evaluation.cache import wrapper as module
from longembed.evaluation.cache.wrapper import CHARS_PER_TOKEN, CachedEncoder


class RecordingBar:
    """tqdm's part the encode loop uses, with every event recorded in one shared log."""

    log: list[tuple[str, float]] = []

    def __init__(self, total: float, **options: Any) -> None:
        self.total, self.n = total, 0.0
        RecordingBar.log.append(("start", total))

    def __enter__(self) -> RecordingBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def update(self, n: float) -> None:
        self.n += n
        RecordingBar.log.append(("update", n))

    def unpause(self) -> None:
        RecordingBar.log.append(("clock restarts", 0.0))


class LazyHashEncoder(HashEncoder):
    """A hash encoder whose 'weights' load at the first encode, as ``load_encoder(lazy=True)``'s do;
    Lt = 512 tokens, so it reads at most 2,048 characters of a text."""

    model_loaded = False

    @property
    def model(self) -> object:
        RecordingBar.log.append(("weights loaded", 0.0))
        self.model_loaded = True
        return object()

    def encode(self, texts, *args: Any, **kwargs: Any):  # type: ignore[override]
        if not self.model_loaded:
            _ = self.model
        RecordingBar.log.append(("encode", float(len(texts))))
        return super().encode(texts, *args, **kwargs)


@pytest.fixture
def bar(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    RecordingBar.log = []
    monkeypatch.setattr(module, "tqdm", RecordingBar)
    return RecordingBar.log


def texts() -> list[str]:
    """Two documents far longer than the encoder reads, and short ones."""
    return ["word " * 5000, "word " * 3000, "short text " * 20, "tiny"]


def test_the_bar_counts_the_tokens_the_encoder_reads(tmp_path: Path, bar: list) -> None:
    cached = CachedEncoder(LazyHashEncoder(tmp_path / "m"), tmp_path / "cache", chunk_size=1)
    cached.encode(texts(), shard="docs")
    read = [min(len(t), 512 * CHARS_PER_TOKEN) / CHARS_PER_TOKEN for t in texts()]
    assert bar[0] == ("start", pytest.approx(sum(read)))
    updates = [n for event, n in bar if event == "update"]
    # longest first, one text per chunk: the two long documents weigh what the encoder reads of them (512
    # tokens each, the same work), not their 25,000 and 15,000 characters
    assert updates == pytest.approx(sorted(read, reverse=True))
    assert updates[0] == updates[1] == 512
    assert sum(updates) == pytest.approx(sum(read))


def test_the_clock_starts_after_the_weights_are_loaded(tmp_path: Path, bar: list) -> None:
    cached = CachedEncoder(LazyHashEncoder(tmp_path / "m"), tmp_path / "cache", chunk_size=2)
    cached.encode(texts(), shard="docs")
    events = [event for event, _ in bar]
    assert events[:4] == ["start", "weights loaded", "clock restarts", "encode"]
    bar.clear()
    cached.encode(texts(), shard="docs")  # all cached: nothing loaded, nothing restarted
    assert [event for event, _ in bar] == ["start", "update"]


def test_chunks_count_every_token(tmp_path: Path, bar: list) -> None:
    cached = CachedEncoder(LazyHashEncoder(tmp_path / "m"), tmp_path / "cache")
    cached.compute(texts(), lambda chunk: [[0.0]] * len(chunk), shard="c", namespace=None)  # read_chars None
    assert bar[0] == ("start", pytest.approx(sum(len(t) for t in texts()) / CHARS_PER_TOKEN))
