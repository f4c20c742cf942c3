"""Text and markdown tables of benchmark results (:class:`~longembed.results.RunResults`).

:func:`results_summary` is the table the ``eval`` command prints at the end of a run;
:func:`markdown_report` is the body of ``report.md``: one row per run with each task's score and the
average, then passkey/needle accuracy by length (runs x lengths), like LongEmbed's Tables 2/3 and
Figure 1b.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from longembed.report.formatting import MISSING, fmt, length_title, md_table
from longembed.results import RunResults
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS, task_metadata

#: Encoder settings that a run's label shows when they differ from these defaults.
LABELLED_SETTINGS = (("scale", "fixed"), ("apply_to", "long"), ("attention_scale", None),
                     ("ntk_variant", "static"), ("preset", None))


@dataclass
class Run:
    """One run's results and where they came from."""

    path: Path
    results: RunResults
    label: str = ""


def model_name(results: RunResults) -> str:
    """A short model name: "BM25", the packaged model's name, or a model folder's last part."""
    model = str(results.config.encoder.get("model", "?"))
    if model == "bm25":
        return "BM25"
    if model == "default":
        return results.model_name or "default"
    return Path(model.rstrip("/")).name or model


def run_settings(results: RunResults) -> tuple[str, str]:
    """(method, max_length) as shown in tables; "–" for BM25."""
    config = results.config
    if config.is_bm25:
        return MISSING, MISSING
    method = config.resolved.get("method") or config.encoder.get("method") or "?"
    max_length = config.resolved.get("max_length") or config.encoder.get("max_length")
    return str(method), str(max_length) if max_length is not None else MISSING


def run_label(results: RunResults) -> str:
    """"model method max_length", plus the settings that differ from the defaults (tau, scale, ...)."""
    config = results.config
    name = model_name(results)
    if config.is_bm25:
        return name
    method, max_length = run_settings(results)
    parts = [name, method, max_length]
    temperatures = config.temperatures or {}
    taus = sorted({float(v) for v in temperatures.values()})
    if taus and taus != [1.0]:
        if len(taus) == 1:
            parts.append(f"tau={taus[0]:g}")
        else:
            parts.append(f"tau q={temperatures['query']:g} d={temperatures['document']:g}")
    for key, default in LABELLED_SETTINGS:
        if config.encoder.get(key, default) != default:
            parts.append(f"{key}={config.encoder[key]}")
    granularity = config.granularity or {}
    if granularity.get("level", "document") != "document":
        style = "late" if granularity.get("late", True) else "naive"
        parts.append(f"{style} chunks {granularity.get('chunking', '')}".rstrip())
    return " ".join(parts)


def unique_labels(runs: Sequence[Run]) -> None:
    """Give every run a distinct label: its settings, plus its folder name where two would clash."""
    labels = [run_label(r.results) for r in runs]
    for run, label in zip(runs, labels, strict=True):
        run.label = label if labels.count(label) == 1 else f"{label} [{run.path.name}]"


def task_title(task: str) -> str:
    """A task's column header, as the task declares it (LongEmbed's short names, the offline stand-ins
    marked); its name for a task without a title or one no module registers (an old results file)."""
    metadata = task_metadata(task)
    if metadata is None or metadata.title is None:
        return task
    return metadata.title


def by_length_tasks(tasks: Sequence[str]) -> list[str]:
    """The tasks among ``tasks`` that are generated per length (synthetic, as the task declares):
    those get accuracy-by-length tables and plots."""
    return [t for t in tasks if (metadata := task_metadata(t)) is not None and metadata.synthetic]


def task_columns(runs: Sequence[Run]) -> list[str]:
    """Tasks that ran in at least one run, in LongEmbed's order (the default tasks first)."""
    present = {name for r in runs for name in r.results.tasks}
    ordered = [t for t in DEFAULT_TASKS if t in present]
    return ordered + sorted(present - set(ordered))


def length_columns(runs: Sequence[Run], task: str) -> list[int]:
    """Lengths of ``task`` evaluated in at least one run, ascending."""
    found = {n for r in runs if task in r.results.tasks for n in (r.results.tasks[task].by_length or {})}
    return sorted(found, key=lambda n: (n not in SYNTHETIC_LENGTHS, n))


def scores_table(runs: Sequence[Run]) -> str:
    """Markdown: one row per run, its model, method, max_length, each task's score and the average."""
    tasks = task_columns(runs)
    header = ["run", "model", "method", "max_length", *(task_title(t) for t in tasks), "Avg."]
    rows = []
    for run in runs:
        results = run.results
        method, max_length = run_settings(results)
        scores = [fmt(results.tasks[t].score if t in results.tasks else None) for t in tasks]
        average = fmt(results.average)
        if _partial_average(results, tasks):
            average += "*"
        rows.append([run.label, model_name(results), method, max_length, *scores, average])
    return md_table(header, rows, numeric_from=4)


