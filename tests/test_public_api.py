"""The public API's names (issue 44): what users subclass is exported, a metrics function is not named
like the benchmark, file helpers are not public; old names keep working for one release."""

from __future__ import annotations

import warnings

import pytest

import longembed
import longembed.evaluation
import longembed.extension
import longembed.results
from longembed.evaluation.metrics import retrieval_metrics
from longembed.extension.methods.base import ExtensionMethod

FILE_HELPERS = ("RunFolder", "atomic_write_bytes", "atomic_write_text", "unwritable_folder", "json_safe",
                "read_json", "write_json")


def test_extension_method_is_exported_where_method_info_is() -> None:
    assert "ExtensionMethod" in longembed.extension.__all__
    assert longembed.extension.ExtensionMethod is ExtensionMethod is longembed.extension.MethodInfo


def test_retrieval_metrics_and_the_deprecated_evaluate() -> None:
    qrels, ranking = {"q": {"a": 1}}, {"q": ["b", "a"]}
    assert "retrieval_metrics" in longembed.evaluation.__all__
    with pytest.warns(DeprecationWarning, match="use retrieval_metrics"):
        old = longembed.evaluation.evaluate(qrels, ranking, (1, 2))
    assert old == retrieval_metrics(qrels, ranking, (1, 2)) and old["mrr@2"] == 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        retrieval_metrics(qrels, ranking)


def test_file_helpers_are_importable_but_not_public() -> None:
    for name in FILE_HELPERS:
        assert name not in longembed.results.__all__
        assert callable(getattr(longembed.results, name))
    assert {"RunResults", "compare", "RESULTS_FILE"} <= set(longembed.results.__all__)


def test_user_error_is_exported() -> None:
    assert "UserError" in longembed.__all__ and issubclass(longembed.UserError, ValueError)
