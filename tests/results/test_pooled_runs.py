"""``longembed.results.pool_runs`` and ``longembed compare DIR1:DIR2 ...``: a side pooled from runs that
scored different lengths compares exactly as one run that scored them all."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.evaluation.runner import evaluate_model
from longembed.results import RunResults, compare, pool_runs
from longembed.retrieval.bm25 import BM25Model


def bm25_run(folder: Path, lengths: list[int]) -> RunResults:
    return evaluate_model(BM25Model(), ["passkey"], lengths=lengths, output_dir=folder, show_progress=False,
                          log=None, estimate=False)


def degraded(run: RunResults, folder: Path) -> RunResults:
    """A copy with every third query of every length lost."""
    out = copy.deepcopy(run)
    for unit in out.tasks["passkey"].lengths.values():
        for query in list(unit.per_query)[::3]:
            unit.per_query[query] = 0.0
    out.save(folder / "results.json")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pool")
    whole = bm25_run(root / "whole", [256, 512])
    degraded(whole, root / "whole-worse")
    for length in (256, 512):
        part = bm25_run(root / f"part-{length}", [length])
        degraded(part, root / f"part-{length}-worse")
    return {p.name: p for p in root.iterdir()}


def table(comparison) -> list[tuple]:
    return [(d.task, d.length, d.queries, d.a, d.b, d.difference.estimate, d.difference.low,
             d.difference.high, d.p_value) for pair in comparison.pairs for d in pair.differences]


def test_a_pooled_side_compares_as_the_run_that_scored_every_length(runs: dict[str, Path]) -> None:
    reference = compare([runs["whole"], runs["whole-worse"]])
    pooled = compare([pool_runs([runs["part-256"], runs["part-512"]]),
                      pool_runs([runs["part-512-worse"], runs["part-256-worse"]])])
    assert table(pooled) == table(reference)
    assert [d.length for d in reference.pairs[0].differences] == [256, 512, None]  # two lengths and their mean
    assert reference.pairs[0].differences[-1].difference.estimate < 0


def test_lengths_keep_only_those_units(runs: dict[str, Path]) -> None:
    pooled = pool_runs([runs["part-256"], runs["part-512"]], lengths=[512])
    assert list(pooled.tasks["passkey"].lengths) == [512]


def test_a_unit_scored_twice_is_refused(runs: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match=r"passkey at length 256 is scored by both .*whole and .*part-256"):
        pool_runs([runs["whole"], runs["part-256"]])
    with pytest.raises(ValueError, match="at least one run"):
        pool_runs([])


def test_the_command_pools_folders_joined_by_the_path_separator(runs: dict[str, Path], capsys) -> None:
    a = os.pathsep.join(str(runs[n]) for n in ("part-256", "part-512"))
    b = os.pathsep.join(str(runs[n]) for n in ("part-256-worse", "part-512-worse"))
    assert main(["compare", a, b]) == 0
    pooled = capsys.readouterr().out
    assert pooled.splitlines()[0] == "part-256-worse+part-512-worse (B) vs part-256+part-512 (A)"
    assert main(["compare", str(runs["whole"]), str(runs["whole-worse"])]) == 0
    whole = capsys.readouterr().out
    assert pooled.splitlines()[3:6] == whole.splitlines()[3:6]  # the same rows: 256, 512 and the mean
    assert main(["compare", a, b, "--baseline", a]) == 0  # a pooled baseline is found among the runs
    assert capsys.readouterr().out.splitlines()[0] == "part-256-worse+part-512-worse (B) vs part-256+part-512 (A)"
