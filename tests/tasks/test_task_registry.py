"""Tasks register from their own declaration: a toy task declared here, in a test module, is found by
the registry (``get_task``, ``TASKS``, the hub lookup), run by ``evaluate_model`` and titled and tabled
by length in the report, with no other file naming it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from longembed.evaluation.runner import evaluate_model
from longembed.report.tables import by_length_tasks, markdown_report, scores_table, task_title
from longembed.report.write import Run, write_report
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import (
    DEFAULT_TASKS,
    HUB_CONFIGS,
    TASKS,
    RetrievalData,
    TaskMetadata,
    get_task,
    register_task,
    task_metadata,
    unregister_task,
)
from longembed.tasks.base import check_length

TOY_METADATA = TaskMetadata(
    name="toy_colours",
    description="Toy: a colour -> the one document naming it, among four (two lengths).",
    main_score="accuracy@1",
    lengths=(256, 512),
    source="Generated (nothing to read).",
    title="Toy Colours",
)
COLOURS = ("red", "green", "blue", "yellow")


class ToyColoursTask:
    """Four documents, one colour each; the query names a colour. ``seed`` only shows options arrive."""

    metadata = TOY_METADATA

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def load(self, data_dir: Path | None = None, length: int | None = None) -> RetrievalData:
        check_length(TOY_METADATA, length)
        corpus = {f"d{i}": f"this page is about the colour {c} " * (length // 64) for i, c in enumerate(COLOURS)}
        queries = {f"q{i}": f"which page is about {c}" for i, c in enumerate(COLOURS)}
        qrels = {f"q{i}": {f"d{i}": 1} for i in range(len(COLOURS))}
        return RetrievalData(corpus=corpus, queries=queries, qrels=qrels).validate()


REAL_TOY = TaskMetadata(
    name="toy_real", description="Toy real task.", main_score="ndcg@10", lengths=None, source="-",
    hub_config="toy_hub",
)


class ToyRealTask:
    metadata = REAL_TOY

    def load(self, data_dir: Path | None = None, length: int | None = None) -> RetrievalData:
        raise AssertionError("not loaded in these tests")


@pytest.fixture
def toy_tasks() -> Iterator[None]:
    register_task(TOY_METADATA, ToyColoursTask)
    register_task(REAL_TOY, ToyRealTask)
    yield
    unregister_task("toy_colours")
    unregister_task("toy_real")


def test_a_declared_task_is_found_by_name(toy_tasks) -> None:
    assert isinstance(TASKS["toy_colours"], ToyColoursTask)
    assert get_task("toy_colours", seed=3).seed == 3
    assert task_metadata("toy_colours") is TOY_METADATA
    with pytest.raises(ValueError, match="does not take"):
        get_task("toy_colours", bogus=1)
    with pytest.raises(ValueError, match="no hub version"):
        get_task("toy_colours", source="hub")
    assert HUB_CONFIGS["toy_real"] == "toy_hub"
    hub = get_task("toy_real", source="hub")
    assert hub.config == "toy_hub" and hub.metadata.name == "toy_real"


def test_unregistering_forgets_the_task() -> None:
    register_task(TOY_METADATA, ToyColoursTask)
    unregister_task("toy_colours")
    assert "toy_colours" not in TASKS and task_metadata("toy_colours") is None
    with pytest.raises(ValueError, match="unknown task 'toy_colours'"):
        get_task("toy_colours")


def test_a_name_is_registered_once(toy_tasks) -> None:
    register_task(TOY_METADATA, ToyColoursTask)  # the same declaration again (a module imported twice)
    with pytest.raises(ValueError, match="already registered"):
        register_task(TOY_METADATA, ToyRealTask)
    assert isinstance(TASKS["toy_colours"], ToyColoursTask)


def test_report_learns_kind_and_title_from_the_task(toy_tasks) -> None:
    assert task_title("toy_colours") == "Toy Colours"
    assert task_title("toy_real") == "toy_real"  # no title declared: the name
    assert task_title("never_registered") == "never_registered"
    assert by_length_tasks(["qmsum", "toy_real", "toy_colours", "passkey", "never_registered"]) == [
        "toy_colours",
        "passkey",
    ]
    assert task_title("squality") == "SQuALITY (SFD)" and task_title("2wikimqa") == "WQA"
    assert by_length_tasks(DEFAULT_TASKS) == ["passkey", "needle"]


def test_a_declared_task_runs_and_is_reported_by_length(toy_tasks, tmp_path: Path) -> None:
    results = evaluate_model(
        BM25Model(), ["toy_colours"], lengths=[256, 512], output_dir=tmp_path / "run", show_progress=False, log=None
    )
    entry = results.tasks["toy_colours"]
    assert entry.by_length == {256: 100.0, 512: 100.0} and entry.score == 100.0
    runs = [Run(path=tmp_path / "run", results=results, label="bm25")]
    assert "| Toy Colours |" in scores_table(runs).splitlines()[0]
    report = markdown_report(runs)
    assert "## Toy Colours: accuracy@1 (%) by length (tokens)" in report
    written = write_report([tmp_path / "run"], tmp_path / "report")
    assert "toy_colours_by_length" in written
