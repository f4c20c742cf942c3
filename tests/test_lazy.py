"""Lazy package exports: the TYPE_CHECKING imports are the one list of a package's public names."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from longembed.lazy import type_checking_imports

LAZY_PACKAGES = (
    "longembed",
    "longembed.collapse",
    "longembed.corpus",
    "longembed.evaluation",
    "longembed.serving",
    "longembed.training",
)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_public_name_resolves_to_its_module_object(name):
    package = importlib.import_module(name)
    declared = type_checking_imports(package.__file__)
    assert declared, f"{name} declares no public names"
    assert set(declared) <= set(package.__all__)
    for attribute, module in declared.items():
        assert getattr(package, attribute) is getattr(importlib.import_module(module), attribute)
    assert set(package.__all__) <= set(dir(package))


def test_a_name_is_imported_on_first_use_only(tmp_path, monkeypatch):
    (tmp_path / "lazypkg").mkdir()
    (tmp_path / "lazypkg" / "heavy.py").write_text("VALUE = 42\n")
    (tmp_path / "lazypkg" / "__init__.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        from longembed.lazy import lazy_exports
        if TYPE_CHECKING:
            from lazypkg.heavy import VALUE
        __getattr__, __dir__, __all__ = lazy_exports(__name__, __file__, also=("OWN",))
        OWN = 1
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    package = importlib.import_module("lazypkg")
    try:
        assert "lazypkg.heavy" not in sys.modules
        assert package.__all__ == ["OWN", "VALUE"]
        assert package.VALUE == 42 and "lazypkg.heavy" in sys.modules
        with pytest.raises(AttributeError, match="no attribute 'missing'"):
            package.missing  # noqa: B018
    finally:
        for module in ("lazypkg", "lazypkg.heavy"):
            sys.modules.pop(module, None)


def test_a_relative_import_in_the_block_is_refused(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .heavy import VALUE\n")
    with pytest.raises(ValueError, match="absolute"):
        type_checking_imports(init)
