"""Tests of the TempScale sweep (longembed.evaluation.sweep_runner) and the ``sweep`` subcommand.

Most tests use :class:`PeakEncoder`, a stub whose retrieval quality depends on the temperature in a
known way: the relevant document of a :class:`PeakTask` wins only when the document tau equals the
task's peak. So the right choice on a selection task, and its effect on a scoring task, are known.
"""

from __future__ import annotations

import argparse
import json
import math
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA_DIR, missing, require_data
from encoder_fakes import FakeEncoderMembers

import longembed.evaluation.sweep_runner as sweep_module
from longembed.config import EncoderConfig
from longembed.evaluation.runner import evaluate_model
from longembed.evaluation.spec import EvalSpec
from longembed.evaluation.sweep_runner import (
    NOT_USED_FOR_SELECTION,
    TemperatureCandidate,
    choose,
    parse_candidates,
    sweep_temperature,
)
from longembed.report.sweep_report import write_sweep_report
from longembed.results import RunResults, SweepResults
from longembed.tasks import RetrievalData, TaskMetadata

RANK_2_NDCG = round(100 / math.log2(3), 4)  # nDCG@10 of one relevant document ranked second: 63.093
DIM = 64


# --------------------------------------------------------------------------- fakes
class PeakTask:
    """One query, a decoy and a relevant document that wins only at document tau == ``peak``."""

    def __init__(self, name: str, peak: float):
        self.peak = peak
        self.metadata = TaskMetadata(
            name=name, description="tau-sensitive test task", main_score="ndcg@10", lengths=None, source="tests"
        )
        self.loads = 0

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        self.loads += 1
        corpus = {"relevant": f"peak {self.peak} {self.metadata.name}", "decoy": f"decoy {self.metadata.name}"}
        queries = {"q": f"query {self.metadata.name}"}
        return RetrievalData(corpus, queries, {"q": {"relevant": 1}}).validate()


class PeakEncoder(FakeEncoderMembers):
    """Stub with LongContextEncoder's encode(): vectors depend on the temperature.

    Effective tau = tau x 0.8 ** temperature_decay (a stand-in for the length-aware tau). "query ..."
    -> e0; "decoy ..." -> cosine 0.5 with e0; "peak P ..." -> cosine exp(-((tau_eff - P) / 0.05)^2)
    with e0, so it beats the decoy only when |tau_eff - P| < 0.042. Other texts (passkey, needle):
    bag-of-words hashing. Every encoded text is recorded with the phase of the sweep it came in.
    """

    log: list[tuple[str, str, float]] = []  # (phase, text, tau) across all instances of a test

    def __init__(self, folder: Path, **options: Any):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text('{"model_type": "peak-stub"}')
        self.config = EncoderConfig(model=str(folder), **options)
        self.phase = "?"

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
        effective = tau * 0.8**self.config.temperature_decay
        out = np.zeros((len(texts), DIM), dtype=np.float64)
        for i, text in enumerate(texts):
            PeakEncoder.log.append((PHASE[0], text, tau))
            words = text.split()
            if words[0] == "query":
                out[i, 0] = 1.0
            elif words[0] == "decoy":
                out[i, 0], out[i, 2] = 0.5, math.sqrt(0.75)
            elif words[0] == "peak":
                s = math.exp(-(((effective - float(words[1])) / 0.05) ** 2))
                out[i, 0], out[i, 1] = s, math.sqrt(1 - s * s)
            else:
                for word in text.lower().replace(".", " ").replace("?", " ").split():
                    out[i, 3 + zlib.crc32(word.encode()) % (DIM - 3)] += 1.0
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


PHASE = ["?"]  # the phase the instrumented evaluate_model is in ("select" / "score")


@pytest.fixture(autouse=True)
def _reset_log():
    PeakEncoder.log = []
    PHASE[0] = "?"


class Factory:
    """encoder_factory for sweep_temperature: builds PeakEncoders, records the options of every build."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.builds: list[dict[str, Any]] = []

    def __call__(self, model: str | Path, method: str = "truncate", max_length: int | None = None,
                 **options: Any) -> PeakEncoder:
        self.builds.append({"model": str(model), "method": method, "max_length": max_length, **options})
        return PeakEncoder(self.folder, **options)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Wrap the sweep's evaluate_model: record every call (tasks, taus, encoder) and tag the phase."""
    calls: list[dict[str, Any]] = []

    def recording(model: Any, spec: EvalSpec) -> RunResults:
        names = [t if isinstance(t, str) else t.metadata.name for t in spec.tasks]
        output = spec.output_dir
        phase = Path(output).parent.name if output is not None else "?"
        PHASE[0] = phase
        calls.append({
            "tasks": names,
            "phase": phase,
            "query_temperature": spec.query_temperature,
            "document_temperature": spec.document_temperature,
            "encoder": model,
        })
        return evaluate_model(model, spec)

    monkeypatch.setattr(sweep_module, "evaluate_model", recording)
    return calls


