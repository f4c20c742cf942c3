"""``write_advice``: an advice's three files, ``advice.json``, ``advice.md`` and ``advice.png`` (the
score-versus-cost plot)."""

from __future__ import annotations

from pathlib import Path

from longembed.advice.markdown import advice_markdown
from longembed.advice.plot import plot_advice
from longembed.results import ADVICE_FILE, Advice
from longembed.results.files import atomic_write_text

ADVICE_MARKDOWN = "advice.md"
ADVICE_PLOT = "advice.png"


def write_advice(advice: Advice, output_dir: str | Path) -> dict[str, Path]:
    """Write the advice's plot, markdown and JSON into ``output_dir``; returns name -> file."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot = plot_advice(advice, out / ADVICE_PLOT)
    markdown = out / ADVICE_MARKDOWN
    atomic_write_text(markdown, advice_markdown(advice, plot.name))
    data = advice.save(out / ADVICE_FILE)
    return {"markdown": markdown, "plot": plot, "json": data}
