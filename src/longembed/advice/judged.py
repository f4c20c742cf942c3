"""What a judged task implies for the advice (TREC's pooling caveat): each strategy's judged@10, the pool
that made the judgments (depth, strategies, from the task folder's ``judgments.jsonl``), and a warning
for a strategy whose top 10 is mostly unjudged, with the command that pools it into the judging page.

Unjudged documents count as not relevant, so a strategy that was not pooled (or pooled shallower than
10) scores low for want of judgments, not of relevance (Buckley and Voorhees, SIGIR 2004: below ~50%
judged@10 a comparison with pooled strategies is unreliable).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from longembed.results.advice import Advice, StrategyResult
from longembed.results.run_results import JUDGED_AT_10, RunResults
from longembed.tasks.judgment_log import LOG_FILE, read_log

#: below this judged@10 (percent) a strategy's score is called unreliable
JUDGED_WARNING_PERCENT = 50.0
#: the depth judged@10 and nDCG@10 read
JUDGED_DEPTH = 10


def run_judged_at_10(run: RunResults) -> float | None:
    """A run's judged@10 (percent), the mean over its units that report one; None when none does (no
    task judges a document not relevant)."""
    values = []
    for task in run.tasks.values():
        for unit in (list(task.lengths.values()) if task.lengths else [task]):
            value = (unit.metrics or {}).get(JUDGED_AT_10)
            if value is not None:
                values.append(float(value))
    return round(sum(values) / len(values), 1) if values else None


def pool_summary(folder: str | Path) -> tuple[set[int], list[str], int] | None:
    """(pool depths, strategies pooled, questions) of a task folder's judgment log, None without one."""
    log = Path(folder) / LOG_FILE
    if not log.is_file():
        return None
    depths: set[int] = set()
    strategies: dict[str, None] = {}
    questions = 0
    for _lineno, record in read_log(log):
        if record.get("event") == "question":
            questions += 1
            depths.add(int(record["pool_depth"]))
            strategies.update(dict.fromkeys(record.get("strategies", [])))
    return depths, list(strategies), questions


def judged_lines(advice: Advice, folders: dict[str, str]) -> list[str]:
    """The advice.md section on judgments (empty when no strategy reports judged@10)."""
    judged = [s for s in advice.strategies if s.judged_at_10 is not None]
    if not judged:
        return []
    lines = ["## Judged results", "",
             "These judgments were pooled: a document no one judged counts as not relevant. judged@10 is the share "
             "of each strategy's top 10 that was judged (TREC's check); a strategy far below the others was not "
             "pooled, or the pool was shallow, and its score is biased low.", ""]
    pooled: set[str] = set()
    depths: set[int] = set()
    for task, folder in folders.items():
        summary = pool_summary(folder)
        if summary is not None:
            task_depths, strategies, questions = summary
            pooled |= set(strategies)
            depths |= task_depths
            lines.append(f"- {task}: {questions} questions pooled from the top {'/'.join(map(str, sorted(task_depths)))} "
                         f"of {', '.join(strategies)} ({Path(folder) / LOG_FILE})")
    lines += ["", "| strategy | judged@10 | pooled |", "|---|---:|---|"]
    lines += [f"| {s.name} | {s.judged_at_10:.1f}% | {'yes' if s.name in pooled else 'no'} |" for s in judged]
    low = [s for s in judged if s.judged_at_10 < JUDGED_WARNING_PERCENT]
    return lines + ["", warning(low, folders, pooled, min(depths, default=JUDGED_DEPTH)), ""] if low else lines + [""]


def warning(low: list[StrategyResult], folders: dict[str, str], pooled: set[str], depth: int) -> str:
    """One warning for the mostly unjudged strategies, with the command that pools their results (at depth
    10 at least) into the questions asked: ``longembed judge`` adds what a new strategy, or a deeper pool,
    brings to each."""
    names = ",".join([*sorted(pooled), *(s.name for s in low if s.name not in pooled)])
    k = max(depth, JUDGED_DEPTH)
    judge = "; ".join(f"longembed judge --docs DOCS --out {shlex.quote(folder)} --strategies {shlex.quote(names)} "
                      f"--k {k}" for folder in folders.values())
    shallow = (f" The pool was {depth} deep, shallower than the 10 documents nDCG@10 reads." if depth < JUDGED_DEPTH
               else "")
    listed = ", ".join(f"{s.name} {s.judged_at_10:.1f}%" for s in low)
    return (f"**Warning: the top 10 of {len(low)} strategies was mostly unjudged** (below "
            f"{JUDGED_WARNING_PERCENT:g}%: {listed}). Their scores count unjudged documents as not relevant and are "
            f"biased low.{shallow} To compare them fairly, judge their results: `{judge}` adds each one's unjudged "
            f"top {k} to every question asked, and the page shows them next.")
