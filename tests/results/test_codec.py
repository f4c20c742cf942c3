"""The results codec (longembed.results.codec): dataclass <-> dict for every result type, and files
written by the code before it (commit 9ebbcc4, tests/results/fixtures/results_9ebbcc4) still load."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from longembed.results import RunResults, SweepResults
from longembed.results.codec import from_data, to_data
from longembed.results.run_results import CacheUse, Counts, Estimate, TaskResult, UnitResult

OLD = Path(__file__).parent / "fixtures" / "results_9ebbcc4"


@dataclass
class Inner:
    x: float
    note: str | None = field(default=None, metadata={"omit_none": True})


@dataclass
class Outer:
    by_length: dict[int, Inner]
    items: list[Inner]
    pair: tuple[int, ...] = ()
    cache: CacheUse | None = field(default=None, metadata={"empty_means_none": True})
    maybe: Inner | None = None


def test_codec_handles_nesting_int_keys_optional_and_numpy_scalars():
    value = Outer({4096: Inner(np.float32(0.5)), 256: Inner(1.0, "n")}, [Inner(np.int64(3))], (1, 2))
    data = to_data(value)
    assert data == {
        "by_length": {"4096": {"x": 0.5}, "256": {"x": 1.0, "note": "n"}},  # None left out, keys as text
        "items": [{"x": 3}],
        "pair": [1, 2],
        "cache": {},  # None written as {}
        "maybe": None,
    }
    assert type(data["by_length"]["4096"]["x"]) is float and type(data["items"][0]["x"]) is int
    json.dumps(data)  # plain JSON, no numpy left
    again = from_data(Outer, data)
    assert again == Outer({4096: Inner(0.5), 256: Inner(1.0, "n")}, [Inner(3)], (1, 2))
    assert list(again.by_length) == [4096, 256] and again.cache is None


def test_missing_keys_take_defaults_unknown_keys_are_ignored_and_required_ones_are_errors():
    assert from_data(Inner, {"x": 2.0, "from_a_newer_file": 1}) == Inner(2.0)
    assert from_data(Outer, {"by_length": {}, "items": []}) == Outer({}, [])
    with pytest.raises(KeyError, match="Inner.x"):
        from_data(Inner, {"note": "no x"})
    with pytest.raises(TypeError, match="JSON object"):
        from_data(Inner, [1.0])


def _counts(truncated: int | None) -> Counts:
    return Counts(3, 2, 120.5, 300, "tokenizer", truncated)


def test_every_run_result_type_round_trips():
    unit = UnitResult(50.0, {"ndcg@10": 50.0}, _counts(1), CacheUse(1, 2, 3, 4), 0.5, 0.75)
    task = TaskResult("ndcg@10", 50.0, {"ndcg@10": 50.0}, _counts(None), None, 1.0, 2.0, None,
                      {256: 50.0}, {256: unit})
    for value in (unit, task, _counts(None), CacheUse(1, 0, 0, 0)):
        assert type(value).from_dict(value.to_dict()) == value
    assert "documents_truncated" not in _counts(None).to_dict()
    assert task.to_dict()["cache"] == {} and task.to_dict()["by_length"] == {"256": 50.0}
    assert "stand_in_for" not in task.to_dict()


@pytest.mark.parametrize("name", ["hash", "bm25"])
def test_results_written_by_the_old_code_load_and_write_back_the_same(name):
    path = OLD / name / "results.json"
    written = json.loads(path.read_text())
    run = RunResults.load(path)
    assert run.complete and run.tasks["passkey"].by_length is not None
    assert all(isinstance(n, int) for n in run.tasks["passkey"].by_length)
    assert isinstance(run.estimate, Estimate) and run.estimate.units[0].documents.count > 0
    assert run.to_dict() == written  # the new codec writes exactly what the old code wrote
    assert RunResults.from_dict(run.to_dict()) == run


def test_bm25_results_have_no_cache_use():
    run = RunResults.load(OLD / "bm25")
    assert run.tasks["passkey"].cache is None and run.tasks["passkey"].lengths[256].cache is None
    assert run.tasks["passkey"].counts.documents_truncated is None


def test_a_sweep_written_by_the_old_code_loads_and_writes_back_the_same():
    path = OLD / "sweep" / "sweep.json"
    sweep = SweepResults.load(path)
    assert sweep.scoring.per_task["passkey"].by_length == {"baseline": {"256": 50.0}, "chosen": {"256": 55.0}}
    assert sweep.all_candidates is not None and sweep.all_candidates.rows[0].chosen
    assert sweep.to_dict() == json.loads(path.read_text())
    assert SweepResults.from_dict(sweep.to_dict()) == sweep


@dataclass
class WithOptions:
    name: str
    options: dict[str, int] = field(default_factory=dict, metadata={"omit_empty": True})


def test_omit_empty_leaves_an_empty_field_out_and_reads_it_back_as_its_default():
    assert to_data(WithOptions("a")) == {"name": "a"}
    assert to_data(WithOptions("a", {"n": 200})) == {"name": "a", "options": {"n": 200}}
    assert from_data(WithOptions, {"name": "a"}) == WithOptions("a")
    assert from_data(WithOptions, {"name": "a", "options": {"n": 200}}).options == {"n": 200}
