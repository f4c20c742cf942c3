"""``write_comparison``: a paired comparison's three files, ``comparison.json``, ``comparison.md`` and
``comparison.png`` (the forest plot).

    >>> from longembed.results import compare
    >>> from longembed.report.comparison import write_comparison
    >>> write_comparison(compare(["runs/minilm-truncate", "runs/minilm-pi-4k"]), "comparisons/pi")
"""

from __future__ import annotations

from pathlib import Path

from longembed.report.comparison_tables import comparison_markdown
from longembed.report.forest_plot import plot_comparison
from longembed.results import COMPARISON_FILE, Comparison
from longembed.results.files import atomic_write_text

COMPARISON_MARKDOWN = "comparison.md"
COMPARISON_PLOT = "comparison.png"


def write_comparison(comparison: Comparison, output_dir: str | Path) -> dict[str, Path]:
    """Write the comparison's JSON, markdown and forest plot into ``output_dir``; returns name -> file."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = comparison.save(out / COMPARISON_FILE)
    plot = plot_comparison(comparison, out / COMPARISON_PLOT)
    markdown = out / COMPARISON_MARKDOWN
    atomic_write_text(markdown, comparison_markdown(comparison, plot.name))
    return {"json": data, "markdown": markdown, "plot": plot}
