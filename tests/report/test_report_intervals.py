"""Confidence intervals wherever a score is shown (issue 25): the table ``longembed eval`` prints,
report.md (the runs' own intervals, and the partial means the report computes) and the plots; runs
written before per-query scores were kept show plain numbers."""

from __future__ import annotations

import contextlib
import io
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import build_tiny, slow_fixture

from longembed.cli.main import main
from longembed.report.formatting import length_title
from longembed.report.means import Part, partial_mean, task_parts
from longembed.report.tables import results_summary
from longembed.report.write import write_report
from longembed.results import Interval, RunResults, TaskResult

OLD = Path(__file__).parents[1] / "results" / "fixtures" / "results_9ebbcc4"
METHOD = "95% percentile bootstrap over queries, 10,000 resamples, seed 0"


@dataclass
class TinyRuns:
    pi: Path  # passkey at 256 and 512
    gp: Path  # passkey at 512 only
    printed: str  # what ``longembed eval`` printed for the pi run


@pytest.fixture(scope="module")
@slow_fixture  # two whole eval runs
def tiny_runs(tmp_path_factory: pytest.TempPathFactory) -> TinyRuns:
    """Two real ``longembed eval`` runs of a tiny random BERT: scores well inside (0, 100), so their
    intervals have a width."""
    root = tmp_path_factory.mktemp("interval-runs")
    model = build_tiny("bert", root / "tinybert")
    printed = io.StringIO()
    for method, lengths in (("pi", "256,512"), ("gp", "512")):
        with contextlib.redirect_stdout(printed if method == "pi" else io.StringIO()):
            code = main(["eval", "--model", str(model), "--method", method, "--max-length", "512", "--tasks",
                         "passkey", "--lengths", lengths, "--output", str(root / method),
                         "--cache-dir", str(root / "cache")])
        assert code == 0
    return TinyRuns(root / "pi", root / "gp", printed.getvalue())


