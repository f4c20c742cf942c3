"""Text and markdown tables of benchmark results (``results.json`` dicts, see ``evaluation.runner``).

:func:`results_summary` is the table the ``eval`` command prints at the end of a run;
:func:`markdown_report` is the body of ``report.md``: one row per run with each task's score and the
average, then passkey/needle accuracy by length (runs x lengths), like LongEmbed's Tables 2/3 and
Figure 1b.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS

#: Column headers, LongEmbed's names with the offline stand-ins marked.
TASK_TITLES: dict[str, str] = {
    "passkey": "Passkey",
    "needle": "Needle",
    "narrativeqa": "NQA",
    "qmsum": "QMSum",
    "summscreenfd": "SFD",
    "squality": "SQuALITY (SFD)",
    "2wikimqa": "WQA",
    "hotpotqa": "HotpotQA (WQA)",
}
SYNTHETIC_TASKS = ("passkey", "needle")
MISSING = "–"


@dataclass
class Run:
    """One run's results and where they came from."""

    path: Path
    results: dict[str, Any]
    label: str = ""


def model_name(results: dict[str, Any]) -> str:
    """A short model name: "BM25", the packaged model's name, or a model folder's last part."""
    encoder = results.get("config", {}).get("encoder", {})
    model = str(encoder.get("model", "?"))
    if model == "bm25":
        return "BM25"
    if model == "default":
        return str(results.get("versions", {}).get("model", {}).get("name") or "default")
    return Path(model.rstrip("/")).name or model


def run_settings(results: dict[str, Any]) -> tuple[str, str]:
    """(method, max_length) as shown in tables; "–" for BM25."""
    encoder = results.get("config", {}).get("encoder", {})
    if encoder.get("model") == "bm25":
        return MISSING, MISSING
    resolved = results.get("config", {}).get("resolved", {})
    method = resolved.get("method") or encoder.get("method") or "?"
    max_length = resolved.get("max_length") or encoder.get("max_length")
    return str(method), str(max_length) if max_length is not None else MISSING


def run_label(results: dict[str, Any]) -> str:
    """"model method max_length", plus the settings that differ from the defaults (tau, scale, ...)."""
    encoder = results.get("config", {}).get("encoder", {})
    name = model_name(results)
    if encoder.get("model") == "bm25":
        return name
    method, max_length = run_settings(results)
    parts = [name, method, max_length]
    temperatures = results.get("config", {}).get("temperatures") or {}
    taus = sorted({float(v) for v in temperatures.values()})
    if taus and taus != [1.0]:
        if len(taus) == 1:
            parts.append(f"tau={taus[0]:g}")
        else:
            parts.append(f"tau q={temperatures['query']:g} d={temperatures['document']:g}")
    for key, default in (("scale", "fixed"), ("apply_to", "long"), ("attention_scale", None)):
        if encoder.get(key, default) != default:
            parts.append(f"{key}={encoder[key]}")
    return " ".join(parts)


def unique_labels(runs: Sequence[Run]) -> None:
    """Give every run a distinct label: its settings, plus its folder name where two would clash."""
    labels = [run_label(r.results) for r in runs]
    for run, label in zip(runs, labels, strict=True):
        run.label = label if labels.count(label) == 1 else f"{label} [{run.path.name}]"


def task_columns(runs: Sequence[Run]) -> list[str]:
    """Tasks that ran in at least one run, in LongEmbed's order (the default tasks first)."""
    present = {name for r in runs for name in r.results.get("tasks", {})}
    ordered = [t for t in DEFAULT_TASKS if t in present]
    return ordered + sorted(present - set(ordered))


def length_columns(runs: Sequence[Run], task: str) -> list[int]:
    """Lengths of ``task`` evaluated in at least one run, ascending."""
    found = {int(n) for r in runs for n in r.results.get("tasks", {}).get(task, {}).get("by_length", {})}
    return sorted(found, key=lambda n: (n not in SYNTHETIC_LENGTHS, n))


def _fmt(value: Any, digits: int = 1) -> str:
    return MISSING if value is None else f"{float(value):.{digits}f}"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align_right_from: int) -> str:
    rule = ["---" if i < align_right_from else "---:" for i in range(len(header))]
    return "\n".join([_md_row(header), "| " + " | ".join(rule) + " |", *(_md_row(r) for r in rows)])


