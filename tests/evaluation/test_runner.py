"""Tests of the benchmark runner (longembed.evaluation.runner) and the ``eval`` subcommand."""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA_DIR, missing, require_data
from encoder_fakes import FakeEncoderMembers

from longembed.config import EncoderConfig
from longembed.evaluation.runner import evaluate_model, resolve_lengths
from longembed.results import RunResults
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import RetrievalData, TaskMetadata

METRIC_NAMES = {"accuracy@1", "ndcg@10", "mrr@10", "recall@100"}


# --------------------------------------------------------------------------- fixtures and fakes
class TinyTask:
    """A real-style task (no lengths) with 12 topical documents and 6 queries."""

    metadata = TaskMetadata(
        name="tiny", description="tiny test task", main_score="ndcg@10", lengths=None, source="tests"
    )
    TOPICS = (
        "volcano lava eruption",
        "violin orchestra concerto",
        "penguin antarctic ice",
        "bitcoin ledger mining",
        "tomato garden harvest",
        "glacier moraine valley",
        "sonnet poem verse",
        "rocket orbit launch",
        "cheese dairy cellar",
        "desert dune camel",
        "coral reef fish",
        "chess opening gambit",
    )

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        corpus = {
            f"d{i:02d}": f"A long note about {t}. " + f"More on {t}. " * (i % 4 + 1)
            for i, t in enumerate(self.TOPICS)
        }
        queries = {f"q{i}": f"tell me about {self.TOPICS[2 * i].split()[0]}" for i in range(6)}
        qrels = {f"q{i}": {f"d{2 * i:02d}": 1} for i in range(6)}
        return RetrievalData(corpus, queries, qrels).validate()


class MissingDataTask:
    metadata = TaskMetadata(
        name="ghost", description="", main_score="ndcg@10", lengths=None, source="nowhere"
    )

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        from longembed.tasks import TaskDataMissing

        raise TaskDataMissing("task 'ghost': no data anywhere. Get it from nowhere.")


