"""The public API's names (issue 44): what users subclass is exported, a metrics function is not named
like the benchmark, file helpers are not public; the old names are gone (nothing was released under them).
The encoder's public face is what a user calls, each return shape declared (issue 50)."""

from __future__ import annotations

import inspect
import warnings
from typing import Any, get_args, get_origin, get_overloads, get_type_hints

import numpy as np
import pytest

import longembed
import longembed.evaluation
import longembed.extension
import longembed.results
import longembed.results.files as files
from longembed.encoder import LongContextEncoder, load_encoder
from longembed.evaluation.metrics import retrieval_metrics
from longembed.extension.methods.base import ExtensionMethod
from longembed.model_runner import ModelRunner

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


# ------------------------------------------------------------------ the encoder's public face (issue 50)
#: What a user calls on an encoder; whatever serves one internal caller is on its runner.
ENCODER_METHODS = {"encode", "encode_query", "encode_document", "encode_chunks", "encode_tokens", "chunk_spans",
                   "retrieval_prompts"}
#: What it is: read-only, from its runner (``prompts`` and ``runner`` are its own attributes).
ENCODER_PROPERTIES = {"config", "source", "device", "tokenizer", "method", "position_scheme", "original_length",
                      "max_length", "pooling", "normalize", "embedding_dim", "window_length", "model", "model_loaded",
                      "metadata"}
#: The runner's entry points: the server (tokenized inputs, planned windows), the contextual trainer (states
#: with gradients), the collapse study (attention), and encode's own steps.
RUNNER_ENTRY_POINTS = {"tokenize", "tokenize_to_limit", "prepare", "encode_tokenized", "token_embeddings", "token_states",
                       "forward_states", "observe_attention"}


def test_the_encoders_public_face_is_what_a_user_calls(tiny_models) -> None:
    public = {name for name in dir(LongContextEncoder) if not name.startswith("_")}
    properties = {name for name in public if isinstance(getattr(LongContextEncoder, name), property)}
    assert properties == ENCODER_PROPERTIES
    assert public - properties == ENCODER_METHODS
    encoder = load_encoder(tiny_models["bert"], lazy=True)
    assert {name for name in vars(encoder) if not name.startswith("_")} == {"prompts", "runner"}
    assert isinstance(encoder.runner, ModelRunner)
    runner_methods = {name for name in dir(ModelRunner) if not name.startswith("_") and inspect.isfunction(
        getattr(ModelRunner, name))}
    assert runner_methods == RUNNER_ENTRY_POINTS
    assert not encoder.model_loaded  # nothing above ran the model


def _matches(value: Any, declared: Any) -> bool:
    """Whether ``value`` has the shape a return annotation declares (arrays, lists of them, (x, stats))."""
    origin, args = get_origin(declared), get_args(declared)
    if origin is tuple:
        return isinstance(value, tuple) and len(value) == len(args) and all(map(_matches, value, args))
    if origin is list:
        return isinstance(value, list) and all(_matches(v, args[0]) for v in value)
    return isinstance(value, declared)


@pytest.mark.parametrize("method", ["encode", "encode_tokens"])
def test_each_overload_declares_the_shape_the_call_returns(tiny_models, method) -> None:
    """As sentence-transformers' encode: one overload per return shape (a str, a list, token embeddings,
    return_stats=True), each the shape such a call returns, and a last one for values known at run time."""
    encoder = load_encoder(tiny_models["bert"])
    overloads = get_overloads(getattr(LongContextEncoder, method))
    *specific, run_time = (get_type_hints(o) for o in overloads)
    assert run_time["return_stats"] is bool and len(specific) == {"encode": 6, "encode_tokens": 2}[method]
    shapes = set()
    for hints in specific:
        texts = "a short text" if hints["texts"] is str else ["a short text", "another one"]
        (return_stats,) = get_args(hints["return_stats"])
        for output_value in get_args(hints["output_value"]) if "output_value" in hints else (None,):
            options = {} if output_value is None else {"output_value": output_value}
            got = getattr(encoder, method)(texts, return_stats=return_stats, **options)
            assert _matches(got, hints["return"]), (hints, got)
            shapes.add(hints["return"])
    assert len(shapes) == {"encode": 4, "encode_tokens": 2}[method]  # every shape declared is a distinct one


def test_query_and_document_vectors_are_declared_arrays() -> None:
    for method in (LongContextEncoder.encode_query, LongContextEncoder.encode_document):
        assert get_type_hints(method)["return"] is np.ndarray and not get_overloads(method)
