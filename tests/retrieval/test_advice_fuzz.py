"""Property-based tests of ``longembed index --from-advice`` (issue 51): whatever a hand edit does to
advice.json (a field of another type, an unknown field, a field dropped, the top level changed), the
command builds the strategy the file names, or fails with one line (a UserError, exit 2, never a
traceback) and leaves no index folder or build.lock behind.

Deterministic and bounded for CI, as tests/tasks/test_reader_fuzz.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longembed.cli.main import main
from longembed.errors import UserError
from longembed.results.advice import strategy_from_advice

FUZZ = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

CONFIG_KEYS = ["model", "method", "max_length", "encoder_options", "granularity", "chunking", "late", "fuse",
               "fuse_method", "fuse_weight", "fuse_k", "query_prompt", "document_prompt", "fusion", "naive",
               "temperature", "modle", "batch_size"]
RECORD_KEYS = ["config", "kind", "granularity", "fusion", "method", "max_length", "name"]
TOP_KEYS = ["model", "recommended", "recommendation", "strategies", "format"]
scalars = (st.none() | st.booleans() | st.integers(-5, 5000) | st.floats(allow_nan=False) | st.sampled_from(
    ["", "bm25", "chunks", "document", "tokens:0", "tokens:64", "rrf", "linear", "pi", "truncate", "m", "x"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
    st.sampled_from(["method", "source", "k", "weight", "level", "late", "temperature", "x"]), inner, max_size=3),
    max_leaves=5)
edits = st.lists(st.tuples(st.sampled_from(["config", "record", "top"]), st.sampled_from(
    CONFIG_KEYS + RECORD_KEYS + TOP_KEYS), values | st.just("<drop>")), min_size=1, max_size=3)
NAMES = ["bm25", "pi-4096", "late-chunks+bm25"]


def advice(recommended: str) -> dict[str, Any]:
    """A valid advice file: BM25, a dense and a hybrid strategy of a model folder that does not exist (a
    dense build fails when it loads it, so a build is fast either way)."""
    common = {"model": "/nonexistent/m", "encoder_options": {}, "query_prompt": None, "document_prompt": None}
    return {"format": "longembed-advice/2", "model": "/nonexistent/m", "recommended": recommended, "strategies": [
        {"name": "bm25", "kind": "bm25", "config": {"model": "bm25"}},
        {"name": "pi-4096", "kind": "dense", "config": {**common, "method": "pi", "max_length": 4096,
                                                        "granularity": "document"}},
        {"name": "late-chunks+bm25", "kind": "hybrid", "config": {
            **common, "method": "pi", "max_length": 4096, "granularity": "chunks", "chunking": "tokens:64",
            "late": True, "fuse": "bm25", "fuse_method": "rrf", "fuse_k": 60}},
    ]}


def edited(recommended: str, changes: list[tuple[str, str, Any]]) -> dict[str, Any]:
    data = advice(recommended)
    record = next(s for s in data["strategies"] if s["name"] == recommended)
    for where, key, value in changes:
        target = {"config": record["config"], "record": record, "top": data}[where]
        if value == "<drop>":
            target.pop(key, None)
        elif key == "model" and isinstance(value, str) and value not in ("", "bm25"):
            target[key] = f"/nonexistent/{value}"  # a missing folder: never a hub download
        else:
            target[key] = value
    return data


@FUZZ
@given(recommended=st.sampled_from(NAMES), changes=edits)
def test_any_edit_of_advice_json_builds_or_fails_in_one_line_leaving_nothing(tmp_path_factory, recommended: str,
                                                                             changes: list) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    (root / "a.txt").write_text("the tides of the sea")
    path = root / "advice.json"
    path.write_text(json.dumps(edited(recommended, changes)))
    strategy = None
    try:
        strategy = strategy_from_advice(path)[1]
    except UserError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc), str(exc)
    index = root / "new" / "index"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["index", str(root / "a.txt"), "--index", str(index), "--from-advice", str(path)])
    assert code in (0, 2)
    assert (code == 0) == (strategy is not None and strategy.lexical_only), err.getvalue()  # a dense model is missing
    if code == 2:
        assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("longembed index: error: ")
        assert not (root / "new").exists(), sorted(p.name for p in index.iterdir())
    else:
        assert (index / "chunks.lance").is_dir()
