"""``advice.png``: every strategy's score against what it costs, with its 95% interval as an error bar
and its name beside the point; two panels, encode cost (seconds per 1k tokens, log scale) and index
size (bytes, log scale).  The recommended strategy is ringed, the best one drawn as a star."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from longembed.report.plots import error_bars, save_figure  # noqa: E402
from longembed.results.advice import BM25, HYBRID, Advice, StrategyResult  # noqa: E402

COLORS = {BM25: "tab:green", HYBRID: "tab:purple"}
DENSE_COLOR = "tab:blue"
AXES: tuple[tuple[str, Callable[[StrategyResult], float]], ...] = (
    ("encode seconds per 1k tokens (this machine; log scale)", lambda s: s.cost.encode_seconds_per_1k_tokens),
    ("index size, bytes (log scale)", lambda s: s.cost.index_bytes),
)


def plot_advice(advice: Advice, path: str | Path) -> Path:
    """Draw the score-versus-cost plot of ``advice`` into ``path`` (PNG)."""
    fig, panels = plt.subplots(1, len(AXES), figsize=(12, 5), sharey=True)
    for ax, (title, value) in zip(panels, AXES, strict=True):
        _panel(ax, advice, title, value)
    panels[0].set_ylabel("score (%), 95% interval")
    kinds = [("BM25", COLORS[BM25]), ("one embedding model", DENSE_COLOR), ("hybrid (+ BM25)", COLORS[HYBRID])]
    panels[-1].legend(handles=[Line2D([], [], color=c, marker="o", linestyle="", label=k) for k, c in kinds],
                      fontsize=8, loc="lower right")
    fig.suptitle(f"{advice.model}: score against cost per strategy (recommended: {advice.recommendation.choice}, "
                 f"ringed; best: {advice.recommendation.best}, star)", fontsize=10)
    return save_figure(fig, path)


def _panel(ax: plt.Axes, advice: Advice, title: str, value: Callable[[StrategyResult], float]) -> None:
    strategies = advice.strategies
    x = np.asarray([max(float(value(s)), 1e-9) for s in strategies])
    y = np.asarray([s.score for s in strategies])
    for i, strategy in enumerate(strategies):
        color = COLORS.get(strategy.kind, DENSE_COLOR)
        marker = "*" if strategy.name == advice.recommendation.best else "o"
        ax.scatter([x[i]], [y[i]], color=color, marker=marker, s=120 if marker == "*" else 40, zorder=3)
        if strategy.name == advice.recommendation.choice:
            ax.scatter([x[i]], [y[i]], facecolors="none", edgecolors="red", s=260, linewidths=1.5, zorder=4)
        error_bars(ax, x[i : i + 1], y[i : i + 1], [strategy.interval], color)
        ax.annotate(strategy.name, (x[i], y[i]), xytext=(5, 4), textcoords="offset points", fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)
