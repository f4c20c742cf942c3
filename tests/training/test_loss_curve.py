"""``loss_curve.png``: a long curve is drawn faint under its trailing geometric mean, a short one as it is."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest

from longembed.training import loss_curve
from longembed.training.loss_curve import SMOOTH_FROM, plot_loss_curve, trailing_mean


def test_trailing_mean_is_the_geometric_mean_of_each_full_window() -> None:
    values = [0.5, 2.0, 8.0, 1.0, 4.0]
    expected = [math.prod(values[i:i + 3]) ** (1 / 3) for i in range(len(values) - 2)]  # naive
    assert trailing_mean(values, 3) == pytest.approx(expected)
    assert len(trailing_mean(list(range(1, 61)), 6)) == 55


@pytest.mark.parametrize("points", [SMOOTH_FROM - 1, 60])
def test_long_curves_get_their_trend_drawn_over_them(tmp_path, monkeypatch, points: int) -> None:
    drawn = []
    savefig = plt.Figure.savefig

    def keep_lines(fig, *args, **kwargs):
        drawn.extend((line.get_label(), len(line.get_xdata())) for line in fig.axes[0].get_lines())
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", keep_lines)
    curve = [(step, 1.0 + (step % 3)) for step in range(1, points + 1)]
    path = plot_loss_curve({"losses": curve, "distill_losses": []}, tmp_path / "curve.png", "t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labelled = [(label, n) for label, n in drawn if not label.startswith("_")]
    if points < SMOOTH_FROM:
        assert labelled == [(loss_curve.LABELS["losses"], points)]
    else:
        assert labelled == [(f"{loss_curve.LABELS['losses']} (mean of 6 steps)", points - 5)]
        assert len(drawn) == 2  # and the raw curve, unlabelled
