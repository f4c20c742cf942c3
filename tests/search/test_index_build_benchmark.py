"""benchmarks/index_build.py reads the breakdown ``longembed index`` prints (the two must not drift)."""

from __future__ import annotations

import pytest
from conftest import load_benchmark_script

from longembed.search.stages import STAGES, StageTimes


@pytest.fixture(scope="module")
def index_build():
    load_benchmark_script("ort_int8_throughput")  # index_build imports it by name
    return load_benchmark_script("index_build")


def test_the_benchmark_parses_every_stage_of_the_printed_breakdown(index_build) -> None:
    times = StageTimes()
    times.seconds.update(reading=0.0213, loading=1.25, planning=0.1, tokenizing=0.004, encoding=42.0,
                         writing=0.5, finishing=0.2)
    times.background, times.tokens, times.wall = 2.5, 130_000, 44.1
    parsed = index_build.parse_times("some other line\n" + times.summary() + "\n")
    assert set(parsed["seconds"]) == set(STAGES)
    assert parsed["seconds"]["reading"] == pytest.approx(0.0213)
    assert parsed["seconds"]["encoding"] == pytest.approx(42.0)
    assert parsed["wall"] == pytest.approx(44.1)
    assert parsed["tokens_per_second"] == pytest.approx(130_000 / 44.1, abs=1)
    assert parsed["encoding_share"] == pytest.approx(42.0 / 44.1, abs=1e-3)


def test_no_breakdown_is_an_error_that_shows_the_output(index_build) -> None:
    with pytest.raises(SystemExit, match="printed no 'time' line"):
        index_build.parse_times("Traceback ...\n")