class HashEncoder(FakeEncoderMembers):
    """Bag-of-words hashing 'model' with the LongContextEncoder interface: fast and deterministic.

    The temperature changes the vectors (text-seeded noise scaled by 1 - tau), so that a wrong
    temperature shows up in the scores. Every call is recorded.
    """

    def __init__(self, folder: Path, per_call_temperature: bool = True, **options: Any):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text('{"model_type": "hash"}')
        self.config = EncoderConfig(model=str(folder), **options)
        self.prompts = {"query": "search_query: ", "document": "search_document: "}
        self.calls: list[dict[str, Any]] = []
        if not per_call_temperature:
            self.encode = self._encode_without_temperature  # type: ignore[method-assign]

    @property
    def n_texts(self) -> int:
        return sum(c["n"] for c in self.calls)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        prompt: str | None = None,
        temperature: float | None = None,
    ) -> np.ndarray:
        tau = self.config.temperature if temperature is None else temperature
        self.calls.append({"n": len(texts), "prompt": prompt, "temperature": temperature})
        out = np.zeros((len(texts), 512), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in ((prompt or "") + text).lower().replace(".", " ").replace("?", " ").split():
                out[i, zlib.crc32(word.encode()) % 512] += 1.0
            noise = np.random.default_rng(zlib.crc32(text.encode())).normal(size=512)
            out[i] += 3.0 * (1.0 - tau) * noise.astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def _encode_without_temperature(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool = False,
        prompt: str | None = None,
    ) -> np.ndarray:
        return HashEncoder.encode(self, texts, batch_size, normalize_embeddings, show_progress_bar, prompt)


class Interrupting:
    """Wraps an encoder; raises (like a kill) once more than ``fail_after`` texts were asked for."""

    def __init__(self, inner: Any, fail_after: int | None = None):
        self.inner = inner
        self.fail_after = fail_after
        self.n_texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        if self.fail_after is not None and self.n_texts + len(texts) > self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        self.n_texts += len(texts)
        return self.inner.encode(texts, **kwargs)


def run(model: Any, tmp_path: Path, name: str = "run", **kwargs: Any) -> RunResults:
    kwargs.setdefault("cache_dir", tmp_path / "cache")
    kwargs.setdefault("estimate", False)
    kwargs.setdefault("log", None)
    return evaluate_model(model, output_dir=tmp_path / name, show_progress=False, **kwargs)


def scores_of(results: RunResults) -> dict[str, Any]:
    return {name: (t.score, t.metrics, t.by_length) for name, t in results.tasks.items()}


@pytest.fixture(scope="module")
def minilm():
    from longembed import load_encoder

    try:
        return load_encoder("default")
    except ImportError as exc:  # pragma: no cover - the packaged model is a test dependency
        missing(str(exc))


# --------------------------------------------------------------------------- results.json
def test_bm25_passkey_results_structure(tmp_path: Path) -> None:
    """results.json round-trips to the returned results and holds every documented field."""
    began = time.perf_counter()
    results = run(BM25Model(), tmp_path, tasks=["passkey"], lengths=[256, 512])
    elapsed = time.perf_counter() - began
    on_disk = RunResults.load(tmp_path / "run")
    assert on_disk == results
    raw = json.loads((tmp_path / "run" / "results.json").read_text())
    assert raw["format"] == "longembed-results/1" and raw["complete"] is True
    assert raw["tasks"]["passkey"]["by_length"] == {"256": 100.0, "512": 100.0}  # JSON keys are strings
    assert on_disk.complete is True

    passkey = on_disk.tasks["passkey"]
    assert passkey.main_score == "accuracy@1"
    assert passkey.score == 100.0
    assert passkey.by_length == {256: 100.0, 512: 100.0}
    assert set(passkey.metrics) >= METRIC_NAMES
    assert all(0.0 <= v <= 100.0 for v in passkey.metrics.values())
    assert passkey.metrics["accuracy@1"] == 100.0
    assert passkey.counts.documents == 200 and passkey.counts.queries == 100
    assert set(passkey.lengths) == {256, 512}
    assert passkey.lengths[512].counts.documents == 100
    assert passkey.lengths[512].score == passkey.lengths[512].metrics["accuracy@1"] == 100.0
    per_length = [passkey.lengths[n].wall_time_s for n in (256, 512)]
    assert all(t > 0 for t in per_length) and passkey.wall_time_s == pytest.approx(sum(per_length), abs=1e-9)
    assert passkey.wall_time_s <= on_disk.wall_time_s <= elapsed + 5e-4  # the task's time within the run's
    assert passkey.cache is None  # BM25: no cache

    config = on_disk.config
    assert config.encoder["model"] == "bm25"
    assert {"k1", "b", "stemmer"} <= set(config.encoder)
    assert config.tasks == ["passkey"] and config.lengths == [256, 512]
    assert on_disk.average == 100.0 and on_disk.average_tasks == ["passkey"]
    assert "lengths 256, 512 only" in on_disk.average_note
    assert {"longembed", "torch", "transformers", "python", "model"} <= set(on_disk.versions)


def test_old_results_files_still_load() -> None:
    """A results.json written by the previous (dict-based) runner loads into the typed results."""
    old = {
        "format": "longembed-results/1", "created": "2026-11-20T10:00:00+00:00", "complete": True,
        "config": {"encoder": {"model": "bm25"}, "resolved": {}, "tasks": ["passkey"], "lengths": [256],
                   "data_dir": None, "prompts": None, "prompt_source": None, "temperatures": None,
                   "batch_size": None, "similarity": "bm25", "cache_dir": None, "cache_namespaces": {}},
        "versions": {"model": {"name": "bm25"}}, "estimate": None, "average": 100.0,
        "average_tasks": ["passkey"], "average_note": "", "skipped": {}, "wall_time_s": 1.0,
        "tasks": {"passkey": {
            "main_score": "accuracy@1", "score": 100.0, "metrics": {"accuracy@1": 100.0},
            "by_length": {"256": 100.0},
            "lengths": {"256": {"score": 100.0, "metrics": {"accuracy@1": 100.0}, "counts": {
                "documents": 100, "queries": 50, "document_tokens_mean": 250.0, "document_tokens_max": 256,
                "tokens_counted": "words / 0.75"}, "cache": {}, "encode_time_s": 0.0, "wall_time_s": 0.5}},
            "counts": {"documents": 100, "queries": 50, "document_tokens_max": 256, "document_tokens_mean": 250.0,
                       "tokens_counted": "words / 0.75"},
            "cache": {}, "encode_time_s": 0.0, "wall_time_s": 0.5}},
    }
    results = RunResults.from_dict(old)
    assert results.tasks["passkey"].by_length == {256: 100.0}
    assert results.tasks["passkey"].lengths[256].counts.documents == 100
    assert RunResults.from_dict(json.loads(json.dumps(results.to_dict()))) == results


def test_a_finished_results_json_is_never_lost(tmp_path: Path) -> None:
    """A new run into a folder with a finished results.json: while it runs (or if killed) the old file
    stays; when it finishes, the old one is kept under a new name, for a rerun of the same
    configuration too (its timings are what the encoding cost; a rerun from the cache has none)."""
    first = run(BM25Model(), tmp_path, tasks=["passkey"], lengths=[256])
    folder = tmp_path / "run"
    assert RunResults.load(folder) == first

    killed = Interrupting(HashEncoder(tmp_path / "m"), fail_after=0)
    with pytest.raises(KeyboardInterrupt):
        run(killed, tmp_path, tasks=["passkey"], lengths=[256])
    assert RunResults.load(folder) == first  # untouched
    incomplete = RunResults.load(folder / "results.incomplete.json")
    assert incomplete.complete is False and incomplete.config.encoder["model"] != "bm25"

    second = run(HashEncoder(tmp_path / "m"), tmp_path, tasks=["passkey"], lengths=[256])
    assert RunResults.load(folder) == second
    assert not (folder / "results.incomplete.json").exists()
    backups = sorted(folder.glob("results.2*.json"))
    assert len(backups) == 1 and RunResults.load(backups[0]) == first

    rerun = run(HashEncoder(tmp_path / "m"), tmp_path, tasks=["passkey"], lengths=[256])
    assert RunResults.load(folder) == rerun
    kept = [RunResults.load(path) for path in folder.glob("results.2*.json")]
    assert len(kept) == 2 and first in kept and second in kept  # the same experiment, from the cache, too
    assert rerun.tasks["passkey"].lengths[256].per_query == second.tasks["passkey"].lengths[256].per_query


def test_missing_data_is_skipped_and_recorded(tmp_path: Path) -> None:
    """A task without data is skipped, named with the reason, and left out of the average."""
    results = run(
        BM25Model(),
        tmp_path,
        tasks=["passkey", MissingDataTask(), "qmsum"],
        lengths=[256],
        data_dir=tmp_path / "empty",
    )
    assert list(results.tasks) == ["passkey"]
    assert set(results.skipped) == {"ghost", "qmsum"}
    assert "Get it from nowhere" in results.skipped["ghost"]
    assert "qmsum" in results.skipped["qmsum"]
    assert results.average_tasks == ["passkey"]
    assert RunResults.load(tmp_path / "run").skipped == results.skipped


def test_unknown_task_and_length_are_errors() -> None:
    """Unknown task names and non-LongEmbed lengths are clear errors."""
    with pytest.raises(ValueError, match="unknown task"):
        evaluate_model(BM25Model(), ["passkee"], log=None)
    with pytest.raises(ValueError, match="not LongEmbed lengths"):
        resolve_lengths([300])
    assert resolve_lengths(None) == [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def test_average_is_the_mean_of_task_scores(tmp_path: Path) -> None:
    """The average is the unweighted mean of the task scores it names."""
    results = run(HashEncoder(tmp_path / "m"), tmp_path, tasks=["passkey", TinyTask()], lengths=[256])
    scores = [results.tasks[t].score for t in ("passkey", "tiny")]
    assert results.average == pytest.approx(sum(scores) / 2, abs=1e-3)
    assert results.average_tasks == ["passkey", "tiny"]
    tiny = results.tasks["tiny"]
    assert tiny.by_length is None and tiny.main_score == "ndcg@10"
    assert tiny.score == tiny.metrics["ndcg@10"]
    assert tiny.score > 80  # the hashing model finds the topical documents


def test_average_note_names_missing_benchmark_tasks_only_for_a_partial_benchmark(tmp_path: Path) -> None:
    partial = run(HashEncoder(tmp_path / "m"), tmp_path, name="partial", tasks=["passkey", TinyTask()], lengths=[256])
    assert "not included: needle" in partial.average_note
    own = run(HashEncoder(tmp_path / "m"), tmp_path, name="own", tasks=[TinyTask()])
    assert own.average_note == "unweighted mean of 1 task score(s): tiny"


# --------------------------------------------------------------------------- prompts and temperatures
def test_model_prompts_by_default_and_overrides(tmp_path: Path) -> None:
    """Queries and documents get the model's prompts unless the arguments override them."""
    encoder = HashEncoder(tmp_path / "m")
    results = run(encoder, tmp_path, tasks=[TinyTask()])
    assert results.config.prompts == {"query": "search_query: ", "document": "search_document: "}
    assert results.config.prompt_source == {"query": "model", "document": "model"}
    assert {c["prompt"] for c in encoder.calls} == {"search_query: ", "search_document: "}
    assert sum(c["n"] for c in encoder.calls if c["prompt"] == "search_query: ") == 6

    encoder = HashEncoder(tmp_path / "m")
    results = run(encoder, tmp_path, "other", tasks=[TinyTask()], query_prompt="", document_prompt="passage: ")
    assert results.config.prompts == {"query": "", "document": "passage: "}
    assert {c["prompt"] for c in encoder.calls} == {"", "passage: "}


def test_separate_temperatures_reach_encode_and_the_cache_key(tmp_path: Path) -> None:
    """A per-side tau reaches encode() and its side's cache key only."""
    encoder = HashEncoder(tmp_path / "m")
    base = run(encoder, tmp_path, "base", tasks=[TinyTask()])
    assert all(c["temperature"] is None for c in encoder.calls)  # the encoder's own tau: no override

    encoder = HashEncoder(tmp_path / "m")
    cooled = run(encoder, tmp_path, "cooled", tasks=[TinyTask()], query_temperature=0.5)
    assert cooled.config.temperatures == {"query": 0.5, "document": 1.0}
    by_prompt = {c["prompt"]: c["temperature"] for c in encoder.calls}
    assert by_prompt == {"search_query: ": 0.5}  # documents came from the cache, queries were re-encoded
    namespaces = cooled.config.cache_namespaces
    assert namespaces["documents"] == base.config.cache_namespaces["documents"]
    assert namespaces["queries"] != base.config.cache_namespaces["queries"]
    assert cooled.tasks["tiny"].metrics != base.tasks["tiny"].metrics


def test_temperature_override_needs_an_encode_that_takes_it(tmp_path: Path) -> None:
    """A tau other than the encoder's needs encode(temperature=); a bad tau is refused."""
    encoder = HashEncoder(tmp_path / "m", per_call_temperature=False)
    with pytest.raises(ValueError, match="no temperature= argument"):
        run(encoder, tmp_path, tasks=[TinyTask()], document_temperature=0.8)
    with pytest.raises(ValueError, match=r"query temperature must be in \(0, 1\]"):
        run(HashEncoder(tmp_path / "m"), tmp_path, tasks=[TinyTask()], query_temperature=float("nan"))
    # the encoder's configured temperature needs no override
    run(
        HashEncoder(tmp_path / "m2", per_call_temperature=False, temperature=0.8),
        tmp_path,
        tasks=[TinyTask()],
        document_temperature=0.8,
    )


# --------------------------------------------------------------------------- cache
def test_cache_key_ignores_on_overflow_but_not_max_length(tmp_path: Path) -> None:
    """What cannot change a vector shares cache entries; what can (max_length, weights) does not."""
    first = HashEncoder(tmp_path / "m")
    run(first, tmp_path, "a", tasks=[TinyTask()])
    assert first.n_texts == 18

    same = HashEncoder(tmp_path / "m", on_overflow="error")
    run(same, tmp_path, "b", tasks=[TinyTask()])
    assert same.n_texts == 0

    longer = HashEncoder(tmp_path / "m", method="pi", max_length=1024)
    run(longer, tmp_path, "c", tasks=[TinyTask()])
    assert longer.n_texts == 18

    (tmp_path / "m" / "config.json").write_text('{"model_type": "hash", "changed": true}')  # other weights
    changed = HashEncoder.__new__(HashEncoder)
    changed.__dict__.update(first.__dict__, calls=[])
    run(changed, tmp_path, "d", tasks=[TinyTask()])
    assert changed.n_texts == 18

    uncached = HashEncoder(tmp_path / "m")
    results = run(uncached, tmp_path, "e", tasks=[TinyTask()], use_cache=False)
    assert uncached.n_texts == 18 and results.config.cache_dir is None


@pytest.mark.slow
def test_resume_after_kill_matches_uninterrupted_run(tmp_path: Path, minilm) -> None:
    """A killed run resumes from its cached chunks and ends with the uninterrupted run's scores."""
    tasks = [TinyTask(), "passkey"]
    reference = run(
        minilm,
        tmp_path,
        "reference",
        tasks=tasks,
        lengths=[256],
        cache_dir=tmp_path / "cache-ref",
        chunk_size=16,
    )

    killed = Interrupting(minilm, fail_after=40)
    with pytest.raises(KeyboardInterrupt):
        run(killed, tmp_path, "resumed", tasks=tasks, lengths=[256], chunk_size=16)
    partial = RunResults.load(tmp_path / "resumed")
    assert partial.complete is False and list(partial.tasks) == ["tiny"]

    resumed = Interrupting(minilm)
    results = run(resumed, tmp_path, "resumed", tasks=tasks, lengths=[256], chunk_size=16)
    assert results.tasks["passkey"].cache.documents_cached == 16  # one whole chunk was saved
    assert resumed.n_texts == 100 - 16 + 50
    assert scores_of(RunResults.load(tmp_path / "resumed")) == scores_of(reference)

    warm = Interrupting(minilm)
    again = run(warm, tmp_path, "warm", tasks=tasks, lengths=[256], chunk_size=16, estimate=True)
    assert warm.n_texts == 0
    assert scores_of(again) == scores_of(reference)
    assert again.estimate.documents_cached == again.estimate.documents == 112
    assert again.estimate.seconds is None  # nothing to encode: no warm-up


# --------------------------------------------------------------------------- the real model
def _independent_hash(path: Path) -> str:
    """sha256 of the whole file up to 2 MiB, else of its first and last MiB (computed here)."""
    data = path.read_bytes()
    part = data if len(data) <= 2 << 20 else data[: 1 << 20] + data[-(1 << 20):]
    return hashlib.sha256(part).hexdigest()


@pytest.mark.slow
def test_minilm_results_versions_and_estimate(tmp_path: Path, minilm) -> None:
    """A real run records every model file's size and hash, the resolved settings and the estimate."""
    results = run(minilm, tmp_path, tasks=[TinyTask()], estimate=True)
    model = results.versions["model"]
    folder = Path(model["path"])
    on_disk = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                     if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    assert sorted(model["files"]) == on_disk and "model.safetensors" in on_disk
    for name, entry in model["files"].items():
        assert entry["size"] == (folder / name).stat().st_size
        assert entry["sha256"] == _independent_hash(folder / name)
    assert model["files"]["model.safetensors"]["hashed"] == "sha256 of first and last MiB"
    assert results.config.encoder == minilm.config.to_dict()
    assert results.config.resolved["max_length"] == 512
    estimate = results.estimate
    texts = [*TinyTask().load(None).corpus.values(), *TinyTask().load(None).queries.values()]
    lengths = [len(minilm.tokenizer(t)["input_ids"]) for t in texts]  # every text fits in Lt = 512
    assert estimate.documents == 12 and estimate.documents_cached == 0
    assert estimate.tokens_to_encode == sum(lengths) and max(lengths) < 512
    # every text under Lt: one warm-up at the longest text's length (no longer than the run's), and a cost
    # linear in n through it (estimate.py)
    (warmup,) = estimate.cost_model["warmup"]
    longest = warmup["tokens"]
    assert longest == max(lengths) and warmup["seconds_per_sequence"] > 0
    assert estimate.cost_model["a"] == pytest.approx(warmup["seconds_per_sequence"] / longest)
    assert estimate.cost_model["b"] == estimate.cost_model["c"] == 0
    expected = sum(warmup["seconds_per_sequence"] / longest * n for n in lengths)  # t(n) per text, summed
    assert estimate.seconds == pytest.approx(expected, abs=0.05 + 1e-9)  # rounded to 0.1 s
    tiny = results.tasks["tiny"]
    assert tiny.counts.documents_truncated == 0
    assert tiny.counts.tokens_counted == "tokenizer"
    assert tiny.score > 80


@pytest.mark.slow
def test_query_temperature_reaches_the_real_encoder(tmp_path: Path, minilm) -> None:
    """The cached query vectors are the encoder's vectors at the query tau and prompt."""
    from longembed.evaluation.cache.storage import EmbeddingCache, text_key

    results = run(minilm, tmp_path, tasks=[TinyTask()], query_temperature=0.5, query_prompt="q: ")
    key = results.config.cache_namespaces["queries"]
    cache = EmbeddingCache(tmp_path / "cache")
    fingerprint = json.loads((cache.root / key / "fingerprint.json").read_text())
    namespace = cache.namespace(fingerprint)
    assert namespace.key == key  # the stored fingerprint reproduces its key
    assert fingerprint["temperature"] == 0.5 and fingerprint["prompt"] == "q: "
    query = TinyTask().load(None).queries["q0"]
    cached = namespace.load("tiny/all/queries").vectors[text_key(query)]
    direct = minilm.encode([query], prompt="q: ", temperature=0.5, normalize_embeddings=True)[0]
    plain = minilm.encode([query], prompt="q: ", normalize_embeddings=True)[0]
    np.testing.assert_allclose(cached, direct, atol=1e-6)
    assert not np.allclose(cached, plain, atol=1e-3)


@pytest.mark.slow
def test_bm25_on_real_data(tmp_path: Path) -> None:
    """BM25 on SQuALITY: all 127 stories, a high nDCG@10, marked as a stand-in."""
    require_data("squality")
    results = run(BM25Model(), tmp_path, tasks=["squality"], data_dir=DATA_DIR)
    squality = results.tasks["squality"]
    assert squality.counts.documents == 127
    assert squality.main_score == "ndcg@10" and squality.score > 80
    assert squality.stand_in_for


# --------------------------------------------------------------------------- CLI
def test_cli_eval_bm25(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``eval --model bm25`` writes results.json and prints the table; ignored flags are all named."""
    from longembed.cli.main import main

    out = tmp_path / "bm25"
    argv = ["eval", "--model", "bm25", "--tasks", "passkey", "--lengths", "256", "--output", str(out),
            "--attention-scale", "logn", "--scale", "per_document", "--method", "pi", "--temperature", "0.5"]
    assert main(argv) == 0
    results = RunResults.load(out)
    assert results.tasks["passkey"].by_length == {256: 100.0}
    printed = capsys.readouterr().out
    assert "passkey" in printed and "100.00" in printed and "results.json" in printed
    ignored = next(line for line in printed.splitlines() if "ignored for --model bm25" in line)
    for flag in ("--method", "--attention-scale", "--scale", "--temperature"):
        assert flag in ignored


def test_cli_eval_without_runnable_task_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No runnable task: exit 1 with the skip recorded; a bad length: exit 2."""
    from longembed.cli.main import main

    monkeypatch.delenv("LONGEMBED_DATA_DIR", raising=False)
    assert main(["eval", "--model", "bm25", "--tasks", "qmsum", "--output", str(tmp_path / "r")]) == 1
    assert "qmsum" in RunResults.load(tmp_path / "r").skipped
    assert main(["eval", "--model", "bm25", "--lengths", "300", "--output", str(tmp_path / "r")]) == 2


def test_cli_eval_needles_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``eval --needles FILE`` with 7 needles: 7 documents and 7 queries per length."""
    from longembed.cli.main import main

    needles = tmp_path / "needles.jsonl"
    needles.write_text("\n".join(json.dumps({"fact": f"Quibble {i} is the capital of Zarn {i}.",
                                             "question": f"What is the capital of Zarn {i}?"}) for i in range(7)))
    out = tmp_path / "needle"
    argv = ["eval", "--model", "bm25", "--tasks", "needle", "--lengths", "256", "--needles", str(needles),
            "--data-dir", str(DATA_DIR), "--output", str(out)]
    require_data("paul_graham_essays")  # the needle haystack
    assert main(argv) == 0
    assert "needle: 7 needles from" in capsys.readouterr().out
    counts = RunResults.load(out).tasks["needle"].counts
    assert counts.documents == 7 and counts.queries == 7
    assert main([*argv[:-2], "--tasks", "passkey", "--output", str(tmp_path / "x")]) == 2
    assert "not among --tasks" in capsys.readouterr().err


def test_cli_length_and_list_parsing() -> None:
    """--lengths and --tasks lists: commas or spaces, 4k = 4096; the default output folder."""
    from longembed.cli.options import default_output, parse_length, split_list

    assert split_list(["passkey,needle", "qmsum"]) == ["passkey", "needle", "qmsum"]
    assert [parse_length(x) for x in ("256", "4k", "32K")] == [256, 4096, 32768]
    with pytest.raises(ValueError):
        parse_length("4kb")
    assert default_output("/models/nomic/", "ntk", 8192) == Path("runs/nomic-ntk-8192")