def sweep(tmp_path: Path, factory: Factory | None = None, **kwargs: Any) -> SweepResults:
    kwargs.setdefault("output_dir", tmp_path / "sweep")
    kwargs.setdefault("cache_dir", tmp_path / "cache")
    kwargs.setdefault("lengths", [256])
    return sweep_temperature(
        "stub",
        encoder_factory=factory or Factory(tmp_path / "model"),
        show_progress=False,
        log=None,
        **kwargs,
    )


# --------------------------------------------------------------------------- the protocol
def test_selection_never_evaluates_a_scoring_task(tmp_path: Path, recorder: list[dict[str, Any]]) -> None:
    select, score = PeakTask("pick", 0.7), PeakTask("judge", 1.0)
    candidates = [
        {"temperature": 1.0},
        {"temperature": 0.9},
        {"temperature": 0.7},
        {"query_temperature": 1.0, "document_temperature": 0.8},
        {"temperature": 0.9, "temperature_decay": 1.0, "temperature_reference": 256},
    ]
    result = sweep(tmp_path, candidates=candidates, select_task=select, score_tasks=[score, "passkey"],
                   report_all=True)

    selection = [c for c in recorder if c["phase"] == "select"]
    assert len(selection) == len(candidates)
    assert recorder[: len(candidates)] == selection  # every selection call comes before any scoring call
    assert all(c["tasks"] == ["pick"] for c in selection)
    assert all(c["tasks"] == ["judge", "passkey"] for c in recorder[len(candidates):])
    # with report_all every candidate is scored, but only after all selection runs
    assert len(recorder) == 2 * len(candidates)
    # no text of a scoring task was encoded before scoring began
    selection_texts = {text for phase, text, _ in PeakEncoder.log if phase == "select"}
    assert selection_texts == {"query pick", "peak 0.7 pick", "decoy pick"}
    assert any("judge" in text for phase, text, _ in PeakEncoder.log if phase == "score")
    assert result.chosen["label"] == "tau=0.7"


def test_chosen_is_the_selection_argmax_even_when_scoring_disagrees(tmp_path: Path) -> None:
    # "pick" is best at tau 0.7, "judge" (the scoring task) at tau 1.0: the sweep must not peek.
    result = sweep(
        tmp_path,
        candidates=[{"temperature": t} for t in (1.0, 0.9, 0.8, 0.7, 0.5)],
        select_task=PeakTask("pick", 0.7),
        score_tasks=[PeakTask("judge", 1.0)],
        report_all=True,
    )
    scores = result.selection.scores
    assert scores == {"tau=1.0": RANK_2_NDCG, "tau=0.9": RANK_2_NDCG, "tau=0.8": RANK_2_NDCG,
                      "tau=0.7": 100.0, "tau=0.5": RANK_2_NDCG}
    assert result.chosen["label"] == "tau=0.7"
    assert result.chosen["settings"]["document_temperature"] == 0.7
    assert result.selection.gain_over_baseline == pytest.approx(100.0 - RANK_2_NDCG)

    judge = result.scoring.per_task["judge"]
    assert judge.baseline == 100.0 and judge.chosen == RANK_2_NDCG
    assert judge.delta == pytest.approx(RANK_2_NDCG - 100.0)
    assert result.scoring.average.delta < 0  # honestly reported: the choice hurts here

    # the full table shows tau = 1.0 is best on the scoring task, and is marked as not used
    full = result.all_candidates
    assert full.note == NOT_USED_FOR_SELECTION
    best_on_scoring = max(full.rows, key=lambda r: r.average)
    assert best_on_scoring.label == "tau=1.0" and not best_on_scoring.chosen


