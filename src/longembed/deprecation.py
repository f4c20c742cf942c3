"""Old module paths kept importable for one release after a rename, with a DeprecationWarning.

Renamed modules (issue 44: names that no longer collide) leave no file at their old path, so a
newcomer browsing the folders sees each module once.  Instead, ``import longembed`` appends a finder
to ``sys.meta_path`` that Python consults only after the ordinary lookup found nothing: an old path
in :data:`MOVED_MODULES` then imports the new module, under both names, with a DeprecationWarning.
So ``from longembed.results.run import RunResults`` keeps working and names the very objects of
``longembed.results.run_results`` (a monkeypatch through either path reaches both).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: old module path -> new module path (kept for one release).
MOVED_MODULES = {
    "longembed.results.hubs": "longembed.results.hubness",
    "longembed.report.hubs": "longembed.report.hubness",
    "longembed.tasks.hub": "longembed.tasks.hf_hub",
    "longembed.results.pooling": "longembed.results.pooled_runs",
    "longembed.evaluation.candidates": "longembed.evaluation.sweep_candidates",
    "longembed.advice.candidates": "longembed.advice.strategies",
    "longembed.advice.run": "longembed.advice.advisor",
    "longembed.collapse.run": "longembed.collapse.study",
    "longembed.collapse.choices": "longembed.collapse.defaults",
    "longembed.corpus.run": "longembed.corpus.embed",
    "longembed.corpus.choices": "longembed.corpus.engines",
    "longembed.results.run": "longembed.results.run_results",
    "longembed.training.retrofit.run": "longembed.training.retrofit.pipeline",
    "longembed.training.retrofit.plot": "longembed.training.loss_curve",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path of :data:`MOVED_MODULES` and loads it as its new module."""

    def __init__(self, moved: dict[str, str]) -> None:
        self.moved = moved

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = self.moved[spec.name]
        warnings.warn(
            f"{spec.name} was renamed {new}; import from {new} (the old path will be removed in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._spec = module.__spec__  # the import system sets __spec__ to the old path's: put it back
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec


def install_moved_module_finder() -> None:
    """Append the finder for :data:`MOVED_MODULES` to ``sys.meta_path`` (once); it runs only for names
    the ordinary finders did not find, so it never hides a real module."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder(MOVED_MODULES))
