"""The options a run gives the generated tasks, passkey and needle: how many queries per length
(``--queries-per-length``) and whose documents make the haystack (``--haystack``).

They apply to passkey and needle only: asked for in a run with neither, they are an error rather than
silently ignored.  A passkey or needle task given as an object (not by name) keeps its own options,
which must agree with the run's, so that what the run records describes the data it scored.
``results.json`` records the options that differ from the defaults (``RunConfig.task_options``), so
the config of a default run stays what it always was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longembed.evaluation.spec import EvalSpec
from longembed.tasks import Task
from longembed.tasks.haystack import Haystack, load_haystack
from longembed.tasks.query_sets import PAPER_QUERIES, check_queries_per_length

#: The tasks that take these options.
SYNTHETIC_TASKS = ("passkey", "needle")


@dataclass(frozen=True)
class SyntheticOptions:
    """``queries_per_length`` and the user's :class:`~longembed.tasks.haystack.Haystack` (None: the
    filler sentences and the essays) of one run."""

    queries_per_length: int = PAPER_QUERIES
    haystack: Haystack | None = None

    @classmethod
    def from_spec(cls, spec: EvalSpec) -> SyntheticOptions:
        """The spec's options, its haystack folder read (and checked) now, before any model loads."""
        haystack = None if spec.haystack is None else load_haystack(spec.haystack)
        return cls(check_queries_per_length(spec.queries_per_length), haystack)

    def task_kwargs(self) -> dict[str, Any]:
        """The options that differ from the defaults, as ``get_task`` takes them."""
        out: dict[str, Any] = {}
        if self.queries_per_length != PAPER_QUERIES:
            out["queries_per_length"] = self.queries_per_length
        if self.haystack is not None:
            out["haystack"] = self.haystack
        return out

    def record(self) -> dict[str, Any]:
        """What ``RunConfig.task_options`` records: the non-default options, the haystack described."""
        out = self.task_kwargs()
        if self.haystack is not None:
            out["haystack"] = self.haystack.describe()
        return out

    def check(self, tasks: Sequence[Task]) -> None:
        """A ValueError if the options are set but neither passkey nor needle runs, or if a passkey or
        needle task object was built with other options than the run's."""
        names = [task.metadata.name for task in tasks]
        if self.task_kwargs() and not set(names) & set(SYNTHETIC_TASKS):
            flags = ", ".join(f"--{key.replace('_', '-')}" for key in self.task_kwargs())
            raise ValueError(f"{flags}: only passkey and needle take it, and neither is among the tasks "
                             f"({', '.join(names)})")
        for task in tasks:
            if task.metadata.name in SYNTHETIC_TASKS:
                self._check_task(task)

    def _check_task(self, task: Task) -> None:
        name = task.metadata.name
        queries = getattr(task, "queries_per_length", PAPER_QUERIES)
        if queries != self.queries_per_length:
            raise ValueError(
                f"the {name} task given has {queries} queries per length but the run asks for "
                f"{self.queries_per_length}: give the task by name, or build it with the run's options"
            )
        haystack: Haystack | None = getattr(task, "haystack", None)
        theirs = None if haystack is None else haystack.sha256
        ours = None if self.haystack is None else self.haystack.sha256
        if theirs != ours:
            raise ValueError(
                f"the {name} task given was built with another haystack than the run's "
                f"({haystack.path if haystack else 'none'} vs {self.haystack.path if self.haystack else 'none'})"
            )

    def notes(self) -> list[str]:
        """Lines for the run's log: the haystack read, and files of its folder that were not."""
        if self.haystack is None:
            return []
        h = self.haystack
        lines = [f"haystack: {h.documents} documents, {h.words} words from {h.path} "
                 f"(longest length it fills: {h.longest_length()})"]
        if h.skipped:
            lines.append(f"haystack: {len(h.skipped)} files that are neither .txt nor .jsonl were not read, "
                         f"e.g. {', '.join(h.skipped[:3])}")
        return lines
