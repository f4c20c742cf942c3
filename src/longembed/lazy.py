"""Packages whose public names are imported on first use (PEP 562), not when the package is.

A package such as ``longembed.training`` re-exports names from modules that import torch,
transformers or sentence-transformers.  Importing one light submodule (``longembed.training.config``
for the command line's ``--help``) first runs the package's ``__init__``; with eager re-exports that
would import everything.  A package lists its public names once, as the imports of an
``if TYPE_CHECKING:`` block (what type checkers and editors read), and calls
:func:`lazy_exports`, which reads that block from the package's source and returns a module-level
``__getattr__`` importing a name's module on first use, ``__dir__`` and ``__all__`` (the approach of
scientific-python's ``lazy_loader.attach_stub``); ``from package import name`` works unchanged.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longembed.errors import UserError


def type_checking_imports(source_file: str | Path) -> dict[str, str]:
    """``{name: module}`` of every ``from module import name`` inside the file's top-level
    ``if TYPE_CHECKING:`` blocks (absolute imports only)."""
    tree = ast.parse(Path(source_file).read_text(encoding="utf-8"))
    exports: dict[str, str] = {}
    for block in tree.body:
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING":
            for statement in block.body:
                if not isinstance(statement, ast.ImportFrom) or statement.level or statement.module is None:
                    raise UserError(f"{source_file}: the TYPE_CHECKING block holds only absolute 'from X import Y'")
                exports.update({alias.asname or alias.name: statement.module for alias in statement.names})
    return exports


def lazy_exports(
    package: str, init_file: str | Path, also: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, whose ``__init__`` is ``init_file``: each
    name its TYPE_CHECKING block imports comes from that module, imported on first access; ``also``
    are names the package defines itself (e.g. ``__version__``), added to ``__all__``."""
    exports = type_checking_imports(init_file)
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups are ordinary attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__, sorted([*exports, *also])
