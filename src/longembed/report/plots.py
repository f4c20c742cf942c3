"""PNG plots of benchmark results (matplotlib, Agg backend: no display needed).

* :func:`plot_length_heatmap`: runs x lengths accuracy of passkey or needle, like LongEmbed Figure 1b
  (red = low, green = high, every cell annotated with its score and 95% interval; a run that did not
  evaluate a length is grey).
* :func:`plot_length_lines`: the same scores as lines against length, one per run, with the 95%
  intervals as error bars.
* :func:`plot_task_bars`: grouped bars, one group per task (and the average), one bar per run, with
  the 95% intervals as error bars.

A run without per-query scores (a results.json written before they were kept) is drawn without
intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from longembed.report.formatting import fmt_bounds, length_title  # noqa: E402
from longembed.report.labels import Run  # noqa: E402
from longembed.report.tables import length_columns, length_interval, task_columns, task_title  # noqa: E402
from longembed.results import Interval  # noqa: E402

#: About how many characters of 8-point legend text fit side by side under a 6-inch figure.
LEGEND_WIDTH_CHARS = 100


def plot_length_heatmap(runs: Sequence[Run], task: str, path: str | Path) -> Path | None:
    """Heatmap of ``task``'s accuracy (%) by run (rows) and length (columns); None if no run has it."""
    lengths = length_columns(runs, task)
    rows = [r for r in runs if task in r.results.tasks]
    if not lengths or not rows:
        return None
    values = np.full((len(rows), len(lengths)), np.nan)
    bounds = [[""] * len(lengths) for _ in rows]
    for i, run in enumerate(rows):
        entry = run.results.tasks[task]
        for j, n in enumerate(lengths):
            if n in (entry.by_length or {}):
                values[i, j] = (entry.by_length or {})[n]
                interval = length_interval(entry, n)
                bounds[i][j] = "" if interval is None else "\n" + fmt_bounds(interval)

    width = max(5.0, 1.0 + 0.9 * len(lengths) + 0.09 * max(len(r.label) for r in rows))
    row_height = 0.7 if any(b for row in bounds for b in row) else 0.5
    fig, ax = plt.subplots(figsize=(width, 1.2 + row_height * len(rows)))
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#d9d9d9")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(lengths)):
            value = values[i, j]
            text = "–" if np.isnan(value) else f"{value:.0f}{bounds[i][j]}"
            dark = not np.isnan(value) and (value < 20 or value > 85)
            ax.text(j, i, text, ha="center", va="center", fontsize=9 if "\n" not in text else 7,
                    color="white" if dark else "black")
    ax.set_xticks(range(len(lengths)), [length_title(n) for n in lengths])
    ax.set_yticks(range(len(rows)), [r.label for r in rows])
    ax.set_xlabel("document length (tokens)")
    ax.set_title(f"{task_title(task)}: accuracy@1 (%) by length" + (" [95% interval]" if row_height > 0.5 else ""))
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    return save_figure(fig, path)


def plot_length_lines(runs: Sequence[Run], task: str, path: str | Path) -> Path | None:
    """``task``'s accuracy (%) against length, one line per run, each point with its 95% interval as an
    error bar (runs drawn side by side at each length, so the bars do not hide each other); None if no
    run has the task."""
    lengths = length_columns(runs, task)
    rows = [r for r in runs if task in r.results.tasks]
    if not lengths or not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 + 0.8 * len(lengths)), 4.5))
    colors = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    step = min(0.05, 0.3 / len(rows))
    for i, run in enumerate(rows):
        entry = run.results.tasks[task]
        by_length = entry.by_length or {}
        shown = [j for j, n in enumerate(lengths) if n in by_length]
        x = np.array(shown, dtype=float) + step * (i - (len(rows) - 1) / 2)
        y = np.array([by_length[lengths[j]] for j in shown], dtype=float)
        color = colors(i % colors.N)
        ax.plot(x, y, marker="o", markersize=4, color=color, label=run.label)
        error_bars(ax, x, y, [length_interval(entry, lengths[j]) for j in shown], color)
    ax.set_xticks(range(len(lengths)), [length_title(n) for n in lengths])
    ax.set_xlim(-0.5, len(lengths) - 0.5)
    ax.set_ylim(0, 105)
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("accuracy@1 (%)")
    ax.set_title(f"{task_title(task)}: accuracy@1 (%) by length, 95% intervals as error bars", fontsize=10)
    ax.grid(alpha=0.3)
    below_axes_legend(ax, -0.14, len(rows))
    return save_figure(fig, path)


