"""Text and markdown tables of benchmark results (:class:`~longembed.results.RunResults`).

:func:`results_summary` is the table the ``eval`` command prints at the end of a run;
:func:`markdown_report` is the body of ``report.md``: one row per run with each task's score and the
average, then passkey/needle accuracy by length (runs x lengths), like LongEmbed's Tables 2/3 and
Figure 1b.  Every score is shown with its 95% interval (``58.0 [48, 68]``) when its run kept per-query
scores, as a plain number otherwise (files written before); the means a report computes itself get
theirs from :mod:`longembed.report.means`.
"""

from __future__ import annotations

from collections.abc import Sequence

from longembed.errors import UserError
from longembed.report.formatting import (
    MISSING,
    fmt,
    fmt_bounds,
    fmt_interval,
    interval_method,
    length_title,
    md_table,
)
from longembed.report.hubness import first_ranked_section
from longembed.report.labels import Run, model_name, run_label, run_settings
from longembed.report.means import length_parts, partial_mean, task_parts
from longembed.results import Interval, RunResults, TaskResult, hub_line
from longembed.results.run_results import PASSAGE_HIT, SECONDARY_METRICS
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS, task_metadata

#: The scores table's column of the average over the tasks and lengths every run evaluated.
SHARED_AVERAGE = "Avg. (shared)"


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


def length_interval(task: TaskResult, length: int) -> Interval | None:
    """The interval of ``task``'s score at ``length`` (None in a file that kept none)."""
    unit = (task.lengths or {}).get(length)
    return None if unit is None else unit.interval


def scores_table(runs: Sequence[Run]) -> str:
    """Markdown: one row per run, its model, method, max_length, each task's score and the average,
    each with its 95% interval when the run kept one; plus the average over what every run evaluated,
    when the runs' averages cover different tasks or lengths (:func:`shared_coverage`)."""
    tasks = task_columns(runs)
    shared = shared_coverage(runs)
    header = ["run", "model", "method", "max_length", *(task_title(t) for t in tasks), "Avg."]
    if shared is not None:
        header.append(SHARED_AVERAGE)
    rows = []
    for run in runs:
        results = run.results
        method, max_length = run_settings(results)
        scores = [fmt_interval(*_task_score(results, t)) for t in tasks]
        average = fmt_interval(results.average, results.average_interval)
        if _partial_average(results, tasks):
            average += "*"
        row = [run.label, model_name(results), method, max_length, *scores, average]
        if shared is not None:
            mean = partial_mean(task_parts({t: results.tasks[t] for t in shared[0]}, shared[1]))
            row.append(fmt_interval(mean.value, mean.interval))
        rows.append(row)
    return md_table(header, rows, numeric_from=4)


def _task_score(results: RunResults, task: str) -> tuple[float | None, Interval | None]:
    entry = results.tasks.get(task)
    return (None, None) if entry is None else (entry.score, entry.interval)


def shared_coverage(runs: Sequence[Run]) -> tuple[list[str], dict[str, list[int]]] | None:
    """(the tasks every run evaluated, each synthetic one's lengths every run evaluated), when the runs
    cover different tasks or lengths (so their own averages are not comparable) and share some; else
    None."""
    if len(runs) < 2:
        return None
    tasks = [t for t in task_columns(runs) if all(t in r.results.tasks for r in runs)]
    lengths: dict[str, list[int]] = {}
    for task in list(tasks):
        length_sets = [set(r.results.tasks[task].by_length or {}) for r in runs]
        if any(r.results.tasks[task].by_length is not None for r in runs):
            lengths[task] = sorted(set.intersection(*length_sets))
            if not lengths[task]:
                tasks.remove(task)
                del lengths[task]
    same = all(set(r.results.tasks) == set(tasks) for r in runs) and all(
        sorted(r.results.tasks[t].by_length or {}) == n for r in runs for t, n in lengths.items()
    )
    return None if same or not tasks else (tasks, lengths)


