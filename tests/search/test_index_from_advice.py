"""``index --from-advice`` reads the vectors advise stored in the embedding cache: no chunk advise embedded
is embedded again, the build says how many vectors it read, and they equal a fresh build's."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import lancedb
import numpy as np
import pytest
import pytrec_eval
from conftest import slow_fixture, words

from longembed import precision
from longembed.advice import advise
from longembed.cli.main import main
from longembed.encoder import LongContextEncoder
from longembed.results.advice import strategy_from_advice
from longembed.search import embedding as embedding_module
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.index_dtype import recorded_dtype
from longembed.search.query_program import PROBES
from longembed.search.sources import SourceOptions, gather_sources
from longembed.tasks import RetrievalData, write_task_dir


@pytest.fixture(scope="module")
@slow_fixture  # a whole advise run
def advised(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("advise")
    corpus = {f"d{j:02d}": words(40 + 9 * j, seed=j) for j in range(10)}
    queries = {f"q{i:02d}": " ".join(corpus[f"d{i:02d}"].split()[3:13]) for i in range(8)}
    task = write_task_dir(RetrievalData(corpus, queries, {f"q{i:02d}": {f"d{i:02d}": 1} for i in range(8)}),
                          root / "mine")
    advise(tiny_models["bert"], max_length=64, task_dirs=[task], output_dir=root / "out", chunking="tokens:8",
           cache_dir=root / "cache", sample_documents=2, latency_queries=2, show_progress=False, log=None)
    return {"advice": root / "out" / "advice.json", "corpus": task / "corpus.jsonl"}


def count_encoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Texts the encoder is asked to embed (whole or in chunks), one count per call."""
    calls: list[int] = []
    for name in ("encode", "encode_chunks"):
        original = getattr(LongContextEncoder, name)

        def counted(self, texts, *args, _original=original, **kwargs):
            if not set([texts] if isinstance(texts, str) else texts) <= set(PROBES):
                calls.append(1 if isinstance(texts, str) else len(texts))  # not the query program's own check
            return _original(self, texts, *args, **kwargs)

        monkeypatch.setattr(LongContextEncoder, name, counted)
    for name in ("encode_inputs", "encode_chunk_inputs"):  # the build's encoding half (search/embedding.py)
        original = getattr(embedding_module, name)

        def counted_inputs(encoder, inputs, *args, _original=original, **kwargs):
            calls.append(len(inputs.spans) if hasattr(inputs, "spans") else len(inputs))
            return _original(encoder, inputs, *args, **kwargs)

        monkeypatch.setattr(embedding_module, name, counted_inputs)
    return calls


