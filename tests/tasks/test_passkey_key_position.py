"""``tasks.passkey.key_sentence_offset`` and ``benchmarks/passkey_key_position.py``: the key offsets
are where the asked person's key sentence is, and every scored query lands in exactly one offset bin."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_benchmark_script

from longembed.evaluation.runner import evaluate_model
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks.passkey import PasskeyTask, key_sentence_offset


@pytest.fixture(scope="module")
def script() -> ModuleType:
    """benchmarks/passkey_key_position.py, imported as a module."""
    return load_benchmark_script("passkey_key_position")


@pytest.mark.parametrize("length", [256, 1024])
def test_the_offset_is_where_the_asked_persons_key_sentence_starts(script: ModuleType, length: int) -> None:
    task = PasskeyTask(queries_per_length=60)
    data = task.load(None, length)
    offsets = script.key_offsets(task, None, length)
    assert set(offsets) == set(data.queries)
    spread = set()
    for query, offset in offsets.items():
        name = re.fullmatch(r"What is the pass key for (.+)\?", data.queries[query]).group(1)
        words = data.corpus[next(iter(data.qrels[query]))].split()
        assert " ".join(words[offset:]).startswith(f"{name}'s pass key is ")  # the words the offset points at
        assert f"{name}'s" not in " ".join(words[:offset])  # and nothing of the key before them
        spread.add(offset)
    assert len(spread) > 10  # keys at many places: the offsets are read per document, not fixed


def test_every_query_lands_in_one_bin(script: ModuleType, tmp_path: Path) -> None:
    run = evaluate_model(BM25Model(), ["passkey"], lengths=[256, 512], output_dir=tmp_path / "bm25",
                         show_progress=False, log=None, estimate=False)
    rows = script.scores_by_offset(run, None, [256, 512])
    assert sum(row["queries"] for row in rows) == 100
    bins = [f"{lo}-{hi}" for lo, hi in zip(script.OFFSET_EDGES, script.OFFSET_EDGES[1:], strict=False)]
    order = [bins.index(row["words"]) for row in rows]
    assert order == sorted(set(order))  # each bin once, in order of offset
    with pytest.raises(ValueError, match="no passkey scores at length 1024"):
        script.scores_by_offset(run, None, [1024])


def test_a_key_at_the_very_start_has_offset_zero_and_a_non_passkey_text_is_refused() -> None:
    assert key_sentence_offset("Ann Lee's pass key is 12345. Remember it.\nThe grass is green.") == 0
    assert key_sentence_offset("The grass is green. The sky\nAnn Lee's pass key is 1.\nHere we go.") == 6
    with pytest.raises(ValueError, match="not a passkey document"):
        key_sentence_offset("The grass is green.")
