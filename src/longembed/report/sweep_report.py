"""A TempScale sweep as tables and a plot: ``sweep.md`` and ``sweep.png`` next to ``sweep.json``.

    >>> from longembed.report.sweep_report import write_sweep_report
    >>> write_sweep_report("runs/sweep-minilm")          # reads runs/sweep-minilm/sweep.json

The protocol itself (select on one task, score on the others) is ``longembed.evaluation.sweep_runner``.
"""

from __future__ import annotations

from pathlib import Path

from longembed.errors import UserError
from longembed.report.formatting import MISSING, fmt, md_table, signed
from longembed.report.plots import plt, save_figure
from longembed.results import SweepResults

SWEEP_MARKDOWN = "sweep.md"
SWEEP_PLOT = "sweep.png"


def tau_text(value: float) -> str:
    """1.0 -> "1.0", 0.85 -> "0.85" (shortest repr, always with a decimal point)."""
    return repr(float(value))


def sweep_tables(sweep: SweepResults) -> str:
    """The markdown tables of a sweep: selection scores, baseline vs chosen, and (if any) all candidates."""
    selection, scoring = sweep.selection, sweep.scoring
    rows = []
    for c in sweep.candidates:
        notes = [
            "**chosen**" if c.chosen else "",
            "baseline" if c.label == sweep.baseline["label"] else "",
            "tied" if c.label in selection.tied and len(selection.tied) > 1 else "",
            "added" if c.source != "given" else "",
        ]
        rows.append([
            c.label,
            tau_text(c.settings["query_temperature"]),
            tau_text(c.settings["document_temperature"]),
            tau_text(c.settings["temperature_decay"]),
            str(c.settings["temperature_reference"] or MISSING),
            fmt(c.selection_score, 2),
            ", ".join(n for n in notes if n),
        ])
    lines = [
        f"## Selection on {selection.task} ({selection.main_score})",
        "",
        md_table(["candidate", "query tau", "document tau", "decay", "reference", "score", "note"], rows,
                 numeric_from=1, numeric_to=6),
        "",
        f"Chosen: **{selection.chosen}** ({fmt(selection.chosen_score, 2)}; baseline "
        f"{fmt(selection.baseline_score, 2)}, gain {signed(selection.gain_over_baseline)} on the selection task).",
        "",
        f"## Baseline vs chosen on the scoring tasks (selection task {selection.task} excluded)",
        "",
    ]
    rows = [
        [name, e.main_score, fmt(e.baseline, 2), fmt(e.chosen, 2), signed(e.delta)]
        for name, e in scoring.per_task.items()
    ]
    avg = scoring.average
    rows.append(["**average**", "", fmt(avg.baseline, 2), fmt(avg.chosen, 2), signed(avg.delta)])
    lines.append(md_table(
        ["task", "metric", f"baseline ({sweep.baseline['label']})", f"chosen ({sweep.chosen['label']})", "delta"],
        rows,
        numeric_from=2,
    ))
    for name, message in scoring.skipped.items():
        lines.append(f"\nskipped {name}: {message}")
    full = sweep.all_candidates
    if full:
        lines += [
            "",
            "## All candidates on the scoring tasks (not used for selection)",
            "",
            f"_{full.note}._",
            "",
            md_table(
                ["candidate", "selection score", *full.tasks, "average"],
                [
                    [
                        r.label + (" (chosen)" if r.chosen else ""),
                        fmt(r.selection_score, 2),
                        *(fmt(r.scores.get(t), 2) for t in full.tasks),
                        fmt(r.average, 2),
                    ]
                    for r in full.rows
                ],
                numeric_from=1,
            ),
        ]
    return "\n".join(lines)


def sweep_markdown(sweep: SweepResults, plot: str | None = None) -> str:
    """sweep.md: a heading, the protocol, the tables and (if given) the plot."""
    config = sweep.config
    max_length = config["max_length"] if config["max_length"] is not None else "default"
    head = [
        f"# TempScale sweep: {config['model']} ({config['method']}, max_length {max_length})",
        "",
        f"Protocol: {sweep.protocol}.",
        "",
        f"Lengths (passkey/needle): {', '.join(map(str, config['lengths']))}.",
        "",
        sweep_tables(sweep),
    ]
    if plot:
        head += ["", f"![selection score vs tau]({plot})"]
    return "\n".join(head) + "\n"


def plot_selection(sweep: SweepResults, path: str | Path) -> Path:
    """PNG: selection score vs (document) tau, one line per series, the chosen candidate starred.

    Series: one tau for both sides; per query tau when the sides differ (x = document tau); one per
    (decay, reference) for length-aware candidates (x = the base tau). The baseline's score is a dashed
    horizontal line.
    """
    series: dict[str, list[tuple[float, float]]] = {}
    chosen_point: tuple[float, float] | None = None
    for c in sweep.candidates:
        s = c.settings
        q, d = s["query_temperature"], s["document_temperature"]
        name = "one tau for both sides" if q == d else f"query tau {tau_text(q)}, x = document tau"
        if s["temperature_decay"]:
            name += f", length decay {tau_text(s['temperature_decay'])} above {s['temperature_reference']} tokens"
        series.setdefault(name, []).append((d, c.selection_score))
        if c.chosen:
            chosen_point = (d, c.selection_score)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, points in series.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    if sweep.selection.baseline_score is not None:
        ax.axhline(sweep.selection.baseline_score, color="grey", linestyle="--", linewidth=1,
                   label="baseline (tau = 1)")
    if chosen_point is not None:
        ax.plot(*chosen_point, marker="*", markersize=16, color="crimson", linestyle="none",
                label=f"chosen: {sweep.selection.chosen}")
    ax.set_xlabel("tau (document side; for length decay: tau up to the reference length)")
    ax.set_ylabel(f"{sweep.selection.task} {sweep.selection.main_score} (%)")
    ax.set_title(f"TempScale selection on {sweep.selection.task}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    return save_figure(fig, path)


def write_sweep_report(sweep: SweepResults | str | Path, output_dir: str | Path | None = None) -> dict[str, Path]:
    """Write ``sweep.md`` and ``sweep.png`` (into the sweep's folder unless ``output_dir``).

    ``sweep`` is a :class:`SweepResults` (then ``output_dir`` is required) or a sweep folder /
    sweep.json.  Returns name -> file written.
    """
    if not isinstance(sweep, SweepResults):
        folder = Path(sweep) if Path(sweep).is_dir() else Path(sweep).parent
        sweep = SweepResults.load(sweep)
        output_dir = output_dir or folder
    if output_dir is None:
        raise UserError("write_sweep_report needs output_dir for a SweepResults object")
    out = Path(output_dir)
    plot = plot_selection(sweep, out / SWEEP_PLOT)
    markdown = out / SWEEP_MARKDOWN
    markdown.write_text(sweep_markdown(sweep, plot.name), encoding="utf-8")
    return {"markdown": markdown, "plot": plot}
