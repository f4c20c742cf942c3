"""The options a run gives the generated tasks, passkey and needle, checked and recorded: how many queries
per length (``--queries-per-length``), which documents a query ranks (``--candidates``: the set's or its
50-query block's), the haystack (``--haystack``) and whether needles share it (``--needle-haystacks``).

They apply to the tasks that take them only (passkey and needle; needle alone for the needle
haystacks): asked for in a run without such a task, they are an error rather than silently ignored.
A passkey or needle task given as an object (not by name) keeps its own options, which must agree
with the run's, so that what the run records describes the data it scored.  ``results.json`` records
the options that differ from the defaults (``RunConfig.task_options``), so the config of a default run
stays what it always was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longembed.errors import UserError
from longembed.evaluation.spec import EvalSpec
from longembed.tasks import Task
from longembed.tasks.haystack import Haystack, load_haystack
from longembed.tasks.needle import SHARED_HAYSTACKS, check_haystacks
from longembed.tasks.query_sets import (
    ALL_CANDIDATES,
    DOCUMENTS_PER_QUERY,
    PAPER_QUERIES,
    check_candidates,
    check_queries_per_length,
)

#: The tasks that take these options.
SYNTHETIC_TASKS = ("passkey", "needle")
#: Each option (its EvalSpec field) -> the tasks that take it.
OPTION_TASKS: dict[str, tuple[str, ...]] = {
    "queries_per_length": SYNTHETIC_TASKS,
    "candidates": SYNTHETIC_TASKS,
    "haystack": SYNTHETIC_TASKS,
    "needle_haystacks": ("needle",),
}
#: The options whose ``get_task`` keyword is not their EvalSpec field's name.
TASK_KEYWORDS: dict[str, str] = {"needle_haystacks": "haystacks"}


@dataclass(frozen=True)
class SyntheticOptions:
    """``queries_per_length``, the user's :class:`~longembed.tasks.haystack.Haystack` (None: the
    filler sentences and the essays), ``needle_haystacks`` ("shared" or "distinct") and ``candidates``
    ("all" or "blocks") of one run."""

    queries_per_length: int = PAPER_QUERIES
    haystack: Haystack | None = None
    needle_haystacks: str = SHARED_HAYSTACKS
    candidates: str = ALL_CANDIDATES

    @classmethod
    def from_spec(cls, spec: EvalSpec) -> SyntheticOptions:
        """The spec's options, its haystack folder read (and checked) now, before any model loads."""
        haystack = None if spec.haystack is None else load_haystack(spec.haystack)
        queries = check_queries_per_length(spec.queries_per_length)
        return cls(queries, haystack, check_haystacks(spec.needle_haystacks), check_candidates(spec.candidates, queries))

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults, by their EvalSpec field."""
        out: dict[str, Any] = {}
        if self.queries_per_length != PAPER_QUERIES:
            out["queries_per_length"] = self.queries_per_length
        if self.haystack is not None:
            out["haystack"] = self.haystack
        if self.needle_haystacks != SHARED_HAYSTACKS:
            out["needle_haystacks"] = self.needle_haystacks
        if self.candidates != ALL_CANDIDATES:
            out["candidates"] = self.candidates
        return out

    def task_kwargs(self, name: str) -> dict[str, Any]:
        """The changed options the task ``name`` takes, as ``get_task`` takes them (none for other tasks)."""
        return {TASK_KEYWORDS.get(key, key): value for key, value in self.changed().items()
                if name in OPTION_TASKS[key]}

    def record(self) -> dict[str, Any]:
        """What ``RunConfig.task_options`` records: the non-default options, the haystack described."""
        out = self.changed()
        if self.haystack is not None:
            out["haystack"] = self.haystack.describe()
        return out

    def check(self, tasks: Sequence[Task]) -> None:
        """A ValueError if an option is set but no task of the run takes it, or if a passkey or needle
        task object was built with other options than the run's."""
        names = [task.metadata.name for task in tasks]
        self._check_taken(names)
        for task in tasks:
            if task.metadata.name in SYNTHETIC_TASKS:
                self._check_task(task)

    def _check_taken(self, names: list[str]) -> None:
        """A ValueError naming the flags set that none of the tasks ``names`` takes."""
        for takers in dict.fromkeys(OPTION_TASKS.values()):
            untaken = [key for key in self.changed() if OPTION_TASKS[key] == takers and not set(names) & set(takers)]
            if untaken:
                flags = ", ".join(f"--{key.replace('_', '-')}" for key in untaken)
                raise UserError(f"{flags}: {_only(takers)} ({', '.join(names)})")

    def _check_task(self, task: Task) -> None:
        """A ValueError if the passkey or needle task object ``task`` was built with other options."""
        name = task.metadata.name
        queries = getattr(task, "queries_per_length", PAPER_QUERIES)
        if queries != self.queries_per_length:
            raise UserError(
                f"the {name} task given has {queries} queries per length but the run asks for "
                f"{self.queries_per_length}: give the task by name, or build it with the run's options"
            )
        haystack: Haystack | None = getattr(task, "haystack", None)
        theirs = None if haystack is None else haystack.sha256
        ours = None if self.haystack is None else self.haystack.sha256
        if theirs != ours:
            raise UserError(
                f"the {name} task given was built with another haystack than the run's "
                f"({haystack.path if haystack else 'none'} vs {self.haystack.path if self.haystack else 'none'})"
            )
        candidates = getattr(task, "candidates", ALL_CANDIDATES)
        if candidates != self.candidates:
            raise UserError(
                f"the {name} task given ranks {candidates!r} candidates but the run asks for "
                f"{self.candidates!r}: give the task by name, or build it with the run's options"
            )
        modes = getattr(task, "haystacks", SHARED_HAYSTACKS)
        if name == "needle" and modes != self.needle_haystacks:
            raise UserError(
                f"the needle task given builds its documents with {modes} haystacks but the run asks for "
                f"{self.needle_haystacks}: give the task by name, or build it with the run's options"
            )

    def notes(self) -> list[str]:
        """Lines for the run's log: the haystack read, files of its folder that were not, and distinct
        needle haystacks."""
        lines = []
        if self.candidates != ALL_CANDIDATES:
            lines.append(f"candidates: blocks: each {PAPER_QUERIES} queries rank only their own "
                         f"{DOCUMENTS_PER_QUERY * PAPER_QUERIES} "
                         "documents, as in the paper's set; scores compare with 50-query runs, not with "
                         "'all' runs of the same size")
        if self.needle_haystacks != SHARED_HAYSTACKS:
            lines.append(f"needle: {self.needle_haystacks} haystacks: every document is cut from its own window "
                         "of the haystack (LongEmbed's share one prefix); scores are not comparable to shared runs")
        if self.haystack is None:
            return lines
        h = self.haystack
        lines.append(f"haystack: {h.documents} documents, {h.words} words from {h.path} "
                     f"(longest length it fills: {h.longest_length()})")
        if h.skipped:
            lines.append(f"haystack: {len(h.skipped)} files that are neither .txt nor .jsonl were not read, "
                         f"e.g. {', '.join(h.skipped[:3])}")
        return lines


def _only(takers: tuple[str, ...]) -> str:
    """Why an option is refused when none of ``takers`` runs."""
    if len(takers) == 1:
        return f"only {takers[0]} takes it, and it is not among the tasks"
    return f"only {' and '.join(takers)} take it, and neither is among the tasks"
