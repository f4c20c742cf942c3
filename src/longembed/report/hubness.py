"""The report's section on first-ranked documents: how concentrated each run's top results are, and
which units have a hub (:mod:`longembed.results.hubness`)."""

from __future__ import annotations

from collections.abc import Sequence

from longembed.report.formatting import MISSING, length_title, md_table
from longembed.report.labels import Run
from longembed.results import HUB_RULE, FirstRanked, RunResults
from longembed.tasks import DEFAULT_TASKS

Unit = tuple[str, int | None]


def unit_title(task: str, length: int | None) -> str:
    """"passkey 2k", or the task's name for a real task."""
    return task if length is None else f"{task} {length_title(length)}"


def first_ranked_cell(stats: FirstRanked | None) -> str:
    """"48% · 23/200 **hub**": the share of queries whose first document is the most frequent one,
    then distinct documents ranked first / distinct documents asked for, the hub's twins if any, and
    "57 of 400 vectors" when documents share vectors; "–" without a summary."""
    if stats is None:
        return MISSING
    cell = f"{stats.top_share:.0%} · {stats.distinct}/{stats.distinct_relevant}"
    if stats.is_hub:
        cell += f" **hub**, {stats.top_twins} twins" if stats.top_twins else " **hub**"
    if stats.shared_vectors:
        cell += f" · {stats.distinct_vectors} of {stats.documents} vectors"
    return cell


def _stats(results: RunResults) -> dict[Unit, FirstRanked]:
    return {
        (name, length): unit.first_ranked_stats
        for name, task in results.tasks.items()
        for length, unit in task.units().items()
        if unit.first_ranked_stats is not None
    }


def _unit_order(unit: Unit) -> tuple[int, str, int]:
    """LongEmbed's task order (the default tasks first, then by name), each task's lengths ascending."""
    task, length = unit
    position = DEFAULT_TASKS.index(task) if task in DEFAULT_TASKS else len(DEFAULT_TASKS)
    return position, task, length or 0


def first_ranked_section(runs: Sequence[Run]) -> list[str]:
    """Markdown lines: a runs x units table of :func:`first_ranked_cell`, then each hub named; empty
    when no run kept first-ranked summaries (files written before longembed kept them)."""
    stats = {run.label: _stats(run.results) for run in runs}
    units = sorted({u for found in stats.values() for u in found}, key=_unit_order)
    if not units:
        return []
    rows = [[run.label, *(first_ranked_cell(stats[run.label].get(u)) for u in units)] for run in runs]
    lines = [
        "## First-ranked documents",
        "",
        "Each cell: the share of queries whose first-ranked document is the one most often ranked first, "
        "then how many distinct documents were ranked first / how many the queries ask for (perfect "
        f"retrieval: the two are equal). **hub**: {HUB_RULE}. A hub suggests the document vectors crowd "
        "together (length collapse, which `longembed collapse` measures directly); a low score alone "
        "does not tell that from vectors that are merely poor. *twins*: other documents that score the "
        "same as the hub for every query, i.e. have its vector (documents that read the same after "
        "truncation): such a hub is an artefact of identical inputs, not of collapse. *N of M vectors*: "
        "the unit's M documents have only N different vectors; the few that differ (a needle within "
        "the first 512 tokens, say) then draw the queries. Each hub's line below ends with the skewness "
        "of N1, how many queries rank each document first, over all the unit's documents (the hubness "
        "literature's measure, Radovanovic et al. 2010), beside what perfect retrieval would give.",
        "",
        md_table(["run", *(unit_title(*u) for u in units)], rows, numeric_from=1),
        "",
    ]
    hubs = [f"- {run.label}, {unit_title(*u)}: {s.describe()}"
            for run in runs for u, s in stats[run.label].items() if s.is_hub]
    return lines + ([*hubs, ""] if hubs else [])