def test_per_side_candidate_and_ties_prefer_least_change(tmp_path: Path) -> None:
    # only the document tau matters to PeakEncoder: tau=0.7 and q=1.0 d=0.7 tie at 100;
    # q=1.0 d=0.7 changes the model less (queries untouched), so it wins although listed last.
    result = sweep(
        tmp_path,
        candidates=[{"temperature": 0.7}, {"temperature": 0.9},
                    {"query_temperature": 1.0, "document_temperature": 0.7}],
        select_task=PeakTask("pick", 0.7),
        score_tasks=[PeakTask("judge", 0.7)],
    )
    assert result.selection.tied == ["tau=0.7", "q=1.0 d=0.7"]
    assert result.chosen["label"] == "q=1.0 d=0.7"
    judge = result.scoring.per_task["judge"]
    assert (judge.main_score, judge.baseline, judge.chosen, judge.delta) == (
        "ndcg@10", RANK_2_NDCG, 100.0, round(100 - RANK_2_NDCG, 4))
    # the baseline was not listed: it is added, first, as a candidate
    assert result.candidates[0].label == "tau=1.0" and result.candidates[0].source == "baseline (added)"


def test_no_gain_keeps_the_baseline(tmp_path: Path, recorder: list[dict[str, Any]]) -> None:
    # peak 0.3 is reachable by no candidate: every score ties, so "no change" wins
    result = sweep(
        tmp_path,
        candidates=[{"temperature": 0.5}, {"temperature": 0.8}, {"temperature": 1.0}],
        select_task=PeakTask("pick", 0.3),
        score_tasks=[PeakTask("judge", 1.0)],
    )
    assert result.chosen["label"] == "tau=1.0" and result.chosen["is_baseline"]
    assert result.scoring.average.delta == 0.0
    assert [c["phase"] for c in recorder] == ["select"] * 3 + ["score"]  # baseline scored once


def test_choose_tie_rules() -> None:
    base, cool = TemperatureCandidate(), TemperatureCandidate(0.9, 0.9)
    doc_only = TemperatureCandidate(1.0, 0.8)
    decay = TemperatureCandidate(1.0, 1.0, 0.5, 512)
    assert choose([(cool, 50.0), (base, 50.0)])[0] == base
    assert choose([(decay, 50.0), (cool, 50.0)])[0] == cool  # constant tau before length-dependent
    assert choose([(cool, 50.0), (doc_only, 50.0)])[0] == cool  # 0.2 vs 0.2 deviation: order given
    assert choose([(cool, 50.4), (base, 50.0)])[0] == cool
    assert choose([(cool, 50.4), (base, 50.0)], tie_tolerance=0.5) == (base, [cool, base])


def test_candidate_parsing() -> None:
    parsed = parse_candidates([
        {"temperature": 0.9},
        {"query_temperature": 0.9, "document_temperature": 0.9},  # the same as the first
        {"temperature": 0.9, "document_temperature": 0.7},
        {"temperature": 1.0, "temperature_decay": 0.0, "temperature_reference": 1024},  # the baseline
    ])
    assert [(c.label, source) for c, source in parsed] == [
        ("tau=0.9", "given"), ("q=0.9 d=0.7", "given"), ("tau=1.0", "given")]
    decay = TemperatureCandidate.from_settings({"temperature": 0.8, "temperature_decay": 0.5})
    assert decay.encoder_key == (0.5, 512) and decay.slug == "tau0.8-decay0.5-ref512"
    assert parse_candidates([{"temperature": 0.8}])[0] == (TemperatureCandidate(), "baseline (added)")
    for bad in ({"temperature": 0.0}, {"temperature": 1.2}, {"tau": 0.9}, {"temperature_decay": -1},
                {"temperature_decay": 0.5, "temperature_reference": 1}):
        with pytest.raises(ValueError):
            TemperatureCandidate.from_settings(bad)


def test_overlap_and_bad_options_raise_before_any_work(tmp_path: Path, recorder: list[dict[str, Any]]) -> None:
    factory = Factory(tmp_path / "model")
    with pytest.raises(ValueError, match="also a scoring task"):
        sweep(tmp_path, factory, candidates=[{"temperature": 0.9}], select_task="passkey",
              score_tasks=["needle", "passkey"])
    task = PeakTask("pick", 0.7)
    with pytest.raises(ValueError, match="also a scoring task"):
        sweep(tmp_path, factory, candidates=[{"temperature": 0.9}], select_task=task, score_tasks=[task])
    with pytest.raises(ValueError, match="candidates set"):
        sweep(tmp_path, factory, candidates=[{"temperature": 0.9}], select_task=task,
              score_tasks=["passkey"], encoder_options={"temperature": 0.8})
    with pytest.raises(ValueError, match="cannot run"):
        sweep(tmp_path, factory, candidates=[{"temperature": 0.9}], select_task="qmsum",
              score_tasks=["passkey"], data_dir=tmp_path / "nothing")
    assert recorder == [] and factory.builds == []


