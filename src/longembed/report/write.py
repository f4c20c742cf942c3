"""``write_report``: report.md and the PNG plots for a set of runs; ``collect_runs`` finds them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from longembed.errors import MissingFileError
from longembed.report.labels import Run, unique_labels
from longembed.report.plots import plot_length_heatmap, plot_length_lines, plot_task_bars
from longembed.report.sweep_report import write_sweep_report
from longembed.report.tables import by_length_tasks, markdown_report, task_columns
from longembed.results import RESULTS_FILE, SWEEP_FILE, RunResults


def collect_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Load the runs at ``paths`` (run folders, results.json files, or folders of run folders).

    Raises FileNotFoundError naming a path with no results, and ValueError for a file that is not a
    longembed results file. Each run gets a distinct label.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            files.append(path)
        elif (path / RESULTS_FILE).is_file():
            files.append(path / RESULTS_FILE)
        elif path.is_dir() and (found := sorted(path.glob(f"*/{RESULTS_FILE}"))):
            files.extend(found)
        elif path.is_dir() and (found := sorted(path.glob(f"*/*/{RESULTS_FILE}"))) and (path / SWEEP_FILE).is_file():
            files.extend(found)  # a sweep folder: select/<candidate>/ and score/<candidate>/
        else:
            raise MissingFileError(f"no {RESULTS_FILE} in {path} (nor in its subfolders)")
    runs = []
    seen: set[Path] = set()
    for file in files:
        if file.resolve() in seen:
            continue
        seen.add(file.resolve())
        runs.append(Run(path=file.parent, results=RunResults.load(file)))
    unique_labels(runs)
    return runs


def write_report(paths: Sequence[str | Path], output_dir: str | Path) -> dict[str, Path]:
    """Write ``report.md`` and the PNG plots for the runs at ``paths``; returns name -> file written.

    Folders among ``paths`` that hold a sweep.json also get their sweep.md and sweep.png.
    """
    runs = collect_runs(paths)
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    plots: list[tuple[str, str]] = []
    bars = plot_task_bars(runs, output / "scores_by_task.png")
    if bars is not None:
        written["scores_by_task"] = bars
        plots.append(("scores by task", bars.name))
    for task in by_length_tasks(task_columns(runs)):
        heatmap = plot_length_heatmap(runs, task, output / f"{task}_by_length.png")
        if heatmap is not None:
            written[f"{task}_by_length"] = heatmap
            plots.append((f"{task} accuracy by length", heatmap.name))
        lines = plot_length_lines(runs, task, output / f"{task}_vs_length.png")
        if lines is not None:
            written[f"{task}_vs_length"] = lines
            plots.append((f"{task} accuracy against length, with 95% intervals", lines.name))
    report = output / "report.md"
    report.write_text(markdown_report(runs, plots), encoding="utf-8")
    written["report"] = report
    for raw in paths:
        if (Path(raw) / SWEEP_FILE).is_file():
            for name, path in write_sweep_report(Path(raw)).items():
                written[f"{Path(raw).name} sweep {name}"] = path
    return written
