"""Task folders in a benchmark run (evaluate_model with task_dirs): which tasks run, what the run
records, and QMSum written out as a task folder scoring exactly as the built-in qmsum task."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA_DIR, require_data
from encoder_fakes import FakeEncoderMembers

from longembed.config import EncoderConfig
from longembed.evaluation.runner import evaluate_model
from longembed.results import RunResults
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import RetrievalData, get_task, write_task_dir
from longembed.tasks.base import WORDS_PER_TOKEN

OLD_RESULTS = Path(__file__).resolve().parents[1] / "results" / "fixtures" / "results_9ebbcc4"


class WordHashEncoder(FakeEncoderMembers):
    """Bag-of-words vectors hashed into 256 dimensions: a cheap, deterministic encoder that goes
    through the runner's encoder path (the cache wrapper, prompts, token counts: words / 0.75)."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text('{"model_type": "word-hash"}')
        self.config = EncoderConfig(model=str(folder))

    def encode(self, texts: Sequence[str], batch_size: int = 32, normalize_embeddings: bool | None = None,
               show_progress_bar: bool = False, prompt: str | None = None,
               temperature: float | None = None) -> np.ndarray:
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in ((prompt or "") + text).lower().split():
                out[i, zlib.crc32(word.encode()) % 256] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def run(model: Any, tmp_path: Path, name: str, **options: Any) -> RunResults:
    options.setdefault("use_cache", False)
    return evaluate_model(model, output_dir=tmp_path / name, show_progress=False, log=None, estimate=False, **options)


def small_task(root: Path) -> Path:
    """A BEIR folder: 6 documents, 3 judged queries, one query of another split (no judgements)."""
    data = RetrievalData(
        corpus={f"d{i}": f"a note about {w} and more {w}" for i, w in enumerate(
            ["volcano", "violin", "penguin", "bitcoin", "tomato", "glacier"])},
        queries={"q0": "volcano", "q1": "penguin", "q2": "glacier"},
        qrels={"q0": {"d0": 1}, "q1": {"d2": 1, "d3": 0}, "q2": {"d5": 2}},
    )
    folder = write_task_dir(data, root)
    with open(folder / "queries.jsonl", "a") as handle:
        handle.write(json.dumps({"_id": "q-train", "text": "tomato"}) + "\n")
    return folder


# --------------------------------------------------------------------------- which tasks run
def test_task_dirs_alone_run_alone_and_with_tasks_both_run(tmp_path: Path) -> None:
    folder = small_task(tmp_path / "mine")
    alone = run(BM25Model(), tmp_path, "alone", task_dirs=[folder])
    assert list(alone.tasks) == ["mine"] and alone.config.tasks == ["mine"] and not alone.skipped
    both = run(BM25Model(), tmp_path, "both", tasks=["passkey"], lengths=[256], task_dirs=[folder],
               task_names=["notes"])
    assert list(both.tasks) == ["passkey", "notes"] and both.tasks["notes"].score == alone.tasks["mine"].score


