"""PNG plots of benchmark results (matplotlib, Agg backend: no display needed).

* :func:`plot_length_heatmap`: runs x lengths accuracy of passkey or needle, like LongEmbed Figure 1b
  (red = low, green = high, every cell annotated; a run that did not evaluate a length is grey).
* :func:`plot_task_bars`: grouped bars, one group per task (and the average), one bar per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from longembed.report.formatting import length_title  # noqa: E402
from longembed.report.tables import Run, length_columns, task_columns, task_title  # noqa: E402


def plot_length_heatmap(runs: Sequence[Run], task: str, path: str | Path) -> Path | None:
    """Heatmap of ``task``'s accuracy (%) by run (rows) and length (columns); None if no run has it."""
    lengths = length_columns(runs, task)
    rows = [r for r in runs if task in r.results.tasks]
    if not lengths or not rows:
        return None
    values = np.full((len(rows), len(lengths)), np.nan)
    for i, run in enumerate(rows):
        by_length = run.results.tasks[task].by_length or {}
        for j, n in enumerate(lengths):
            if n in by_length:
                values[i, j] = by_length[n]

    width = max(5.0, 1.0 + 0.9 * len(lengths) + 0.09 * max(len(r.label) for r in rows))
    fig, ax = plt.subplots(figsize=(width, 1.2 + 0.5 * len(rows)))
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#d9d9d9")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(lengths)):
            value = values[i, j]
            text = "–" if np.isnan(value) else f"{value:.0f}"
            dark = not np.isnan(value) and (value < 20 or value > 85)
            ax.text(j, i, text, ha="center", va="center", fontsize=9, color="white" if dark else "black")
    ax.set_xticks(range(len(lengths)), [length_title(n) for n in lengths])
    ax.set_yticks(range(len(rows)), [r.label for r in rows])
    ax.set_xlabel("document length (tokens)")
    ax.set_title(f"{task_title(task)}: accuracy@1 (%) by length")
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    return save_figure(fig, path)


def plot_task_bars(runs: Sequence[Run], path: str | Path) -> Path | None:
    """Grouped bars: per task (and the average) one bar per run, labelled with its score."""
    tasks = task_columns(runs)
    if not tasks:
        return None
    groups = [*tasks, "average"]
    titles = [task_title(t) for t in tasks] + ["Avg."]
    values = np.full((len(runs), len(groups)), np.nan)
    for i, run in enumerate(runs):
        for j, task in enumerate(tasks):
            if task in run.results.tasks:
                values[i, j] = run.results.tasks[task].score
        if run.results.average is not None:
            values[i, -1] = run.results.average

    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(groups) * max(1.0, len(runs) / 3)), 4.5))
    colors = plt.get_cmap("tab10" if len(runs) <= 10 else "tab20")
    x = np.arange(len(groups))
    for i, run in enumerate(runs):
        offsets = x - 0.4 + width * (i + 0.5)
        bars = ax.bar(offsets, np.nan_to_num(values[i]), width, label=run.label, color=colors(i % colors.N))
        if len(runs) <= 6:
            for bar, value in zip(bars, values[i], strict=True):
                text = "n/a" if np.isnan(value) else f"{value:.0f}"
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, 0 if np.isnan(value) else value),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(x, titles, rotation=0 if len(groups) <= 6 else 20)
    ax.set_ylim(0, 105)
    ax.set_ylabel("score (%)")
    ax.set_title("LongEmbed scores by task (accuracy@1 for Passkey/Needle, nDCG@10 otherwise)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(len(runs), 3), frameon=False)
    return save_figure(fig, path)


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Write a figure as PNG (creating the folder) and release it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
