"""A paired comparison of runs (:class:`~longembed.results.Comparison`) as tables: the text
``longembed compare`` prints and the body of ``comparison.md``.

Per pair, one row per test: the task and length (a synthetic task's mean over its shared lengths, the
average over the shared tasks), the queries, each run's score, B - A with its 95% interval, the p-value
(Holm-adjusted when more than two runs were compared) and a mark for the significant ones; then the
units only one run had.  With more than one pair, one grid holds every pair's overall verdict.  No
matplotlib here: printing a comparison does not import it.
"""

from __future__ import annotations

from collections.abc import Sequence

from longembed.report.formatting import MISSING, fmt, length_title, md_table, shown_path, signed
from longembed.report.tables import task_title
from longembed.results import Comparison
from longembed.results.comparison import AVERAGE, HOLM, TASK, Difference, PairComparison

SIGNIFICANT = "*"


def header(comparison: Comparison) -> list[str]:
    """The columns of every pair's table."""
    return ["task", "length", "queries", "A", "B", "B - A", f"{comparison.confidence:.0%} interval", "p", ""]


def p_text(p: float) -> str:
    """A p-value with three decimals, or in scientific notation below 0.001 (never shown as 0)."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def difference_name(d: Difference) -> tuple[str, str]:
    """(task, length) as a row shows them: "Passkey", "4k"; a task over its lengths "mean 256..4k"; the
    average over the shared tasks "Avg."; "–" where there is no length (a real task, the average)."""
    if d.level == AVERAGE:
        return "Avg.", MISSING
    if d.level == TASK:
        return task_title(d.task), f"mean {length_title(min(d.lengths))}..{length_title(max(d.lengths))}"
    return task_title(d.task), MISSING if d.length is None else length_title(d.length)


def difference_cells(d: Difference) -> list[str]:
    """One row's cells, in :func:`header`'s order."""
    interval = f"[{signed(d.difference.low)}, {signed(d.difference.high)}]"
    return [*difference_name(d), str(d.queries), fmt(d.a, 2), fmt(d.b, 2), signed(d.difference.estimate),
            interval, p_text(d.p_reported), SIGNIFICANT if d.significant else ""]


def pair_title(pair: PairComparison) -> str:
    return f"{pair.b} (B) vs {pair.a} (A)"


def not_compared_text(pair: PairComparison) -> str | None:
    """"not compared (in one run only): passkey 8k (A), qmsum (B)", or None when the runs shared everything."""
    if not pair.not_compared:
        return None
    items = [f"{task_title(n.task)}{'' if n.length is None else ' ' + length_title(n.length)} (only in {n.only_in})"
             for n in pair.not_compared]
    return "not compared (in one run only): " + ", ".join(items)


def method_note(comparison: Comparison) -> str:
    """How the numbers were computed, and how the p-values are read."""
    reading = (f"p is Holm-adjusted over all {comparison.tests} tests of the comparison"
               if comparison.correction == HOLM else
               "p is the raw p-value (two runs compared: no multiple-comparison correction)")
    return (
        f"Scores in %, over the queries both runs share; B - A with its {comparison.confidence:.0%} paired "
        f"bootstrap interval ({comparison.resamples} resamples of the queries, seed {comparison.seed}; a task "
        "over its lengths resamples within each length); p from the paired sign-flip test (exact up to 16 "
        f"non-zero differences, else {comparison.resamples} seeded random flips); {reading}; "
        f"{SIGNIFICANT} = p < {comparison.alpha:g}."
    )


def overall_cell(d: Difference | None) -> str:
    """One pair's overall verdict in a cell: "+20.1 [+16.7, +23.5] p 0.013 *"; empty when nothing was shared."""
    if d is None:
        return ""
    mark = f" {SIGNIFICANT}" if d.significant else ""
    return (f"{signed(d.difference.estimate, 1)} [{signed(d.difference.low, 1)}, {signed(d.difference.high, 1)}] "
            f"p {p_text(d.p_reported)}{mark}")


