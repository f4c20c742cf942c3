"""Plots of the collapse metrics against text length, one line per temperature."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib import ticker

from longembed.report.plots import plt, save_figure
from longembed.results import CollapseResults

__all__ = ["METRICS", "plot_collapse"]

METRICS: dict[str, str] = {
    "mean_pairwise_cosine": "mean pairwise cosine similarity",
    "spread": "spread (mean distance to centroid)",
    "mean_norm": "mean norm before normalization",
    "sigma_a": "sigma_a (last layer, mean of heads)",
}
"""Metric key in the result buckets -> axis label."""

_KIND_STYLE = {
    "prefix": {"linestyle": "-", "marker": "o", "label": "same documents cut to length"},
    "span": {"linestyle": "--", "marker": "s", "label": "short spans"},
}


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def _model_label(config: dict[str, Any]) -> str:
    model = str(config.get("model", "?"))
    name = Path(model).name or model
    method = config.get("method", "?")
    max_length = config.get("max_length")
    return f"{name} ({method}" + (f", max_length {max_length})" if max_length else ")")


def plot_collapse(
    result: CollapseResults, out_dir: Path, metrics: Sequence[str] = tuple(METRICS)
) -> list[Path]:
    """Write one PNG per metric (metric vs length on a log2 axis, one line per temperature).

    Why: the paper's Figure 1c (cosine) and Figure 7 (sigma_a) are exactly these curves;
    seeing all temperatures on one plot shows whether TempScale flattens them.

    Args:
        result: the collapse results (``CollapseResults.load("OUTPUT")`` re-plots a finished run).
        out_dir: folder for ``collapse_<metric>.png`` (created if missing).
        metrics: which metrics to plot.

    Returns:
        The paths written, in the order of ``metrics``.  Prefix buckets are solid lines with
        circles, short-span buckets dashed with squares, in the temperature's colour.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = result.config
    temps = result.temperatures
    colours = plt.get_cmap("viridis")
    paths = []
    for metric in metrics:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        plotted = False
        for i, (tau, buckets) in enumerate(sorted(temps.items(), key=lambda kv: -float(kv[0]))):
            colour = colours(i / max(1, len(temps) - 1) * 0.85)
            for kind, style in _KIND_STYLE.items():
                pts = sorted(
                    (b.length, b.metric(metric))
                    for b in buckets
                    if b.kind == kind
                    and _finite(b.metric(metric))
                    and _finite(b.length)
                    and b.length > 0
                )
                if not pts:
                    continue
                xs, ys = zip(*pts, strict=True)
                ax.plot(
                    xs,
                    ys,
                    color=colour,
                    linestyle=style["linestyle"],
                    marker=style["marker"],
                    label=f"tau={float(tau):g}, {style['label']}",
                )
                plotted = True
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("text length (tokens seen by the model, incl. special tokens)")
        ax.set_ylabel(METRICS.get(metric, metric), fontsize=9)
        ax.set_title(f"{metric} vs length: {_model_label(config)}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if plotted:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
        paths.append(save_figure(fig, out_dir / f"collapse_{metric}.png"))
    return paths