# --------------------------------------------------------------------------- encoders and cache
def test_one_encoder_per_decay_setting_and_cached_rerun(tmp_path: Path, recorder: list[dict[str, Any]]) -> None:
    candidates = [
        {"temperature": 1.0, "temperature_decay": 0.5, "temperature_reference": 256},
        {"temperature": 0.9},
        {"query_temperature": 1.0, "document_temperature": 0.6},
        {"temperature": 0.8, "temperature_decay": 0.5, "temperature_reference": 256},
        {"temperature": 1.0, "temperature_decay": 1.0, "temperature_reference": 256},
    ]
    factory = Factory(tmp_path / "model")
    kwargs = dict(candidates=candidates, select_task=PeakTask("pick", 0.7),
                  score_tasks=[PeakTask("judge", 1.0)], method="pi", max_length=1024,
                  encoder_options={"scale": "per_document", "temperature": 1.0})
    result = sweep(tmp_path, factory, **kwargs)
    assert factory.builds == [
        {"model": "stub", "method": "pi", "max_length": 1024, "scale": "per_document"},
        {"model": "stub", "method": "pi", "max_length": 1024, "scale": "per_document",
         "temperature_decay": 0.5, "temperature_reference": 256},
        {"model": "stub", "method": "pi", "max_length": 1024, "scale": "per_document",
         "temperature_decay": 1.0, "temperature_reference": 256},
    ]
    by_label = {}
    for call in recorder:
        if call["phase"] == "select":
            label = TemperatureCandidate(call["query_temperature"], call["document_temperature"],
                              call["encoder"].config.temperature_decay,
                              call["encoder"].config.temperature_reference
                              if call["encoder"].config.temperature_decay else None).label
            by_label[label] = call["encoder"]
    shared = by_label["tau=1.0"]
    assert by_label["tau=0.9"] is shared and by_label["q=1.0 d=0.6"] is shared
    assert by_label["tau=1.0 decay=0.5 ref=256"] is by_label["tau=0.8 decay=0.5 ref=256"]
    assert by_label["tau=1.0 decay=0.5 ref=256"] is not shared
    # decay 0.5 at ref 256: tau_eff = 0.8 x 0.8^0.5 = 0.716 for "tau=0.8 decay=0.5" -> wins on pick (0.7)
    assert result.chosen["label"] == "tau=0.8 decay=0.5 ref=256"
    assert result.selection.scores["tau=0.8 decay=0.5 ref=256"] == 100.0

    n_encoded = len(PeakEncoder.log)
    again = sweep(tmp_path, Factory(tmp_path / "model"), **kwargs)
    assert len(PeakEncoder.log) == n_encoded  # everything came from the cache
    assert again.selection == result.selection and again.scoring == result.scoring


