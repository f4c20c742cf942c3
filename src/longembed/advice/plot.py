"""``advice.png``: one row per strategy, best at the top, with three panels sharing the rows: the score
with its 95% interval, the encode cost and the index size (log scales).  Names label the rows (never
clipped); the recommended row is bold, the best a star, each score coloured by its verdict."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from longembed.advice.recommend import UNDECIDED, WITHIN, WORSE  # noqa: E402
from longembed.report.plots import save_figure  # noqa: E402
from longembed.results.advice import Advice, StrategyResult  # noqa: E402

VERDICT_COLORS = {None: "black", WITHIN: "tab:green", UNDECIDED: "tab:orange", WORSE: "tab:red"}
COSTS: tuple[tuple[str, Callable[[StrategyResult], float], str], ...] = (
    ("encode s per 1k tokens\n(this machine, log)", lambda s: s.cost.encode_seconds_per_1k_tokens, "tab:blue"),
    ("index size, bytes (log)", lambda s: float(s.cost.index_bytes), "tab:gray"),
)
TITLE_WIDTH = 110


def plot_advice(advice: Advice, path: str | Path) -> Path:
    """Draw the score-and-cost plot of ``advice`` into ``path`` (PNG)."""
    return save_figure(advice_figure(advice), path)


def advice_figure(advice: Advice) -> plt.Figure:
    """The plot as a laid-out figure (every label inside it)."""
    strategies = sorted(advice.strategies, key=lambda s: s.score)  # the best at the top
    rows = np.arange(len(strategies))
    fig, panels = plt.subplots(1, 1 + len(COSTS), figsize=(13, 1.6 + 0.42 * len(strategies)), sharey=True,
                               gridspec_kw={"width_ratios": [2.2] + [1] * len(COSTS)})
    _score_panel(panels[0], advice, strategies, rows)
    for ax, (title, value, color) in zip(panels[1:], COSTS, strict=True):
        values = [max(value(s), 1e-9) for s in strategies]
        ax.barh(rows, values, color=color, alpha=0.7, height=0.6)
        ax.set_xscale("log")
        ax.set_xlim(*decades(values))  # whole decades: labelled major ticks, no crowded minor labels
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(title, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        ax.tick_params(labelsize=8)
    r = advice.recommendation
    title = (f"{advice.model}: use {r.choice} (bold, >); best score: {r.best} (black star). Scores in green: within "
             f"{advice.margin:g} points of the best; red: worse by more; orange: can't tell yet")
    fig.suptitle("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=10)
    fig.tight_layout()
    return fig


def _score_panel(ax: plt.Axes, advice: Advice, strategies: list[StrategyResult], rows: np.ndarray) -> None:
    choice, best = advice.recommendation.choice, advice.recommendation.best
    for row, s in zip(rows, strategies, strict=True):
        verdict = None if s.versus_best is None else s.versus_best.verdict
        color = VERDICT_COLORS.get(verdict, "black")
        if s.interval is not None:
            ax.plot([s.interval.low, s.interval.high], [row, row], color=color, linewidth=1.5)
        ax.plot([s.score], [row], marker="*" if s.name == best else "o", color=color,
                markersize=13 if s.name == best else 6, linestyle="")
    ax.set_yticks(rows, [("> " if s.name == choice else "") + s.name for s in strategies], fontsize=9)
    for label, s in zip(ax.get_yticklabels(), strategies, strict=True):
        if s.name == choice:
            label.set_fontweight("bold")
    ax.set_xlabel("score (%), 95% interval", fontsize=9)
    ax.set_ylim(-0.7, len(strategies) - 0.3)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.tick_params(axis="x", labelsize=8)


def decades(values: list[float]) -> tuple[float, float]:
    """The whole powers of ten around ``values`` (at least one decade apart)."""
    low = 10.0 ** np.floor(np.log10(min(values)))
    high = 10.0 ** np.ceil(np.log10(max(values)))
    return low, high if high > low else low * 10