def overall_title(comparison: Comparison) -> str:
    """What the overall table's cells measure: the average over tasks, or e.g. "Passkey 4k" when every
    pair's verdict is the same test, else a description."""
    verdicts = [d for pair in comparison.pairs if (d := pair.overall()) is not None]
    names = {difference_name(d) for d in verdicts}
    if verdicts and all(d.level == AVERAGE for d in verdicts):
        what = "the average over tasks"
    elif len(names) == 1:
        task, length = names.pop()
        what = task if length == MISSING else f"{task} {length}"
    else:
        what = "each pair's overall score (the average over shared tasks, else its one shared task)"
    return f"B - A on {what}, {comparison.confidence:.0%} interval, p"


def overall_table(comparison: Comparison) -> tuple[list[str], list[list[str]]] | None:
    """Every pair's overall verdict in one grid (rows: B, columns: A; with all pairs compared, a lower
    triangle), so a comparison of many runs reads at a glance; None for a single pair, whose table
    already ends with it."""
    if len(comparison.pairs) < 2:
        return None
    order = {run.label: i for i, run in enumerate(comparison.runs)}
    columns = sorted({pair.a for pair in comparison.pairs}, key=order.__getitem__)
    rows = sorted({pair.b for pair in comparison.pairs}, key=order.__getitem__)
    verdict = {(pair.b, pair.a): pair.overall() for pair in comparison.pairs}
    cells = [[b, *(overall_cell(verdict[(b, a)]) if (b, a) in verdict else "" for a in columns)] for b in rows]
    return [overall_title(comparison), *(f"A = {a}" for a in columns)], cells


def comparison_text(comparison: Comparison) -> str:
    """The plain-text tables ``longembed compare`` prints: one per pair, the Overall grid (more than one
    pair), then the method note and which folder each label stands for."""
    blocks = []
    for pair in comparison.pairs:
        lines = [pair_title(pair), _aligned(header(comparison), [difference_cells(d) for d in pair.differences])]
        note = not_compared_text(pair)
        if note is not None:
            lines.append(note)
        blocks.append("\n".join(lines))
    overall = overall_table(comparison)
    if overall is not None:
        blocks.append("Overall\n" + _aligned(*overall, left=1))
    runs = "runs: " + "; ".join(r.label if r.path is None else f"{r.label} = {shown_path(r.path)}" for r in comparison.runs)
    return "\n\n".join([*blocks, method_note(comparison), runs])


def _aligned(columns: Sequence[str], rows: Sequence[Sequence[str]], left: int = 2) -> str:
    """Columns padded to their widest cell: the first ``left`` (text) left-aligned, the numbers after
    them right-aligned."""
    widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    top = line(columns).rstrip()
    return "\n".join([top, "-" * len(top), *(line(r).rstrip() for r in rows)])


def comparison_markdown(comparison: Comparison, plot: str | None = None) -> str:
    """The whole ``comparison.md``: the runs, the method, a table per pair, the plot."""
    lines = ["# Paired comparison", "", method_note(comparison), ""]
    lines += [md_table(["run", "folder"], [[r.label, shown_path(r.path)] for r in comparison.runs], numeric_from=2), ""]
    if comparison.baseline is not None:
        lines += [f"Each run against the baseline, {comparison.baseline}.", ""]
    overall = overall_table(comparison)
    if overall is not None:
        lines += ["## Overall", "", md_table(*overall, numeric_from=1), ""]
    for pair in comparison.pairs:
        lines += [f"## {pair_title(pair)}", ""]
        lines += [md_table(header(comparison), [difference_cells(d) for d in pair.differences], numeric_from=2, numeric_to=8), ""]
        note = not_compared_text(pair)
        if note is not None:
            lines += [note[0].upper() + note[1:] + ".", ""]
    if plot is not None:
        lines += ["## Plot", "", f"![differences with their intervals]({plot})", ""]
    return "\n".join(lines)