# --------------------------------------------------------------------------- outputs
@pytest.mark.slow
def test_sweep_json_markdown_and_plot(tmp_path: Path) -> None:
    """sweep.json round-trips; every run it names is on disk and agrees with it; the report renders it."""
    result = sweep(
        tmp_path,
        candidates=[{"temperature": 0.9}, {"temperature": 0.7},
                    {"query_temperature": 1.0, "document_temperature": 0.7}],
        select_task=PeakTask("pick", 0.7),
        score_tasks=[PeakTask("judge", 1.0), "passkey"],
        lengths=[256, 512],
        report_all=True,
    )
    out = tmp_path / "sweep"
    on_disk = SweepResults.load(out)
    assert on_disk == result
    raw = json.loads((out / "sweep.json").read_text())
    assert set(raw) >= {"format", "protocol", "config", "candidates", "selection", "baseline", "chosen",
                        "scoring", "all_candidates", "versions", "encoders_built", "files", "wall_time_s"}
    config = on_disk.config
    assert config["select_task"] == "pick" and config["score_tasks"] == ["judge", "passkey"]
    assert config["lengths"] == [256, 512] and config["report_all"] is True
    assert {"longembed", "longembed_code_sha256", "torch", "transformers", "python"} <= set(on_disk.versions)

    candidates = on_disk.candidates
    assert [c.label for c in candidates] == ["tau=1.0", "tau=0.9", "tau=0.7", "q=1.0 d=0.7"]
    assert [c.chosen for c in candidates] == [False, False, False, True]
    assert candidates[3].settings == {"query_temperature": 1.0, "document_temperature": 0.7,
                                      "temperature_decay": 0.0, "temperature_reference": None}
    for c in candidates:  # every selection run is on disk and holds the selection task only
        run = RunResults.load(out / c.run)
        assert list(run.tasks) == ["pick"] and run.tasks["pick"].score == c.selection_score
        assert run.config.temperatures == {"query": c.settings["query_temperature"],
                                           "document": c.settings["document_temperature"]}

    scoring = on_disk.scoring
    assert scoring.tasks == ["judge", "passkey"]
    assert set(scoring.per_task["passkey"].by_length["baseline"]) == {"256", "512"}
    for side in ("baseline", "chosen"):
        run = RunResults.load(out / scoring.runs[side])
        assert {t: run.tasks[t].score for t in ("judge", "passkey")} == {
            t: getattr(scoring.per_task[t], side) for t in ("judge", "passkey")}
        assert getattr(scoring.average, side) == pytest.approx(run.average, abs=1e-3)
    assert scoring.average.delta == pytest.approx(scoring.average.chosen - scoring.average.baseline, abs=1e-3)
    rows = on_disk.all_candidates.rows
    assert [r.label for r in rows] == [c.label for c in candidates]
    assert all(set(r.scores) == {"judge", "passkey"} for r in rows)

    written = write_sweep_report(out)
    markdown = written["markdown"].read_text()
    assert written["markdown"] == out / "sweep.md"
    assert "## Selection on pick (ndcg@10)" in markdown and "**chosen**" in markdown
    assert "| **average** |" in markdown
    assert "not used for selection" in markdown
    assert "![selection score vs tau](sweep.png)" in markdown
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- the real model
class MiniPasskeyTask:
    """A small passkey-like task in real text (12 documents of ~80 words, 6 queries)."""

    NAMES = ("Ada Lovelace", "Bruno Bergstrom", "Clara Dietz", "Dmitri Olsen", "Elena Ruiz", "Farid Haddad",
             "Greta Lind", "Hugo Marchetti", "Ines Duarte", "Jonas Weber", "Kira Tanaka", "Luca Romano",
             "Mara Novak", "Nils Berg", "Olga Petrova", "Pavel Horak", "Quinn Harper", "Rosa Alvarez",
             "Sven Aalto", "Tara Singh")
    FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "

    def __init__(self, name: str, seed: int):
        self.seed = seed
        self.metadata = TaskMetadata(name=name, description="", main_score="ndcg@10", lengths=None, source="tests")

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        import random

        rng = random.Random(self.seed)
        corpus = {}
        for i, person in enumerate(self.NAMES[:12]):
            at = rng.randrange(4)
            key = f"The pass key for {person} is {rng.randrange(10000, 99999)}. Remember it. "
            corpus[f"d{i:02d}"] = self.FILLER * at + key + self.FILLER * (4 - at)
        queries = {f"q{i}": f"What is the pass key for {self.NAMES[2 * i]}?" for i in range(6)}
        return RetrievalData(corpus, queries, {f"q{i}": {f"d{2 * i:02d}": 1} for i in range(6)}).validate()