def bounds(interval: Interval | None, digits: int) -> str:
    assert interval is not None
    return f"[{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def table(text: str, header_start: str) -> dict[str, list[str]]:
    """The markdown table whose header starts with ``header_start``: row label -> cells (header under "")."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows: dict[str, list[str]] = {}
    for line in [lines[start], *lines[start + 2:]]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows["" if line == lines[start] else cells[0]] = cells
    return rows


def column(rows: dict[str, list[str]], label: str, name: str) -> str:
    return rows[label][rows[""].index(name)]


def test_eval_prints_each_score_with_its_interval(tiny_runs: TinyRuns) -> None:
    results = RunResults.load(tiny_runs.pi)
    passkey = results.tasks["passkey"]
    assert passkey.interval.low < passkey.score < passkey.interval.high  # a real width to show
    lines = tiny_runs.printed.splitlines()
    row = next(line for line in lines if line.startswith("passkey "))
    assert re.search(rf"{passkey.score:.2f}\s+{re.escape(bounds(passkey.interval, 1))}\s", row), row
    for n, unit in passkey.lengths.items():  # each length its own interval
        assert f"{length_title(n)}: {unit.score:.1f} {bounds(unit.interval, 0)}" in tiny_runs.printed
    assert passkey.lengths[256].interval != passkey.lengths[512].interval
    average = next(line for line in lines if line.startswith("average"))
    assert re.search(rf"{results.average:.2f}\s+{re.escape(bounds(results.average_interval, 1))}\s", average)
    assert f"[low, high]: {METHOD}" in tiny_runs.printed


def test_the_summary_of_a_run_written_before_shows_plain_numbers() -> None:
    summary = results_summary(RunResults.load(OLD / "hash"))
    assert "passkey       accuracy@1     88.00    200" in summary
    assert "256: 94.0  512: 82.0" in summary
    assert "[" not in summary and "95% interval" not in summary
    assert "no confidence intervals: this run kept no per-query scores" in summary


def test_report_shows_each_runs_intervals_and_plain_numbers_for_an_old_run(tiny_runs: TinyRuns, tmp_path: Path) -> None:
    write_report([tiny_runs.pi, tiny_runs.gp, OLD / "hash"], tmp_path)
    text = (tmp_path / "report.md").read_text()
    pi, gp = RunResults.load(tiny_runs.pi), RunResults.load(tiny_runs.gp)
    scores = table(text, "| run | model")
    passkey = pi.tasks["passkey"]
    assert column(scores, "tinybert pi 512", "Passkey") == f"{passkey.score:.1f} {bounds(passkey.interval, 0)}"
    assert column(scores, "tinybert pi 512", "Avg.") == f"{pi.average:.1f} {bounds(pi.average_interval, 0)}*"
    assert column(scores, "model truncate 512", "Passkey") == "88.0"
    assert column(scores, "model truncate 512", "tiny") == "100.0"
    by_length = table(text, "| run | 256 |")
    assert by_length["tinybert pi 512"][1:4] == [
        f"{u.score:.1f} {bounds(u.interval, 0)}" for u in (passkey.lengths[256], passkey.lengths[512], passkey)
    ]
    assert by_length["model truncate 512"][1:] == ["94.0", "82.0", "88.0", "82.0"]
    # the mean over the one length both runs share (512) is that length's score, and its interval,
    # recomputed from the per-query scores, is the one the run stored for that length
    for results in (pi, gp):
        unit = results.tasks["passkey"].lengths[512]
        label = "tinybert pi 512" if results is pi else "tinybert gp 512"
        assert column(by_length, label, "mean 512") == f"{unit.score:.1f} {bounds(unit.interval, 0)}"
        assert column(scores, label, "Avg. (shared)") == f"{unit.score:.1f} {bounds(unit.interval, 0)}"
    assert METHOD in text and "resamples within each task and length" in text
    assert "No intervals (no per-query scores in results.json, written before longembed kept them) " \
           "for: model truncate 512." in text


def test_shared_average_over_two_lengths_is_the_runs_own_task_interval(tiny_runs: TinyRuns, tmp_path: Path) -> None:
    """Against the old run (passkey at 256 and 512, plus a task of its own), the shared average is
    passkey over both lengths: recomputed by the report from the file, it equals the task score and the
    interval ``eval`` computed when it ran (the same stratified resampling, the same seed)."""
    write_report([tiny_runs.pi, OLD / "hash"], tmp_path)
    scores = table((tmp_path / "report.md").read_text(), "| run | model")
    passkey = RunResults.load(tiny_runs.pi).tasks["passkey"]
    assert column(scores, "tinybert pi 512", "Avg. (shared)") == f"{passkey.score:.1f} {bounds(passkey.interval, 0)}"
    assert column(scores, "model truncate 512", "Avg. (shared)") == "88.0"


def test_partial_mean_equals_a_naive_resampling_loop(tiny_runs: TinyRuns) -> None:
    """Passkey at two lengths (weight 1/4 each) and a real task (1/2), as a two-task average weighs them:
    the estimate is that weighted mean, the bounds a plain loop's percentiles to Monte Carlo error."""
    passkey = RunResults.load(tiny_runs.pi).tasks["passkey"]
    real_scores = np.random.default_rng(5).random(30) ** 2 * 100  # skewed, like nDCG
    real = TaskResult("ndcg@10", float(real_scores.mean()), {}, passkey.counts,
                      per_query={f"q{i}": float(v) for i, v in enumerate(real_scores)})
    mean = partial_mean(task_parts({"passkey": passkey, "real": real}, {"passkey": [256, 512]}))
    groups = {"256": list(passkey.lengths[256].per_query.values()),
              "512": list(passkey.lengths[512].per_query.values()), "real": list(real_scores)}
    weights = {"256": 0.25, "512": 0.25, "real": 0.5}
    expected = 0.25 * passkey.by_length[256] + 0.25 * passkey.by_length[512] + 0.5 * real.score
    assert mean.value == pytest.approx(expected, abs=1e-9)
    assert mean.interval.estimate == pytest.approx(expected, abs=1e-3)
    draw = random.Random(11)
    naive = sorted(
        sum(w * sum(draw.choices(groups[g], k=len(groups[g]))) / len(groups[g]) for g, w in weights.items())
        for _ in range(5000)
    )
    low, high = np.percentile(naive, [2.5, 97.5])
    assert mean.interval.low == pytest.approx(low, abs=0.5)
    assert mean.interval.high == pytest.approx(high, abs=0.5)
    assert mean.interval.high - mean.interval.low > 5  # not a degenerate interval


