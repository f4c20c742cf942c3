"""A paired comparison as tables, a forest plot and its three files (longembed.report.comparison*,
longembed.report.forest_plot), on a comparison written by hand so every number is known."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgba

from longembed.report.comparison import write_comparison
from longembed.report.comparison_tables import comparison_markdown, comparison_text, overall_table, p_text
from longembed.report.forest_plot import SIGNIFICANT_COLOR, draw_pair, forest_rows
from longembed.results import Comparison, Interval
from longembed.results.comparison import (
    AVERAGE,
    HOLM,
    NO_CORRECTION,
    TASK,
    UNIT,
    ComparedRun,
    Difference,
    NotCompared,
    PairComparison,
)


def difference(level: str, task: str, length: int | None, estimate: float, low: float, high: float, p: float,
               significant: bool, lengths: list[int] | None = None) -> Difference:
    return Difference(task=task, length=length, level=level, lengths=lengths or ([] if length is None else [length]),
                      queries=50, a=60.0, b=60.0 + estimate, difference=Interval(estimate, low, high),
                      p_value=p, p_method="exact", significant=significant)


def two_run_comparison() -> Comparison:
    pair = PairComparison("truncate", "pi", [
        difference(UNIT, "passkey", 256, 0.0, 0.0, 0.0, 1.0, False),
        difference(UNIT, "passkey", 4096, -12.5, -20.0, -5.25, 0.00002, True),
        difference(TASK, "passkey", None, -6.25, -10.0, -2.5, 0.004, True, lengths=[256, 4096]),
        difference(UNIT, "qmsum", None, 1.5, -0.5, 3.5, 0.2, False),
        difference(AVERAGE, AVERAGE, None, -2.375, -5.0, 0.25, 0.07, False),
    ], [NotCompared("passkey", 8192, "pi"), NotCompared("squality", None, "truncate")])
    return Comparison(runs=[ComparedRun("truncate", "/runs/truncate"), ComparedRun("pi", "/runs/pi")],
                      pairs=[pair], correction=NO_CORRECTION, tests=5)


def test_p_values_are_never_printed_as_zero() -> None:
    assert [p_text(p) for p in (1.0, 0.0499, 0.001, 0.00002)] == ["1.000", "0.050", "0.001", "2.0e-05"]


def test_text_table_rows_values_and_marks() -> None:
    text = comparison_text(two_run_comparison())
    lines = text.splitlines()
    assert lines[0] == "pi (B) vs truncate (A)"
    assert lines[1].split() == ["task", "length", "queries", "A", "B", "B", "-", "A", "95%", "interval", "p"]
    rows = [line.split() for line in lines[3:8]]
    assert rows[0] == ["Passkey", "256", "50", "60.00", "60.00", "+0.00", "[+0.00,", "+0.00]", "1.000"]
    assert rows[1] == ["Passkey", "4k", "50", "60.00", "47.50", "-12.50", "[-20.00,", "-5.25]", "2.0e-05", "*"]
    assert rows[2] == ["Passkey", "mean", "256..4k", "50", "60.00", "53.75", "-6.25", "[-10.00,", "-2.50]", "0.004", "*"]
    assert rows[3][:2] == ["QMSum", "–"] and rows[3][-1] == "0.200"
    assert rows[4][:2] == ["Avg.", "–"] and rows[4][-1] == "0.070"
    assert lines[8] == "not compared (in one run only): Passkey 8k (only in pi), SQuALITY (SFD) (only in truncate)"
    assert "raw p-value (two runs compared" in text and "* = p < 0.05" in text
    assert lines[-1] == "runs: truncate = /runs/truncate; pi = /runs/pi"
    # the numbers are right-aligned: every row's p-value ends where the header's "p" does
    assert {len(line) - (3 if line.endswith(" *") else 0) for line in lines[3:8]} == {len(lines[1])} == {len(lines[2])}


def test_holm_comparisons_say_so_and_show_the_adjusted_p() -> None:
    comparison = two_run_comparison()
    comparison.correction, comparison.tests = HOLM, 5
    for d in comparison.differences():
        d.p_adjusted = min(1.0, d.p_value * 5)
    text = comparison_text(comparison)
    assert "Holm-adjusted over all 5 tests" in text
    assert text.splitlines()[6].split()[-1] == "1.000"  # qmsum: 0.2 x 5


def test_markdown_lists_runs_pairs_and_the_plot() -> None:
    markdown = comparison_markdown(two_run_comparison(), "comparison.png")
    assert markdown.startswith("# Paired comparison")
    assert "| truncate | /runs/truncate |" in markdown and "## pi (B) vs truncate (A)" in markdown
    assert "| Passkey | 4k | 50 | 60.00 | 47.50 | -12.50 | [-20.00, -5.25] | 2.0e-05 | * |" in markdown
    assert "Not compared (in one run only): Passkey 8k (only in pi)" in markdown
    assert markdown.rstrip().endswith("![differences with their intervals](comparison.png)")


def three_run_comparison() -> Comparison:
    """truncate, pi, rp: all three pairs, each with one task over two lengths and its average."""
    def pair(a: str, b: str, estimate: float, p: float) -> PairComparison:
        return PairComparison(a, b, [
            difference(UNIT, "passkey", 1024, estimate, estimate - 4, estimate + 4, p, p < 0.05),
            difference(UNIT, "passkey", 4096, estimate, estimate - 4, estimate + 4, p, p < 0.05),
            difference(TASK, "passkey", None, estimate, estimate - 3, estimate + 3, p, p < 0.05, lengths=[1024, 4096]),
        ])
    pairs = [pair("truncate", "pi", 20.08, 0.001), pair("truncate", "rp", 18.25, 0.002), pair("pi", "rp", -1.83, 0.97)]
    for p in pairs:
        for d in p.differences:
            d.p_adjusted = d.p_value
    runs = [ComparedRun(label, f"/runs/{label}") for label in ("truncate", "pi", "rp")]
    return Comparison(runs=runs, pairs=pairs, correction=HOLM, tests=9)


def test_many_runs_get_one_grid_of_every_pairs_overall_verdict() -> None:
    """Rows are B, columns A, in the runs' order; a pair's cell is its widest test (here the task over its
    lengths) with interval, p and mark; the pair that does not exist (pi against itself) stays empty."""
    comparison = three_run_comparison()
    columns, rows = overall_table(comparison)
    assert columns == ["B - A on Passkey mean 1k..4k, 95% interval, p", "A = truncate", "A = pi"]
    assert rows == [["pi", "+20.1 [+17.1, +23.1] p 0.001 *", ""],
                    ["rp", "+18.2 [+15.2, +21.2] p 0.002 *", "-1.8 [-4.8, +1.2] p 0.970"]]
    markdown = comparison_markdown(comparison, None)
    assert markdown.index("## Overall") < markdown.index("## pi (B) vs truncate (A)")
    assert "| rp | +18.2 [+15.2, +21.2] p 0.002 * | -1.8 [-4.8, +1.2] p 0.970 |" in markdown
    text = comparison_text(comparison)
    grid = text[text.index("Overall\n"):].splitlines()
    assert grid[4].split() == ["rp", "+18.2", "[+15.2,", "+21.2]", "p", "0.002", "*", "-1.8", "[-4.8,", "+1.2]", "p", "0.970"]
    # the average is named as such; one pair needs no grid: its table ends with the same row
    average = two_run_comparison()
    assert overall_table(average) is None and "Overall" not in comparison_text(average)
    average.pairs = average.pairs * 2
    assert overall_table(average)[0][0] == "B - A on the average over tasks, 95% interval, p"


def test_run_folders_under_the_current_directory_are_shown_relative_to_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written from a repository's root, the tables name runs by their place in it; a folder elsewhere
    keeps its recorded path (the JSON always keeps the recorded, absolute path)."""
    inside = tmp_path / "docs" / "runs" / "truncate"
    comparison = two_run_comparison()
    comparison.runs[0] = ComparedRun("truncate", str(inside))
    monkeypatch.chdir(tmp_path)
    markdown = comparison_markdown(comparison, None)
    assert "| truncate | docs/runs/truncate |" in markdown and "| pi | /runs/pi |" in markdown
    assert comparison_text(comparison).endswith("runs: truncate = docs/runs/truncate; pi = /runs/pi")
    assert comparison.to_dict()["runs"][0]["path"] == str(inside)
    monkeypatch.chdir(tmp_path / "..")
    assert f"| truncate | {tmp_path.name}/docs/runs/truncate |" in comparison_markdown(comparison, None)


