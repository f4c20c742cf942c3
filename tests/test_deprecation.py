"""Renamed modules: the old paths import for one release, as the new module, with a DeprecationWarning;
no file is left at an old path, and the finder never hides a real module."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import longembed
from longembed.deprecation import MOVED_MODULES

ROOT = Path(longembed.__file__).resolve().parent


def _file(dotted: str) -> Path:
    return ROOT.joinpath(*dotted.split(".")[1:]).with_suffix(".py")


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_an_old_path_is_its_new_module_with_a_deprecation_warning(old: str, new: str) -> None:
    assert _file(new).is_file() and not _file(old).exists()  # the rename is real: one file, at the new path
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} was renamed {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new  # the new module's own spec is kept
    parent, _, leaf = old.rpartition(".")
    assert getattr(sys.modules[parent], leaf) is module


@pytest.mark.slow
def test_from_imports_of_old_paths_name_the_same_objects_in_a_fresh_interpreter() -> None:
    """What a user's script does: ``from <old path> import Name``, with warnings shown."""
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n    from longembed.results.run import RunResults\nexcept DeprecationWarning as w:\n    print(w)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from longembed.results.run import RunResults\n"
        "from longembed.tasks.hub import HubTask\n"
        "from longembed.results.run_results import RunResults as New\n"
        "from longembed.tasks.hf_hub import HubTask as NewHub\n"
        "print(RunResults is New and HubTask is NewHub)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].startswith("longembed.results.run was renamed longembed.results.run_results")
    assert out[1] == "True"


def test_the_finder_leaves_unknown_and_real_modules_alone() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("longembed.results.no_such_module")
    assert importlib.import_module("longembed.results.run_results").__spec__.origin == str(
        ROOT / "results" / "run_results.py"
    )
