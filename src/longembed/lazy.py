"""Packages whose public names are imported on first use (PEP 562), not when the package is.

A package such as ``longembed.training`` re-exports names from modules that import torch,
transformers or sentence-transformers.  Importing one light submodule (``longembed.training.choices``
for the command line's ``--help``) first runs the package's ``__init__``; with eager re-exports that
would import everything.  A package declares ``{name: module}`` instead and gets a module-level
``__getattr__`` that imports the module when the name is first used; ``from package import name``
works unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name in ``exports`` comes from its module
    (absolute, or relative to the package when it starts with a dot), imported on first access."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # later lookups are ordinary attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
