"""advice.png on a realistic nine-strategy advice with long names: every label lies inside the figure
(matplotlib's window extents against the figure's box, after drawing), and no two labels overlap."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import matplotlib.text
import pytest

from longembed.advice.plot import advice_figure, plot_advice
from longembed.results import Interval, StrategyCost, StrategyResult
from longembed.results.advice import Advice, AdviceEstimate, Recommendation, VersusBest

NAMES = ["bm25", "truncate", "pi-4096", "naive-chunks", "late-chunks", "truncate+bm25", "pi-4096+bm25",
         "naive-chunks+bm25", "late-chunks+bm25"]
SCORES = [88.7, 61.2, 70.4, 96.6, 97.9, 90.1, 91.0, 97.5, 98.3]
VERDICTS = ["worse", "worse", "worse", "undecided", "within", "worse", "worse", "undecided", None]


def nine_strategies(model: str = "/work/models/all-MiniLM-L6-v2-a-rather-long-folder-name/with/more") -> Advice:
    strategies = []
    for i, (name, score, verdict) in enumerate(zip(NAMES, SCORES, VERDICTS, strict=True)):
        cost = StrategyCost(0.0005 * 3**i, None if name == "bm25" else 1.0 + i, 384, 10_000 * 4**i, 20.0 + i, "x")
        versus = None if verdict is None else VersusBest(
            Interval(score - 98.3, score - 104.0, score - 93.0), "task", 0.1, "exact", 0.5, False,
            Interval(score - 98.3, score - 106.0, score - 91.0, 0.99375), verdict, 40, 1300)
        strategies.append(StrategyResult(name, name, "dense", f"runs/{name}", score, Interval(score, score - 6, score + 1.5),
                                         cost, versus_best=versus))
    recommendation = Recommendation("late-chunks+bm25", "late-chunks", 2.0, ["late-chunks"], ["naive-chunks"],
                                    "cost order", "reason")
    return Advice(model, "ape", "mean", 512, 4096, ["paul-graham-essays"], strategies, recommendation,
                  AdviceEstimate([], 0.0, 0.0, None, ""), 1.0, margin=2.0)


@pytest.mark.parametrize("model", ["default", "/work/models/all-MiniLM-L6-v2-a-rather-long-folder-name/with/more"])
def test_every_label_lies_inside_the_figure_and_none_overlap(model: str) -> None:
    fig = advice_figure(nine_strategies(model))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    # x tick labels: matplotlib keeps labels of ticks outside the view (not drawn); the figure's tight box
    # holds every drawn one
    tight = fig.get_tightbbox(renderer)
    assert tight.x0 >= -0.01 and tight.y0 >= -0.01 and tight.x1 <= fig.get_figwidth() + 0.01
    assert tight.y1 <= fig.get_figheight() + 0.01
    x_ticks = {id(t) for ax in fig.axes for t in ax.get_xticklabels(which="both")}
    texts = [t for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text().strip() and id(t) not in x_ticks]
    texts += drawn_x_tick_labels(fig)
    assert any(t is fig._suptitle for t in texts)
    assert any(t.get_text() == "> late-chunks" for t in texts)  # the recommendation's row, marked
    extents = []
    for text in texts:
        extent = text.get_window_extent(renderer)
        assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, text.get_text()
        assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1, text.get_text()
        extents.append((text.get_text(), extent))
    for i, (a, first) in enumerate(extents):
        for b, second in extents[i + 1:]:
            assert not first.overlaps(second) or first.width == 0 or second.width == 0, (a, b)


def drawn_x_tick_labels(fig) -> list[matplotlib.text.Text]:
    """The x tick labels matplotlib draws: ticks inside the axis' view, with a label."""
    labels = []
    for ax in fig.axes:
        low, high = sorted(ax.xaxis.get_view_interval())
        for tick in [*ax.xaxis.get_major_ticks(), *ax.xaxis.get_minor_ticks()]:
            if low <= tick.get_loc() <= high and tick.label1.get_visible() and tick.label1.get_text().strip():
                labels.append(tick.label1)
    return labels


@pytest.mark.parametrize("index_bytes", [[18_400, 49_600, 68_000, 122_900, 172_400], [5_000, 9_000]])
def test_cost_axes_within_a_decade_keep_their_labels_apart(index_bytes: list[int]) -> None:
    advice = nine_strategies()
    for s, size in zip(advice.strategies, index_bytes * 9, strict=False):
        s.cost.index_bytes = size  # the real essays advice: every index between 18 kB and 172 kB
    fig = advice_figure(advice)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [(t.get_text(), t.get_window_extent(renderer)) for t in drawn_x_tick_labels(fig)]
    assert len(labels) >= 2 * len(fig.axes)
    for i, (a, first) in enumerate(labels):
        for b, second in labels[i + 1:]:
            assert not first.overlaps(second), (a, b)


@pytest.mark.slow
def test_the_plot_is_written(tmp_path: Path) -> None:
    advice = nine_strategies()
    path = plot_advice(advice, tmp_path / "advice.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    # the saved picture keeps the whole figure: the title too (a legend once cropped it away)
    height, width = matplotlib.image.imread(path).shape[:2]
    figure = advice_figure(advice)
    assert height >= 0.97 * figure.get_figheight() * 120 and width >= 0.97 * figure.get_figwidth() * 120