@pytest.mark.parametrize(("options", "message"), [
    ({"task_names": ["x"]}, r"--task-name given 1 time\(s\) for 0 --task-dir"),
    ({"task_dirs": ["F"], "task_names": ["passkey"]}, "'passkey' .* is a built-in task's"),
    ({"task_dirs": ["F", "F"]}, "'mine' is given to .* and to"),
    ({"task_dirs": ["F"], "task_names": ["a", "b"]}, "--task-name given 2 time"),
])
def test_task_dir_options_are_checked(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    folder = small_task(tmp_path / "mine")
    options = {k: [folder if v == "F" else v for v in values] for k, values in options.items()}
    with pytest.raises(ValueError, match=message):
        run(BM25Model(), tmp_path, "r", **options)


# --------------------------------------------------------------------------- what the run records
def test_the_run_records_each_task_folder(tmp_path: Path) -> None:
    folder = small_task(tmp_path / "mine")
    lines: list[str] = []
    results = evaluate_model(BM25Model(), task_dirs=[folder], output_dir=tmp_path / "r", log=lines.append,
                             show_progress=False, estimate=False)
    record = results.config.task_dirs["mine"]
    assert record["path"] == str(folder.resolve()) and record["qrels"] == "qrels/test.tsv"
    assert (record["documents"], record["queries"], record["queries_left_out"]) == (6, 3, 1)
    assert record["left_out_by_reason"] == {"unjudged": 1, "no_relevant": 0}
    assert sorted(record["sha256"]) == ["corpus.jsonl", "qrels/test.tsv", "queries.jsonl"]
    assert any("mine: 6 documents, 3 queries (1 left out: 1 without judgements" in line for line in lines)
    on_disk = json.loads((tmp_path / "r" / "results.json").read_text())
    assert on_disk["config"]["task_dirs"] == {"mine": record}
    assert RunResults.load(tmp_path / "r") == results
    assert results.tasks["mine"].counts.queries == 3 and results.tasks["mine"].score == 100.0


def test_runs_without_task_folders_write_and_read_none() -> None:
    """Old results files (no task_dirs) load with none, and a run without them writes no key."""
    for name in ("hash", "bm25"):
        old = RunResults.load(OLD_RESULTS / name)
        assert old.config.task_dirs == {} and "task_dirs" not in old.to_dict()["config"]


# --------------------------------------------------------------------------- QMSum as a task folder
@pytest.fixture(scope="module")
def qmsum_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_data("qmsum")
    data = get_task("qmsum").load(DATA_DIR)
    root = tmp_path_factory.mktemp("qmsum-folders")
    return {layout: write_task_dir(data, root / layout, layout=layout) for layout in ("beir", "longembed")}


def _scores(results: RunResults, name: str) -> tuple[Any, ...]:
    task = results.tasks[name]  # passage hit@1 included: the folder's answers.jsonl holds QMSum's spans
    return task.score, task.metrics, task.counts


@pytest.mark.slow
def test_qmsum_as_a_task_folder_scores_as_the_builtin_task_with_bm25(tmp_path: Path, qmsum_folders) -> None:
    """On a sample of QMSum's queries (--max-queries draws the same ids from the folder and from the task: a
    query the two read differently would show; every query scored took 4 minutes of the suite)."""
    sample = {"max_queries": 300, "sample_seed": 1}
    builtin = run(BM25Model(), tmp_path, "builtin", tasks=["qmsum"], data_dir=DATA_DIR, **sample)
    folders = run(BM25Model(), tmp_path, "folders", task_dirs=list(qmsum_folders.values()),
                  task_names=list(qmsum_folders), **sample)
    assert builtin.tasks["qmsum"].counts.queries == 300  # of 1527, with the documents they judge (counts compared)
    whole = get_task("qmsum").load(DATA_DIR)
    assert (len(whole.corpus), len(whole.queries)) == (197, 1527)
    for layout in qmsum_folders:
        assert _scores(folders, layout) == _scores(builtin, "qmsum")
        assert folders.config.task_dirs[layout]["queries_left_out"] == 0


@pytest.mark.slow
def test_qmsum_as_a_task_folder_scores_as_the_builtin_task_with_an_encoder(tmp_path: Path, qmsum_folders) -> None:
    """Through the encoder path too; documents over max_length (512; words / 0.75 tokens) are counted."""
    encoder = WordHashEncoder(tmp_path / "model")
    builtin = run(encoder, tmp_path, "builtin", tasks=["qmsum"], data_dir=DATA_DIR)
    folder = run(encoder, tmp_path, "folder", task_dirs=[qmsum_folders["beir"]], task_names=["mine"])
    assert _scores(folder, "mine") == _scores(builtin, "qmsum")
    documents = get_task("qmsum").load(DATA_DIR).corpus.values()
    over = sum(round(len(text.split()) / WORDS_PER_TOKEN) > 512 for text in documents)
    assert folder.tasks["mine"].counts.documents_truncated == over > 0


# --------------------------------------------------------------------------- --max-queries' sample
def test_a_sampled_run_scores_its_sample_records_it_and_pairs_only_with_the_same_sample(tmp_path: Path) -> None:
    from longembed.results.compare import compare

    folder = small_task(tmp_path / "mine")
    full = run(BM25Model(), tmp_path, "full", task_dirs=[folder])
    sampled = run(BM25Model(), tmp_path, "sampled", task_dirs=[folder], max_queries=2, sample_seed=4)
    again = run(BM25Model(), tmp_path, "again", task_dirs=[folder], max_queries=2, sample_seed=4)
    assert len(full.tasks["mine"].per_query) == 3
    kept = sampled.tasks["mine"].per_query
    assert 0 < len(kept) <= 2 and kept == again.tasks["mine"].per_query
    assert set(kept) < set(full.tasks["mine"].per_query)
    assert sampled.config.task_options == {"max_queries": 2, "sample_seed": 4} and full.config.task_options == {}
    assert RunResults.load(tmp_path / "sampled").config.task_options["max_queries"] == 2
    compare([tmp_path / "sampled", tmp_path / "again"])  # the same sample pairs up
    with pytest.raises(ValueError, match=r"task options differ \(max_queries: the default vs 2"):
        compare([tmp_path / "full", tmp_path / "sampled"])
