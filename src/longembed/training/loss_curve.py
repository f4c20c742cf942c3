"""``loss_curve.png``: a training run's loss against the optimizer step, with each of its terms (the retrofit,
the contextual training).

The total and its parts as ``RetrofitSummary`` records them (every ``logging_steps``, and the first
step): 1 - cos of the pooled vectors, the token states' MSE (unweighted: the total adds it times
``token_weight``), and the pairs' InfoNCE when ``--pairs`` mixed it in.  Log scale: the first steps,
where the student has just lost its position table, sit orders of magnitude above the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

CURVE_FILE = "loss_curve.png"
#: The curves' labels, by the ``RetrofitSummary`` field that holds them.
LABELS = {
    "losses": "loss (total)",
    "pooled_losses": "1 - cos, pooled vectors",
    "token_losses": "token states MSE",
    "pairs_losses": "pairs InfoNCE",
    # ``longembed train contextual`` (``ContextualSummary``)
    "in_sequence_losses": "InfoNCE, in-sequence negatives",
    "in_batch_losses": "InfoNCE, in-batch negatives",
    "distill_losses": "1 - cos to the original, texts alone",
}


#: From this many logged points on, a curve is drawn faint with its trailing mean over it: a step's loss
#: depends on the step's documents, and the trend is what the reader is after.
SMOOTH_FROM = 30


def trailing_mean(values: Sequence[float], window: int) -> np.ndarray:
    """The mean of each ``window`` consecutive values (one per full window: ``len(values) - window + 1``).
    Log-scale curves average the logs (a geometric mean), so one spike does not dominate its window."""
    logs = np.log(np.maximum(np.asarray(values, dtype=float), 1e-12))
    return np.exp(np.convolve(logs, np.ones(window) / window, mode="valid"))


def plot_loss_curve(curves: dict[str, list[tuple[int, float]]], path: str | Path, title: str = "") -> Path:
    """Draw ``curves`` (a ``RetrofitSummary``'s ``losses``, ``pooled_losses``, ... as (step, value) lists; an
    empty one is left out) into ``path`` (PNG) and return the path."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in curves.items():
        label = LABELS.get(name, name)
        if not points:
            continue
        steps, values = zip(*points, strict=True)
        if len(points) < SMOOTH_FROM:
            ax.plot(steps, values, marker="." if len(points) < 40 else None, label=label)
            continue
        window = max(3, len(points) // 10)
        line = ax.plot(steps, values, alpha=0.3, linewidth=0.8)[0]
        ax.plot(steps[window - 1:], trailing_mean(values, window), color=line.get_color(),
                label=f"{label} (mean of {window} steps)")
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (log scale)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "retrofit: loss by step", fontsize=10)
    path = Path(path)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
