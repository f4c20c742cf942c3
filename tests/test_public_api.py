"""The public API's names (issue 44): what users subclass is exported, a metrics function is not named
like the benchmark, file helpers are not public; the old names are gone (nothing was released under them)."""

from __future__ import annotations

import warnings

import pytest

import longembed
import longembed.evaluation
import longembed.extension
import longembed.results
import longembed.results.files as files
from longembed.evaluation.metrics import retrieval_metrics
from longembed.extension.methods.base import ExtensionMethod

FILE_HELPERS = ("RunFolder", "atomic_write_bytes", "atomic_write_text", "unwritable_folder", "json_safe",
                "read_json", "write_json")


def test_extension_method_is_exported_and_its_old_name_is_gone() -> None:
    assert "ExtensionMethod" in longembed.extension.__all__
    assert longembed.extension.ExtensionMethod is ExtensionMethod
    assert not hasattr(longembed.extension, "MethodInfo")


def test_retrieval_metrics_is_the_one_name_of_the_metrics() -> None:
    qrels, ranking = {"q": {"a": 1}}, {"q": ["b", "a"]}
    assert "retrieval_metrics" in longembed.evaluation.__all__ and "evaluate" not in longembed.evaluation.__all__
    with pytest.raises(AttributeError):
        longembed.evaluation.evaluate  # noqa: B018 - the deprecated alias was removed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = retrieval_metrics(qrels, ranking, (1, 2))
    assert metrics["mrr@2"] == 0.5 and metrics["ndcg@1"] == 0.0


def test_file_helpers_live_in_results_files_only() -> None:
    """One import path per name: the helpers are in ``longembed.results.files``, not re-exported."""
    for name in FILE_HELPERS:
        assert name not in longembed.results.__all__ and not hasattr(longembed.results, name)
        assert callable(getattr(files, name))
    assert {"RunResults", "compare", "RESULTS_FILE"} <= set(longembed.results.__all__)


def test_user_error_is_exported() -> None:
    assert "UserError" in longembed.__all__ and issubclass(longembed.UserError, ValueError)
