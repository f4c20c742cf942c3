"""advice.json: every field of an Advice survives the codec, and a file of another kind is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.results import ADVICE_FILE, Advice, Interval, StrategyCost, StrategyResult
from longembed.results.advice import (
    AdviceEstimate,
    Recommendation,
    SampledTask,
    Sampling,
    StrategyEstimate,
    VersusBest,
)


def advice() -> Advice:
    cost = StrategyCost(0.25, 3.5, 384, 123_456, 12.5, "float32 vectors")
    best = StrategyResult("naive-chunks", "chunks", "dense", "runs/naive-chunks", 71.2, Interval(71.2, 60.0, 80.5),
                          cost, "truncate", 512, {"level": "chunks", "chunking": "tokens:256", "late": False})
    other = StrategyResult(
        "bm25", "BM25", "bm25", "runs/bm25", 69.0, Interval(69.0, 58.0, 79.0),
        StrategyCost(0.001, None, None, 999, 0.5, "bm25s sparse matrix"),
        versus_best=VersusBest(Interval(-2.2, -6.0, 1.5, method="paired percentile bootstrap over shared queries"),
                               "average", 0.21, "exact (4096 sign patterns)", 0.42, False,
                               Interval(-2.2, -7.0, 2.4, 0.99), "undecided", 40, 1234),
        config={"model": "bm25", "method": None, "max_length": None, "granularity": "document"},
        commands={"eval": "longembed eval --model bm25", "index": "longembed index SOURCE... --strategy bm25"},
    )
    return Advice(
        model="m", position_scheme="ape", pooling="mean", original_length=512, max_length=4096,
        tasks=["passkey", "mine"], strategies=[best, other],
        recommendation=Recommendation("naive-chunks", "naive-chunks", 2.0, [], ["bm25"], "encode, index, latency",
                                      "cannot tell", "more queries"),
        estimate=AdviceEstimate([StrategyEstimate("naive-chunks", 10, 4, 2, 1000, 3.5, "")], 1.0, 4.5, 60.0, "rough",
                                "estimate (before any encoding): ..."),
        wall_time_s=5.5, left_out={"late-chunks": "cls pooling"},
        sampling=Sampling(0, 0.4, [SampledTask("passkey", 20, 50, per_length=True), SampledTask("mine", 10, 30, 12, 60)],
                          11.0, 4.5, True, "seeded"),
        measurement={"machine": {"cpu_count": 2}, "sample_documents": 8}, comparison="comparison", created="now",
        recommended="naive-chunks", margin=2.0,
    )


def test_advice_round_trips_through_its_file(tmp_path: Path) -> None:
    original = advice()
    path = original.save(tmp_path / ADVICE_FILE)
    assert json.loads(path.read_text())["format"] == "longembed-advice/2"
    again = Advice.load(tmp_path)
    assert again == original
    assert again.strategy("bm25").versus_best.difference.method == "paired percentile bootstrap over shared queries"
    assert again.strategy("bm25").cost.vectors_per_document is None
    assert again.strategy("bm25").versus_best.bound.confidence == 0.99 and again.strategy("bm25").config["method"] is None
    data = json.loads(path.read_text())
    assert data["recommended"] == "naive-chunks" and data["strategies"][1]["config"]["model"] == "bm25"
    with pytest.raises(KeyError, match="no strategy 'pi-4096'"):
        again.strategy("pi-4096")


def test_a_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / ADVICE_FILE).write_text(json.dumps({"format": "longembed-results/1"}))
    with pytest.raises(ValueError, match="not a longembed advice file"):
        Advice.load(tmp_path)


PUBLISHED = Path(__file__).resolve().parents[2] / "results"


def test_every_published_advice_file_loads_and_format_1_keeps_its_conclusion() -> None:
    """The advice published before the non-inferiority rule (format 1) still loads, its "tied" read as
    "within" at margin 0 and its recommendation unchanged; checked against the raw JSON."""
    files = sorted(PUBLISHED.rglob(ADVICE_FILE))
    assert len(files) >= 6
    old_formats = 0
    for path in files:
        raw = json.loads(path.read_text())
        loaded = Advice.load(path)
        assert loaded.recommendation.choice == raw["recommendation"]["choice"] == loaded.recommended
        assert [s.name for s in loaded.strategies] == [s["name"] for s in raw["strategies"]]
        if raw["format"] == "longembed-advice/1":
            old_formats += 1
            assert loaded.margin == loaded.recommendation.margin == 0.0
            assert loaded.recommendation.within == raw["recommendation"]["tied"]
            assert loaded.recommendation.undecided == []
    assert old_formats == 5


def test_an_unknown_advice_format_names_both_it_understands(tmp_path: Path) -> None:
    (tmp_path / ADVICE_FILE).write_text(json.dumps({"format": "longembed-advice/9"}))
    with pytest.raises(ValueError, match="longembed-advice/2' or 'longembed-advice/1"):
        Advice.load(tmp_path)
