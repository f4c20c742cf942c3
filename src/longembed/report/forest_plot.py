"""The forest plot of a paired comparison: every difference B - A with its interval as an error bar.

One panel per pair of runs (the same x scale for all), one row per test as in the tables, a line at
zero; significant differences are drawn filled in red and marked "*", the others hollow in grey.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from longembed.report.comparison_tables import SIGNIFICANT, difference_name, pair_title  # noqa: E402
from longembed.report.plots import save_figure  # noqa: E402
from longembed.results import Comparison  # noqa: E402
from longembed.results.comparison import PairComparison  # noqa: E402

SIGNIFICANT_COLOR = "crimson"
OTHER_COLOR = "dimgrey"


@dataclass(frozen=True)
class ForestRow:
    """One error bar: its label, the difference and its interval, whether it is significant."""

    label: str
    estimate: float
    low: float
    high: float
    significant: bool


def forest_rows(pair: PairComparison) -> list[ForestRow]:
    """The pair's tests as error bars, top to bottom in the tables' order."""
    rows = []
    for d in pair.differences:
        task, length = difference_name(d)
        label = task if length == "–" else f"{task} {length}"
        rows.append(ForestRow(label, d.difference.estimate, d.difference.low, d.difference.high, d.significant))
    return rows


def plot_comparison(comparison: Comparison, path: str | Path) -> Path:
    """Write the forest plot of every pair of ``comparison`` to ``path`` (PNG)."""
    panels = [forest_rows(pair) for pair in comparison.pairs]
    heights = [max(1.5, 0.32 * len(rows) + 0.9) for rows in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, sum(heights)), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, pair in zip(axes[:, 0], comparison.pairs, strict=True):
        draw_pair(ax, pair)
    axes[-1, 0].set_xlabel(f"B - A (points), {comparison.confidence:.0%} paired bootstrap interval; "
                           f"{SIGNIFICANT} = p < {comparison.alpha:g}"
                           + (" (Holm-adjusted)" if any(d.p_adjusted is not None for d in comparison.differences()) else ""))
    return save_figure(fig, path)


def draw_pair(ax: plt.Axes, pair: PairComparison) -> None:
    """One pair's error bars on ``ax``, the first test at the top, and the zero line."""
    rows = forest_rows(pair)
    for y, row in enumerate(reversed(rows)):
        color = SIGNIFICANT_COLOR if row.significant else OTHER_COLOR
        ax.errorbar(row.estimate, y, xerr=[[row.estimate - row.low], [row.high - row.estimate]], fmt="o",
                    color=color, markerfacecolor=color if row.significant else "white", capsize=3)
        if row.significant:
            ax.annotate(SIGNIFICANT, (row.high, y), xytext=(4, -4), textcoords="offset points", color=color)
    ax.axvline(0.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)), [row.label for row in reversed(rows)])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_title(pair_title(pair), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