def _partial_average(results: RunResults, tasks: Sequence[str]) -> bool:
    """Whether the run's average covers fewer tasks than the table shows."""
    return results.average is not None and set(results.average_tasks) != set(tasks)


def by_length_table(runs: Sequence[Run], task: str) -> str | None:
    """Markdown: runs x lengths of ``task`` (accuracy@1, %) and the mean; None if no run has it.

    When the runs evaluated different lengths, each run's own mean is not comparable across rows, so a
    second mean over the lengths every row evaluated is added (if there are any).
    """
    lengths = length_columns(runs, task)
    if not lengths:
        return None
    entries = [(run, run.results.tasks[task]) for run in runs if task in run.results.tasks]
    length_sets = [set(entry.by_length or {}) for _, entry in entries]
    shared = sorted(set.intersection(*length_sets)) if length_sets else []
    add_shared = bool(shared) and any(s != length_sets[0] for s in length_sets)
    header = ["run", *(length_title(n) for n in lengths), "mean"]
    if add_shared:
        header.append(f"mean {length_title(shared[0])}..{length_title(shared[-1])}" if len(shared) > 1
                      else f"mean {length_title(shared[0])}")
    rows = []
    for run, entry in entries:
        by_length = entry.by_length or {}
        row = [run.label, *(fmt(by_length.get(n)) for n in lengths), fmt(entry.score)]
        if add_shared:
            row.append(fmt(sum(by_length[n] for n in shared) / len(shared)))
        rows.append(row)
    return md_table(header, rows, numeric_from=1)


def markdown_report(runs: Sequence[Run], plots: Sequence[tuple[str, str]] = ()) -> str:
    """The whole ``report.md``: scores, by-length tables, skipped tasks, notes and the plot links."""
    if not runs:
        raise ValueError("no runs to report")
    lines = ["# LongEmbed results", ""]
    lines += [
        "Scores in %: accuracy@1 for passkey and needle (mean over the evaluated lengths), nDCG@10 for the "
        "real tasks; Avg. = unweighted mean of the tasks the run evaluated. SQuALITY and HotpotQA are "
        "offline stand-ins for SummScreenFD and 2WikiMultihopQA (not the same data).",
        "",
        scores_table(runs),
        "",
    ]
    if any(_partial_average(r.results, task_columns(runs)) for r in runs):
        lines += ["\\* the average covers only the tasks this run evaluated (see its results.json).", ""]
    for task in by_length_tasks(task_columns(runs)):
        table = by_length_table(runs, task)
        if table is not None:
            lines += [f"## {task_title(task)}: accuracy@1 (%) by length (tokens)", "", table, ""]
    notes = []
    for run in runs:
        results = run.results
        if not results.complete:
            notes.append(f"- {run.label}: **incomplete run** (killed or still running)")
        for task, message in results.skipped.items():
            notes.append(f"- {run.label}: {task} skipped: {message}")
        if results.average_note:
            notes.append(f"- {run.label}: average = {results.average_note}")
    if notes:
        lines += ["## Notes", "", *notes, ""]
    lines += ["## Runs", "", md_table(["run", "folder", "wall time (s)", "created"], [
        [r.label, str(r.path), fmt(r.results.wall_time_s, 0), r.results.created] for r in runs
    ], numeric_from=2), ""]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{title}]({path})" for title, path in plots]
        lines.append("")
    return "\n".join(lines)


def results_summary(results: RunResults) -> str:
    """Plain-text table of one run, printed by ``longembed eval`` at the end."""
    header = f"{'task':<14}{'metric':<12}{'score':>8}{'docs':>7}{'queries':>9}{'trunc.':>8}{'encoded':>9}{'time s':>9}"
    lines = [f"results: {run_label(results)}", header, "-" * len(header)]
    for name, task in results.tasks.items():
        counts = task.counts
        encoded = MISSING if task.cache is None else task.cache.encoded
        truncated = MISSING if counts.documents_truncated is None else counts.documents_truncated
        lines.append(
            f"{name:<14}{task.main_score:<12}{task.score:>8.2f}{counts.documents:>7}"
            f"{counts.queries:>9}{truncated!s:>8}{encoded!s:>9}{task.wall_time_s:>9.1f}"
        )
        if task.by_length is not None:
            lengths = "  ".join(f"{length_title(n)}: {v:.1f}" for n, v in task.by_length.items())
            lines.append(f"{'':<14}{lengths}")
    lines.append("-" * len(header))
    lines.append(f"{'average':<26}{fmt(results.average, 2):>8}   {results.average_note}")
    for name, message in results.skipped.items():
        lines.append(f"skipped {name}: {message}")
    return "\n".join(lines)