def error_bars(ax: plt.Axes, x: np.ndarray, y: np.ndarray, intervals: Sequence[Interval | None], color: str) -> None:
    """Draw the intervals around the points (x, y) as error bars; a point without one gets none."""
    keep = [k for k, interval in enumerate(intervals) if interval is not None and not np.isnan(y[k])]
    if not keep:
        return
    below = [max(0.0, y[k] - intervals[k].low) for k in keep]  # type: ignore[union-attr]
    above = [max(0.0, intervals[k].high - y[k]) for k in keep]  # type: ignore[union-attr]
    ax.errorbar(x[keep], y[keep], yerr=[below, above], fmt="none", ecolor=color, capsize=3, linewidth=1)


def plot_task_bars(runs: Sequence[Run], path: str | Path) -> Path | None:
    """Grouped bars: per task (and the average) one bar per run, labelled with its score, with its 95%
    interval as an error bar."""
    tasks = task_columns(runs)
    if not tasks:
        return None
    groups = [*tasks, "average"]
    titles = [task_title(t) for t in tasks] + ["Avg."]
    values = np.full((len(runs), len(groups)), np.nan)
    intervals: list[list[Interval | None]] = []
    for i, run in enumerate(runs):
        entries = [run.results.tasks.get(t) for t in tasks]
        for j, entry in enumerate(entries):
            if entry is not None:
                values[i, j] = entry.score
        if run.results.average is not None:
            values[i, -1] = run.results.average
        intervals.append([e.interval if e is not None else None for e in entries] + [run.results.average_interval])

    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(groups) * max(1.0, len(runs) / 3)), 4.5))
    colors = plt.get_cmap("tab10" if len(runs) <= 10 else "tab20")
    x = np.arange(len(groups))
    for i, run in enumerate(runs):
        offsets = x - 0.4 + width * (i + 0.5)
        ax.bar(offsets, np.nan_to_num(values[i]), width, label=run.label, color=colors(i % colors.N))
        error_bars(ax, offsets, values[i], intervals[i], "black")
        if len(runs) <= 6:
            for offset, value, interval in zip(offsets, values[i], intervals[i], strict=True):
                text = "n/a" if np.isnan(value) else f"{value:.0f}"
                top = 0 if np.isnan(value) else max(value, interval.high if interval is not None else value)
                ax.annotate(text, (offset, top), ha="center", va="bottom", fontsize=7, xytext=(0, 1),
                            textcoords="offset points")
    ax.set_xticks(x, titles, rotation=0 if len(groups) <= 6 else 20)
    ax.set_ylim(0, 110)
    ax.set_ylabel("score (%)")
    ax.set_title("LongEmbed scores by task (accuracy@1 for Passkey/Needle, nDCG@10 otherwise), "
                 "95% intervals as error bars", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    below_axes_legend(ax, -0.1, len(runs))
    return save_figure(fig, path)


def below_axes_legend(ax: plt.Axes, offset: float, entries: int) -> None:
    """The runs' legend under the axes, in as many columns (up to three) as its longest label allows.
    It stays out of tight_layout, which would squeeze the axes to make room for long run labels;
    :func:`save_figure` widens the PNG to hold it instead."""
    longest = max((len(label) for label in ax.get_legend_handles_labels()[1]), default=1)
    columns = max(1, min(entries, 3, LEGEND_WIDTH_CHARS // longest))
    legend = ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, offset), ncol=columns, frameon=False)
    legend.set_in_layout(False)


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Write a figure as PNG (creating the folder) and release it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    legends = [legend for ax in fig.axes if (legend := ax.get_legend()) is not None]
    # extra artists replace the default ones (the suptitle among them) in the tight box: name both
    fig.savefig(path, dpi=120, bbox_inches="tight",
                bbox_extra_artists=[*fig.get_default_bbox_extra_artists(), *legends])
    plt.close(fig)
    return path