def test_partial_mean_without_per_query_scores_has_no_interval() -> None:
    mean = partial_mean({"a": Part(50.0, None), "b": Part(80.0, {"q1": 80.0, "q2": 80.0}, weight=2.0)})
    assert mean.value == pytest.approx(70.0) and mean.interval is None
    with pytest.raises(ValueError, match="at least one part"):
        partial_mean({})


@pytest.mark.parametrize("with_intervals", [True, False])
def test_plots_are_written_with_and_without_intervals(tiny_runs: TinyRuns, tmp_path: Path, with_intervals: bool) -> None:
    import matplotlib.image

    paths = [tiny_runs.pi, tiny_runs.gp, OLD / "hash"] if with_intervals else [OLD / "hash", OLD / "bm25"]
    written = write_report(paths, tmp_path)
    for key in ("scores_by_task", "passkey_by_length", "passkey_vs_length"):
        assert written[key].stat().st_size > 0
        image = matplotlib.image.imread(written[key])
        assert image.ndim == 3 and image[..., :3].std() > 0.05  # an image, not blank
    text = (tmp_path / "report.md").read_text()
    assert "![passkey accuracy against length, with 95% intervals](passkey_vs_length.png)" in text
    assert ("so the scores have no confidence intervals" in text) is not with_intervals


def test_error_bars_span_each_interval_and_skip_points_without_one() -> None:
    import matplotlib.pyplot as plt

    from longembed.report.plots import error_bars

    fig, ax = plt.subplots()
    x, y = np.array([0.0, 1.0, 2.0]), np.array([50.0, 30.0, 99.0])
    error_bars(ax, x, y, [Interval(50.0, 40.0, 65.0), None, Interval(99.0, 96.0, 100.0)], "black")
    segments = [s.tolist() for c in ax.collections for s in c.get_segments()]
    plt.close(fig)
    assert segments == [[[0.0, 40.0], [0.0, 65.0]], [[2.0, 96.0], [2.0, 100.0]]]


def test_long_run_labels_neither_squeeze_the_axes_nor_fall_off_the_png(tmp_path: Path) -> None:
    """Six 45-character labels under a 6-inch plot: tight_layout once shrank the axes to a sliver to
    make room for them (the e5 report of issue 25). Now the axes keep the width they have without a
    legend, long labels get two columns (short ones three), and the saved PNG is wide enough to hold
    the legend."""
    import matplotlib.image
    import matplotlib.pyplot as plt

    from longembed.report.plots import below_axes_legend, save_figure

    def draw(label_length: int, legend: bool) -> tuple[plt.Figure, plt.Axes]:
        fig, ax = plt.subplots(figsize=(6.0, 4.5), dpi=120)
        for i in range(6):
            ax.plot([0, 1], [i, i], label=f"{i}" * label_length)
        if legend:
            below_axes_legend(ax, -0.14, 6)
        fig.tight_layout()
        return fig, ax

    bare_fig, bare_ax = draw(45, legend=False)
    bare_width = bare_ax.get_position().width
    plt.close(bare_fig)
    fig, ax = draw(45, legend=True)
    assert ax.get_legend()._ncols == 2 and ax.get_position().width == pytest.approx(bare_width)
    legend_pixels = ax.get_legend().get_window_extent().width
    png = matplotlib.image.imread(save_figure(fig, tmp_path / "long.png"))
    assert png.shape[1] >= legend_pixels
    short_fig, short_ax = draw(12, legend=True)
    assert short_ax.get_legend()._ncols == 3
    plt.close(short_fig)