def shared_average_note(runs: Sequence[Run]) -> str | None:
    """What the shared average covers, in words; None when the table has no such column."""
    shared = shared_coverage(runs)
    if shared is None:
        return None
    tasks, lengths = shared
    at = "; ".join(f"{task_title(t)}: {', '.join(length_title(n) for n in ns)}" for t, ns in lengths.items())
    return (f"{SHARED_AVERAGE} = unweighted mean over the tasks every run evaluated "
            f"({', '.join(task_title(t) for t in tasks)})"
            + (f", passkey/needle over the lengths every run evaluated ({at})" if at else "")
            + ", so every row averages the same tasks and lengths.")


def _partial_average(results: RunResults, tasks: Sequence[str]) -> bool:
    """Whether the run's average covers fewer tasks than the table shows."""
    return results.average is not None and set(results.average_tasks) != set(tasks)


def by_length_table(runs: Sequence[Run], task: str) -> str | None:
    """Markdown: runs x lengths of ``task`` (accuracy@1, %) and the mean, each with its 95% interval
    when the run kept one; None if no run has the task.

    When the runs evaluated different lengths, each run's own mean is not comparable across rows, so a
    second mean over the lengths every row evaluated is added (if there are any), with its interval
    (:func:`~longembed.report.means.partial_mean`).
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
        cells = [fmt_interval(by_length.get(n), length_interval(entry, n)) for n in lengths]
        row = [run.label, *cells, fmt_interval(entry.score, entry.interval)]
        if add_shared:
            mean = partial_mean(length_parts(entry, shared))
            row.append(fmt_interval(mean.value, mean.interval))
        rows.append(row)
    return md_table(header, rows, numeric_from=1)


def first_interval(runs: Sequence[RunResults]) -> Interval | None:
    """An interval of one of the runs (each says how it was computed), None if no run kept any."""
    for results in runs:
        for task in results.tasks.values():
            found = task.interval or next((u.interval for u in (task.lengths or {}).values() if u.interval), None)
            if found is not None:
                return found
    return None


def interval_note(runs: Sequence[Run]) -> list[str]:
    """The report's paragraph on intervals: the cell format, the method, what it leaves out, and the
    runs that have none."""
    example = first_interval([r.results for r in runs])
    without = [r.label for r in runs if r.results.tasks and not r.results.has_per_query]
    if example is None:
        return ["No run here kept per-query scores (results.json written before longembed kept them), so "
                "the scores have no confidence intervals.", ""]
    lines = [
        "Each score is followed by its confidence interval, `score [low, high]` "
        f"({interval_method(example)}): the queries of each task, or of each length of a synthetic task, "
        "are resampled with replacement; a mean over lengths or tasks (a task's mean, Avg., the shared "
        "means) resamples within each task and length, weighted as the mean weighs them. The interval "
        "covers which queries were drawn, not the choice of generated data or its seed, nor model or "
        "hardware nondeterminism.",
        "",
    ]
    if without:
        lines += [f"No intervals (no per-query scores in results.json, written before longembed kept them) "
                  f"for: {', '.join(without)}.", ""]
    return lines


def markdown_report(runs: Sequence[Run], plots: Sequence[tuple[str, str]] = ()) -> str:
    """The whole ``report.md``: scores, by-length tables, skipped tasks, notes and the plot links."""
    if not runs:
        raise UserError("no runs to report")
    lines = ["# LongEmbed results", ""]
    lines += [
        "Scores in %: accuracy@1 for passkey and needle (mean over the evaluated lengths), nDCG@10 for the "
        "real tasks; Avg. = unweighted mean of the tasks the run evaluated. SQuALITY and HotpotQA are "
        "offline stand-ins for SummScreenFD and 2WikiMultihopQA (not the same data).",
        "",
        *interval_note(runs),
        scores_table(runs),
        "",
    ]
    if any(_partial_average(r.results, task_columns(runs)) for r in runs):
        lines += ["\\* the average covers only the tasks this run evaluated (see its results.json).", ""]
    if (shared := shared_average_note(runs)) is not None:
        lines += [shared, ""]
    for task in by_length_tasks(task_columns(runs)):
        table = by_length_table(runs, task)
        if table is not None:
            lines += [f"## {task_title(task)}: accuracy@1 (%) by length (tokens)", "", table, ""]
    lines += first_ranked_section(runs)
    notes = run_notes(runs)
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


def run_notes(runs: Sequence[Run]) -> list[str]:
    """One markdown item per thing to know about a run: incomplete, a task skipped, what its average covers."""
    notes = []
    for run in runs:
        results = run.results
        if not results.complete:
            notes.append(f"- {run.label}: **incomplete run** (killed or still running)")
        for task, message in results.skipped.items():
            notes.append(f"- {run.label}: {task} skipped: {message}")
        if results.average_note:
            notes.append(f"- {run.label}: average = {results.average_note}")
    return notes


def secondary_line(task: TaskResult) -> str:
    """A retrieval task's other metrics (:data:`~longembed.results.run_results.SECONDARY_METRICS`, and passage
    hit@1 where the task locates its answers) with their 95% intervals, ``"accuracy@1: 62.5 [50, 75]
    recall@10: 87.5 [75, 100]"``; "" for a synthetic task (its main score already is accuracy@1) or a
    metric the run did not record."""
    names = [m for m in (*SECONDARY_METRICS, PASSAGE_HIT) if m != task.main_score and m in task.metrics]
    intervals = task.secondary_intervals or {}
    return "  ".join(f"{m}: {fmt_interval(task.metrics[m], intervals.get(m))}" for m in names)


def results_summary(results: RunResults) -> str:
    """Plain-text table of one run, printed by ``longembed eval`` at the end: each task's score, each
    length's and the average, with their 95% intervals when the run kept per-query scores, and a line
    saying how the intervals were computed."""
    example = first_interval([results])
    ci = "" if example is None else f"{'95% interval':>16}"
    header = f"{'task':<14}{'metric':<12}{'score':>8}{ci}{'docs':>7}{'queries':>9}{'trunc.':>8}{'encoded':>9}{'time s':>9}"
    lines = [f"results: {run_label(results)}", header, "-" * len(header)]
    for name, task in results.tasks.items():
        counts = task.counts
        encoded = MISSING if task.cache is None else task.cache.encoded
        truncated = MISSING if counts.documents_truncated is None else counts.documents_truncated
        bounds = "" if example is None else f"{fmt_bounds(task.interval, 1):>16}"
        lines.append(
            f"{name:<14}{task.main_score:<12}{task.score:>8.2f}{bounds}{counts.documents:>7}"
            f"{counts.queries:>9}{truncated!s:>8}{encoded!s:>9}{task.wall_time_s:>9.1f}"
        )
        if task.by_length is not None:
            lengths = "  ".join(f"{length_title(n)}: {fmt_interval(v, length_interval(task, n))}"
                                for n, v in task.by_length.items())
            lines.append(f"{'':<14}{lengths}")
        elif secondary := secondary_line(task):
            lines.append(f"{'':<14}{secondary}")
    lines.append("-" * len(header))
    bounds = "" if example is None else f"{fmt_bounds(results.average_interval, 1):>16}"
    lines.append(f"{'average':<26}{fmt(results.average, 2):>8}{bounds}   {results.average_note}")
    if example is None and results.tasks:
        lines.append("no confidence intervals: this run kept no per-query scores")
    elif example is not None:
        lines.append(f"[low, high]: {interval_method(example)}; a task over several lengths, and the average, "
                     "resampled within each task and length")
    for (name, length), stats in results.hubs().items():
        lines.append(hub_line(name, length, stats))
    for name, message in results.skipped.items():
        lines.append(f"skipped {name}: {message}")
    return "\n".join(lines)