@pytest.mark.slow
def test_real_encoder_baseline_equals_plain_evaluate_model(tmp_path: Path) -> None:
    import json as _json

    from longembed import load_encoder
    from longembed.evaluation.cache.storage import EmbeddingCache, text_key

    try:
        plain_encoder = load_encoder("default")
    except ImportError as exc:  # pragma: no cover - the packaged model is a test dependency
        missing(str(exc))
    select, score = MiniPasskeyTask("mini-a", 0), MiniPasskeyTask("mini-b", 1)
    result = sweep_temperature(
        "default",
        candidates=[{"temperature": 0.5}],
        include_baseline=False,  # so the chosen candidate is tau = 0.5, not the baseline
        select_task=select,
        score_tasks=[score],
        output_dir=tmp_path / "sweep",
        cache_dir=tmp_path / "cache",
        show_progress=False,
        log=None,
    )
    assert result.chosen["label"] == "tau=0.5"
    assert result.encoders_built == [{}]  # one real encoder served both taus

    baseline_run = RunResults.load(tmp_path / "sweep" / result.scoring.runs["baseline"])
    reference = evaluate_model(plain_encoder, [score], output_dir=tmp_path / "plain", use_cache=False,
                               estimate=False, show_progress=False, log=None)
    assert baseline_run.tasks["mini-b"].metrics == reference.tasks["mini-b"].metrics
    assert baseline_run.config.encoder == reference.config.encoder
    assert baseline_run.config.temperatures == reference.config.temperatures == {"query": 1.0, "document": 1.0}
    assert result.scoring.per_task["mini-b"].baseline == reference.tasks["mini-b"].score

    # the vectors themselves: the sweep's cached document vectors vs direct encode() calls
    documents = list(score.load(None).corpus.values())
    cache = EmbeddingCache(tmp_path / "cache")

    def cached(run: RunResults) -> np.ndarray:
        key = run.config.cache_namespaces["documents"]
        fingerprint = _json.loads((cache.root / key / "fingerprint.json").read_text())
        entries = cache.namespace(fingerprint).load("mini-b/all/documents")
        return np.stack([entries.vectors[text_key(t)] for t in documents])

    plain_vectors = plain_encoder.encode(documents, normalize_embeddings=True)
    np.testing.assert_allclose(cached(baseline_run), plain_vectors, atol=1e-6)
    chosen_run = RunResults.load(tmp_path / "sweep" / result.scoring.runs["chosen"])
    cooled = load_encoder("default", temperature=0.5).encode(documents, normalize_embeddings=True)
    np.testing.assert_allclose(cached(chosen_run), cooled, atol=1e-6)  # per-call tau == configured tau
    assert not np.allclose(cooled, plain_vectors, atol=1e-3)  # and tau 0.5 does change the vectors


# --------------------------------------------------------------------------- CLI
def test_cli_candidates_and_temperature_alias() -> None:
    from longembed.cli.parsers.sweep import register_cli
    from longembed.evaluation.sweep_spec import build_candidates

    parser = argparse.ArgumentParser(prog="longembed")
    register_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", "--model", "m", "--temperature", "0.9", "0.8", "--select-task", "qmsum",
                              "--score-tasks", "passkey,needle", "squality"])
    assert args.temperatures == [0.9, 0.8] and not hasattr(args, "temperature")
    assert build_candidates([1.0, 0.8], [0.5], None, [0.5], 256) == [
        {"temperature": 1.0}, {"temperature": 0.8},
        {"query_temperature": 0.5, "document_temperature": 1.0},
        {"query_temperature": 0.5, "document_temperature": 0.8},
        {"temperature": 1.0, "temperature_decay": 0.5, "temperature_reference": 256},
        {"temperature": 0.8, "temperature_decay": 0.5, "temperature_reference": 256},
    ]


@pytest.mark.slow
def test_cli_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from longembed.cli.parsers.sweep import register_cli

    require_data("paul_graham_essays")
    factory = Factory(tmp_path / "model")
    monkeypatch.setattr(sweep_module, "load_encoder", factory)
    parser = argparse.ArgumentParser(prog="longembed")
    register_cli(parser.add_subparsers(dest="command"))
    out = tmp_path / "cli"
    args = parser.parse_args([
        "sweep", "--model", "stub", "--method", "pi", "--max-length", "1024", "--temperatures", "1.0", "0.8",
        "--decays", "0.5", "--decay-reference", "256", "--select-task", "passkey", "--score-tasks", "needle",
        "--lengths", "256", "--data-dir", str(DATA_DIR), "--output", str(out), "--cache-dir",
        str(tmp_path / "cache"), "--report-all",
    ])
    assert args.func(args) == 0
    result = SweepResults.load(out)
    assert result.config["select_task"] == "passkey" and result.scoring.tasks == ["needle"]
    assert [c.label for c in result.candidates] == [
        "tau=1.0", "tau=0.8", "tau=1.0 decay=0.5 ref=256", "tau=0.8 decay=0.5 ref=256"]
    # only the options given on the command line reach the encoder (the rest: its defaults, or a preset)
    assert factory.builds[0] == {"model": "stub", "method": "pi", "max_length": 1024}
    printed = capsys.readouterr().out
    assert "## Selection on passkey (accuracy@1)" in printed and "| **average** |" in printed
    assert "not used for selection" in printed and "sweep.json" in printed
    assert (out / "sweep.md").is_file() and (out / "sweep.png").is_file()