def test_forest_plot_draws_every_difference_with_its_interval_around_zero() -> None:
    pair = two_run_comparison().pairs[0]
    rows = forest_rows(pair)
    assert [r.label for r in rows] == ["Passkey 256", "Passkey 4k", "Passkey mean 256..4k", "QMSum", "Avg."]
    assert [(r.estimate, r.low, r.high, r.significant) for r in rows][1] == (-12.5, -20.0, -5.25, True)
    fig, ax = plt.subplots()
    draw_pair(ax, pair)
    bars = ax.containers
    assert len(bars) == 5
    top = bars[-1]  # drawn bottom-up: the last container is the first row, at the top
    segment = top.lines[2][0].get_segments()[0]
    assert [tuple(p) for p in segment] == [(0.0, 4.0), (0.0, 4.0)]  # passkey 256: [0, 0] at y = 4
    significant = bars[-2]  # passkey 4k
    assert [tuple(p) for p in significant.lines[2][0].get_segments()[0]] == [(-20.0, 3.0), (-5.25, 3.0)]
    assert to_rgba(significant.lines[0].get_color()) == to_rgba(SIGNIFICANT_COLOR)
    assert to_rgba(bars[0].lines[0].get_color()) != to_rgba(SIGNIFICANT_COLOR)  # the average: not significant
    assert any(list(line.get_xdata()) == [0.0, 0.0] for line in ax.get_lines())  # the zero line
    assert [t.get_text() for t in ax.texts] == ["*", "*"]
    plt.close(fig)


def test_write_comparison_writes_json_markdown_and_plot(tmp_path: Path) -> None:
    comparison = two_run_comparison()
    written = write_comparison(comparison, tmp_path / "out")
    assert {name: path.name for name, path in written.items()} == {
        "json": "comparison.json", "markdown": "comparison.md", "plot": "comparison.png"}
    assert Comparison.load(tmp_path / "out") == comparison
    assert written["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = plt.imread(written["plot"])
    assert image.shape[0] > 200 and image.shape[1] > 400
    assert "(comparison.png)" in written["markdown"].read_text(encoding="utf-8")


@pytest.mark.parametrize("pairs", [1, pytest.param(3, marks=pytest.mark.slow)])  # three panels: over a second
def test_the_plot_has_a_panel_per_pair(tmp_path: Path, pairs: int) -> None:
    comparison = two_run_comparison()
    comparison.pairs = comparison.pairs * pairs
    small = plt.imread(write_comparison(two_run_comparison(), tmp_path / "one")["plot"])
    image = plt.imread(write_comparison(comparison, tmp_path / "many")["plot"])
    assert (image.shape[0] > 2 * small.shape[0]) == (pairs == 3)