def scores_table(runs: Sequence[Run]) -> str:
    """Markdown: one row per run, its model, method, max_length, each task's score and the average."""
    tasks = task_columns(runs)
    header = ["run", "model", "method", "max_length", *(TASK_TITLES.get(t, t) for t in tasks), "Avg."]
    rows = []
    for run in runs:
        results = run.results
        method, max_length = run_settings(results)
        scores = [_fmt(results.get("tasks", {}).get(t, {}).get("score")) for t in tasks]
        average = _fmt(results.get("average"))
        if results.get("average") is not None and set(results.get("average_tasks", [])) != set(tasks):
            average += "*"
        rows.append([run.label, model_name(results), method, max_length, *scores, average])
    return _md_table(header, rows, align_right_from=4)


def by_length_table(runs: Sequence[Run], task: str) -> str | None:
    """Markdown: runs x lengths of ``task`` (accuracy@1, %) and the mean; None if no run has it.

    When the runs evaluated different lengths, each run's own mean is not comparable across rows, so a
    second mean over the lengths every row evaluated is added (if there are any).
    """
    lengths = length_columns(runs, task)
    if not lengths:
        return None
    entries = [(run, run.results["tasks"][task]) for run in runs if task in run.results.get("tasks", {})]
    length_sets = [{int(n) for n in entry.get("by_length", {})} for _, entry in entries]
    shared = sorted(set.intersection(*length_sets)) if length_sets else []
    add_shared = bool(shared) and any(s != length_sets[0] for s in length_sets)
    header = ["run", *(_length_title(n) for n in lengths), "mean"]
    if add_shared:
        header.append(f"mean {_length_title(shared[0])}..{_length_title(shared[-1])}" if len(shared) > 1
                      else f"mean {_length_title(shared[0])}")
    rows = []
    for run, entry in entries:
        by_length = entry.get("by_length", {})
        row = [run.label, *(_fmt(by_length.get(str(n))) for n in lengths), _fmt(entry.get("score"))]
        if add_shared:
            row.append(_fmt(sum(by_length[str(n)] for n in shared) / len(shared)))
        rows.append(row)
    return _md_table(header, rows, align_right_from=1)


def _length_title(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


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
    if any(r.results.get("average") is not None and set(r.results.get("average_tasks", [])) != set(task_columns(runs))
           for r in runs):
        lines += ["\\* the average covers only the tasks this run evaluated (see its results.json).", ""]
    for task in SYNTHETIC_TASKS:
        table = by_length_table(runs, task)
        if table is not None:
            lines += [f"## {TASK_TITLES[task]}: accuracy@1 (%) by length (tokens)", "", table, ""]
    notes = []
    for run in runs:
        results = run.results
        if not results.get("complete", True):
            notes.append(f"- {run.label}: **incomplete run** (killed or still running)")
        for task, message in results.get("skipped", {}).items():
            notes.append(f"- {run.label}: {task} skipped: {message}")
        if results.get("average_note"):
            notes.append(f"- {run.label}: average = {results['average_note']}")
    if notes:
        lines += ["## Notes", "", *notes, ""]
    lines += ["## Runs", "", _md_table(["run", "folder", "wall time (s)", "created"], [
        [r.label, str(r.path), _fmt(r.results.get("wall_time_s"), 0), str(r.results.get("created", ""))] for r in runs
    ], align_right_from=2), ""]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{title}]({path})" for title, path in plots]
        lines.append("")
    return "\n".join(lines)


def results_summary(results: dict[str, Any]) -> str:
    """Plain-text table of one run, printed by ``longembed eval`` at the end."""
    header = f"{'task':<14}{'metric':<12}{'score':>8}{'docs':>7}{'queries':>9}{'trunc.':>8}{'encoded':>9}{'time s':>9}"
    lines = [f"results: {run_label(results)}", header, "-" * len(header)]
    for name, entry in results.get("tasks", {}).items():
        counts, cache = entry.get("counts", {}), entry.get("cache", {})
        encoded = cache.get("documents_encoded", 0) + cache.get("queries_encoded", 0) if cache else MISSING
        lines.append(
            f"{name:<14}{entry['main_score']:<12}{entry['score']:>8.2f}{counts.get('documents', 0):>7}"
            f"{counts.get('queries', 0):>9}{counts.get('documents_truncated', MISSING)!s:>8}{encoded!s:>9}"
            f"{entry.get('wall_time_s', 0):>9.1f}"
        )
        if "by_length" in entry:
            lengths = "  ".join(f"{_length_title(int(n))}: {v:.1f}" for n, v in entry["by_length"].items())
            lines.append(f"{'':<14}{lengths}")
    lines.append("-" * len(header))
    lines.append(f"{'average':<26}{_fmt(results.get('average'), 2):>8}   {results.get('average_note', '')}")
    for name, message in results.get("skipped", {}).items():
        lines.append(f"skipped {name}: {message}")
    return "\n".join(lines)