@pytest.mark.parametrize("name", ["naive-chunks", "late-chunks+bm25", "truncate"])
def test_index_from_advice_embeds_nothing_advise_embedded(advised: dict, name: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    calls = count_encoded(monkeypatch)
    argv = ["index", str(advised["corpus"]), "--index", str(tmp_path / "index"), "--from-advice",
            str(advised["advice"]), "--strategy", name, "--no-estimate", "--no-passage-vectors"]
    assert main(argv) == 0
    assert calls == []  # not one document (nor chunk) embedded again (passage pieces are not advise's: off here)
    printed = capsys.readouterr().out
    documents = gather_sources([advised["corpus"]], SourceOptions()).documents
    _, strategy = strategy_from_advice(advised["advice"], name)
    fresh = build_index(tmp_path / "fresh", documents, strategy, show_progress=False, log=None)
    assert calls and fresh.from_cache == 0  # a fresh build does embed them
    assert f"0 vectors computed, {fresh.chunks:,} read from the embedding cache" in printed
    reused, rebuilt = table_vectors(tmp_path / "index"), table_vectors(tmp_path / "fresh")
    assert reused.keys() == rebuilt.keys()
    for key, vector in rebuilt.items():
        np.testing.assert_allclose(reused[key], vector, atol=1e-5)


def table_vectors(index: Path) -> dict[tuple[str, int, int, int], np.ndarray]:
    """(document id, chunk, start, end) -> vector, of the index's complete version."""
    table = lancedb.connect(str(index)).open_table("chunks")
    table.checkout("complete")
    rows = table.to_arrow().to_pydict()
    return {(i, c, s, e): np.asarray(v) for i, c, s, e, v in
            zip(rows["id"], rows["chunk"], rows["start"], rows["end"], rows["vector"], strict=True)}


def test_a_tuned_fusion_round_trips_from_advice_to_search_as_eval_ranks_it(advised: dict, tmp_path: Path) -> None:
    """advice.json's tuned rule (fitted on every query) -> the index's metadata -> search ranks each query as
    ``eval`` with advice's printed command (``--fuse-method/--fuse-weight/--fuse-k``) does, and that eval run
    scores the fitted rule's in-sample score the tuning recorded (the advice's own score is out-of-fold)."""
    name = "naive-chunks+bm25-tuned"
    record = next(s for s in json.loads(advised["advice"].read_text())["strategies"] if s["name"] == name)
    argv = shlex.split(record["commands"]["eval"])
    assert {"--fuse-method", "--fuse-weight" if record["config"]["fuse_method"] == "linear" else "--fuse-k"} <= set(argv)
    assert main([*argv[1:], "--no-estimate"]) == 0
    evaluated = json.loads((Path(argv[argv.index("--output") + 1]) / "results.json").read_text())
    assert evaluated["config"]["strategy"] == record["config"]
    assert evaluated["average"] == pytest.approx(record["tuning"]["in_sample_score"], abs=1e-3)
    index, run = tmp_path / "index", tmp_path / "run.trec"
    assert main(["index", str(advised["corpus"]), "--index", str(index), "--from-advice", str(advised["advice"]),
                 "--strategy", name, "--no-estimate"]) == 0
    assert open_index(index).metadata["config"] == record["config"]
    queries = advised["corpus"].parent / "queries.jsonl"
    assert main(["search", "--index", str(index), "--queries", str(queries), "--run", str(run)]) == 0
    searched: dict[str, list[str]] = {}
    for line in run.read_text().splitlines():
        query, _, doc, rank, _, _ = line.split()
        searched.setdefault(query, []).append(doc)
    task = evaluated["tasks"]["mine"]
    assert {q: docs[0] for q, docs in searched.items()} == task["first_ranked"]
    judged = {q: {f"d{q[1:]}": 1} for q in task["per_query"]}
    trec = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10"}).evaluate(
        {q: {d: 100.0 - r for r, d in enumerate(docs)} for q, docs in searched.items()})
    assert {q: round(100 * v["ndcg_cut_10"], 4) for q, v in trec.items()} == pytest.approx(task["per_query"], abs=1e-3)


def test_index_from_advice_builds_in_the_dtype_advise_scored_where_auto_would_pick_bfloat16(
        advised: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # A CPU that computes bfloat16 natively, on any machine: index's default (auto) would pick bfloat16 there,
    # re-embed everything advise embedded in float32 and search off advise's score; --from-advice keeps float32.
    monkeypatch.setattr(precision, "cpu_bf16_support", lambda: "AMX")
    argv = ["index", str(advised["corpus"]), "--from-advice", str(advised["advice"]), "--strategy", "naive-chunks",
            "--no-estimate", "--no-passage-vectors"]
    calls = count_encoded(monkeypatch)
    assert main([*argv, "--index", str(tmp_path / "kept")]) == 0
    assert calls == [] and recorded_dtype(open_index(tmp_path / "kept").metadata) == "float32"
    assert "dtype float32: the precision advise scored this strategy in" in capsys.readouterr().out
    # --dtype beside --from-advice is how precisely to run, not another strategy: accepted, and it re-embeds
    assert main([*argv, "--index", str(tmp_path / "auto"), "--dtype", "auto"]) == 0
    assert calls and recorded_dtype(open_index(tmp_path / "auto").metadata) == "bfloat16"
    assert main([*argv, "--index", str(tmp_path / "refused"), "--method", "pi"]) == 2  # a strategy flag is not
