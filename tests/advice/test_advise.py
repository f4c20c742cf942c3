"""``advise`` end to end on a tiny model and a task folder: every strategy is an ordinary run in
runs/<strategy>/, the costs are what an independent count gives, budget sampling is said and recorded in
the runs, advice.json reads back as written, and a rerun encodes nothing."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import shlex
from pathlib import Path

import pytest
from conftest import slow_fixture, words
from transformers import AutoTokenizer

from longembed.advice import advise, estimate_advice
from longembed.advice.data import load_data
from longembed.advice.markdown import advice_markdown
from longembed.advice.spec import AdviseSpec
from longembed.cli.main import build_parser
from longembed.cli.options import settings_from_args, strategy_from_args
from longembed.evaluation.spec import EvalSpec
from longembed.precision import resolve_dtype
from longembed.results import Advice, Interval, RunResults
from longembed.results.advice import SampledTask
from longembed.retrieval.strategy import Strategy
from longembed.tasks import RetrievalData, write_task_dir

CHUNKING = "tokens:8"


def task_folder(root: Path, n_queries: int = 30, n_documents: int = 60) -> Path:
    """Documents of 40-70 words of the tiny vocabulary; query i quotes ten words of document i."""
    corpus = {f"d{j:02d}": words(40 + j % 31, seed=j) for j in range(n_documents)}
    queries = {f"q{i:02d}": " ".join(corpus[f"d{i:02d}"].split()[3:13]) for i in range(n_queries)}
    return write_task_dir(RetrievalData(corpus, queries, {f"q{i:02d}": {f"d{i:02d}": 1} for i in range(n_queries)}),
                          root / "mine")


@pytest.fixture(scope="module")
@slow_fixture  # a whole advise run: every test of its advice is a slow test
def advised(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("advise")
    said: list[str] = []
    options = dict(max_length=64, task_dirs=[task_folder(root)], output_dir=root / "out", chunking=CHUNKING,
                   budget_seconds=1e-9, cache_dir=root / "cache", sample_documents=4, latency_queries=3,
                   show_progress=False, log=said.append)
    advice = advise(tiny_models["bert"], **options)
    return {"advice": advice, "said": said, "out": root / "out", "options": options, "model": tiny_models["bert"]}


def test_every_strategy_is_a_run_of_the_same_sampled_data(advised: dict) -> None:
    advice, out = advised["advice"], advised["out"]
    names = [s.name for s in advice.strategies]
    assert names == ["bm25", "truncate", "pi-64", "naive-chunks", "naive-chunks-overlap", "late-chunks", "truncate+bm25",
                     "pi-64+bm25", "naive-chunks+bm25", "naive-chunks-overlap+bm25", "late-chunks+bm25",
                     "truncate+bm25-tuned", "pi-64+bm25-tuned", "naive-chunks+bm25-tuned", "naive-chunks-overlap+bm25-tuned",
                     "late-chunks+bm25-tuned"]
    runs = {s.name: RunResults.load(out / s.run) for s in advice.strategies}
    fingerprints = {run.tasks["mine"].data_sha256 for run in runs.values()}
    assert len(fingerprints) == 1  # the same documents and queries for every strategy
    for strategy in advice.strategies:
        run = runs[strategy.name]
        assert run.complete and run.average == strategy.score and run.average_interval == strategy.interval
        assert run.tasks["mine"].counts.queries == 10 and run.tasks["mine"].counts.documents == 10
        assert run.config.task_dirs["mine"]["left_out_by_reason"] == {"unjudged": 0, "no_relevant": 0, "sampled": 20}
    assert runs["late-chunks+bm25"].config.retrieval().fusion.to_dict() == {"source": "bm25", "method": "rrf", "k": 60}
    late = runs["late-chunks"].config.retrieval()
    assert (late.granularity, late.chunking, late.late) == ("chunks", CHUNKING, True)
    assert runs["pi-64+bm25"].tasks["mine"].cache.documents_encoded == 0  # the dense run's vectors
    for tuned in (s for s in advice.strategies if s.name.endswith("-tuned")):  # scored out-of-fold, rule fitted on all
        assert tuned.fusion == tuned.tuning["fitted"] == runs[tuned.name].config.retrieval().fusion.to_dict()
        assert tuned.tuning["folds"] == 5 and sum(tuned.tuning["queries_per_fold"]) == 10
        assert runs[tuned.name].tasks["mine"].data_sha256 == runs[tuned.name[: -len("-tuned")]].tasks["mine"].data_sha256
    best = advice.strategy(advice.recommendation.best)
    assert best.score == max(s.score for s in advice.strategies) and best.versus_best is None
    assert all(s.versus_best is not None for s in advice.strategies if s is not best)
    assert (out / "comparison" / "comparison.md").is_file()


def test_budget_sampling_is_said_and_recorded(advised: dict) -> None:
    advice, said = advised["advice"], advised["said"]
    sampling = advice.sampling
    assert sampling is not None and not sampling.within_budget  # 1 ns: even the smallest sample is above it
    assert sampling.tasks == [SampledTask("mine", 10, 30, 10, 60)]
    message = next(line for line in said if line.startswith("over budget"))
    assert "mine: 10 of 30 queries, 10 of 60 documents" in message and "smallest sample allowed" in message
    assert message in advice.estimate.text and advice.estimate.budget_seconds == 1e-9
    printed = [i for i, line in enumerate(said) if line.startswith("estimate (before any encoding)")]
    first_run = next(i for i, line in enumerate(said) if line.startswith("\n[1/16] bm25"))
    assert printed and printed[0] < first_run  # the estimate comes before anything runs
    markdown = (advised["out"] / "advice.md").read_text()
    assert "**Measured on a sample**" in markdown and "mine 10 of 30 queries and 10 of 60 documents" in markdown


def test_the_recorded_sample_reproduces_the_scored_data(advised: dict) -> None:
    advice = advised["advice"]
    data = load_data(AdviseSpec(task_dirs=advised["options"]["task_dirs"], output_dir=advised["out"]), 64, print)
    sample = data.selection(advice.sampling.fraction, advice.sampling.seed).tasks[0].data
    run = RunResults.load(advised["out"] / "runs" / "truncate")
    assert sample.fingerprint() == run.tasks["mine"].data_sha256


def test_costs_match_an_independent_count(advised: dict) -> None:
    advice = advised["advice"]
    data = load_data(AdviseSpec(task_dirs=advised["options"]["task_dirs"], output_dir=advised["out"]), 64, print)
    corpus = data.selection(advice.sampling.fraction, advice.sampling.seed).tasks[0].data.corpus
    tokenizer = AutoTokenizer.from_pretrained(advised["model"])
    chunks = sum(math.ceil(len(tokenizer.tokenize(text)) / 8) for text in corpus.values())  # tokens:8, no overlap
    naive, truncate, bm25 = (advice.strategy(n).cost for n in ("naive-chunks", "truncate", "bm25"))
    assert advice.measurement["index_documents"] == len(corpus) == 10
    assert naive.vectors_per_document == pytest.approx(round(chunks / 10, 3))
    assert naive.index_bytes == chunks * 32 * 4 and truncate.index_bytes == 10 * 32 * 4  # float32, 32 dimensions
    assert truncate.vectors_per_document == 1.0 and bm25.vectors_per_document is None and bm25.index_bytes > 0
    hybrid = advice.strategy("naive-chunks+bm25").cost
    assert hybrid.index_bytes == naive.index_bytes + bm25.index_bytes
    assert hybrid.encode_seconds_per_1k_tokens >= naive.encode_seconds_per_1k_tokens
    for strategy in advice.strategies:
        assert strategy.cost.encode_seconds_per_1k_tokens > 0 and strategy.cost.query_latency_ms > 0
    assert advice.measurement["sample_documents"] == 4 and advice.measurement["latency_queries"] == 3


def test_advice_json_reads_back_as_written(advised: dict) -> None:
    advice = advised["advice"]
    again = Advice.load(advised["out"])
    assert again == advice and again.to_dict() == advice.to_dict()
    assert again.to_dict()["format"] == "longembed-advice/2"
    assert (advised["out"] / "advice.png").stat().st_size > 0


def test_a_rerun_encodes_nothing(advised: dict) -> None:
    said: list[str] = []
    again = advise(advised["model"], **{**advised["options"], "log": said.append})
    assert all(row.tokens_to_encode == 0 and row.seconds == 0 for row in again.estimate.strategies)
    assert [s.score for s in again.strategies] == [s.score for s in advised["advice"].strategies]


def test_bad_requests_are_refused_before_anything_runs(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="BM25 is always one of the strategies"):
        advise("bm25", tasks=["passkey"], output_dir=tmp_path)
    with pytest.raises(ValueError, match="below the model's window Lo = 32"):
        advise(tiny_models["bert"], max_length=16, tasks=["passkey"], output_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_dry_run_estimates_what_advise_runs_and_encodes_or_writes_nothing(advised: dict, tmp_path: Path) -> None:
    said: list[str] = []
    options = {**advised["options"], "output_dir": tmp_path / "out", "cache_dir": tmp_path / "cache", "log": said.append}
    estimate, sampling = estimate_advice(advised["model"], **options)
    first = advised["advice"]  # advise's own estimate, made on an empty cache like this one
    assert sampling is not None and first.sampling is not None  # the same sample (its seconds are timings)
    assert (sampling.seed, sampling.fraction, sampling.tasks) == (first.sampling.seed, first.sampling.fraction,
                                                                  first.sampling.tasks)
    counted = [(r.name, r.documents, r.documents_to_encode, r.queries_to_encode, r.tokens_to_encode)
               for r in estimate.strategies]
    assert counted == [(r.name, r.documents, r.documents_to_encode, r.queries_to_encode, r.tokens_to_encode)
                       for r in first.estimate.strategies]
    assert any(r.tokens_to_encode > 0 for r in estimate.strategies)
    assert not (tmp_path / "out").exists()
    cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] if (tmp_path / "cache").exists() else []
    assert cached == []  # nothing encoded into the cache
    assert said[-1].startswith("dry run:") and any(line.startswith("over budget") for line in said)
    with pytest.raises(ValueError, match="call estimate_advice"):
        advise(advised["model"], **{**options, "dry_run": True})


def test_each_strategys_hubs_are_its_runs_and_advice_md_names_them(advised: dict) -> None:
    advice, out = copy.deepcopy(advised["advice"]), advised["out"]
    for strategy in advice.strategies:
        run = RunResults.load(out / strategy.run)
        assert strategy.hubs == {task if n is None else f"{task}/{n}": s.describe() for (task, n), s in run.hubs().items()}
    # advice.md lists a strategy's hubs on its line (set here, so the check does not rest on the tiny model)
    for strategy in advice.strategies:
        strategy.hubs = {}
    hubbed = advice.strategies[1]
    hubbed.hubs = {"mine": "d07 is ranked first for 9 of 10 queries (relevant to 1)"}
    lines = {s.name: next(x for x in advice_markdown(advice).splitlines() if x.startswith(f"- **{s.name}**:"))
             for s in advice.strategies}
    assert lines[hubbed.name].endswith(
        f"(run: `{hubbed.run}`); **hub** on mine: d07 is ranked first for 9 of 10 queries (relevant to 1)")
    assert all("**hub**" not in line for name, line in lines.items() if name != hubbed.name)


def test_the_table_shows_passage_hit_when_a_task_locates_answers(advised: dict) -> None:
    advice = copy.deepcopy(advised["advice"])
    for strategy in advice.strategies:
        strategy.passage_hit = None
    assert "passage hit@1" not in advice_markdown(advice)  # no task located its answers
    advice.strategies[0].passage_hit = Interval(estimate=81.25, low=70.0, high=90.0)
    header, _, *rows = [line for line in advice_markdown(advice).splitlines() if line.startswith("| ")][
        : 2 + len(advice.strategies)]
    assert header.split(" | ")[3] == "passage hit@1 [95% interval]"
    assert rows[0].split(" | ")[3] == "81.2 [70, 90]" and all(r.split(" | ")[3] == "-" for r in rows[1:])
    assert type(advice).from_dict(advice.to_dict()).strategies[0].passage_hit == advice.strategies[0].passage_hit


def test_each_strategys_eval_command_parses_to_its_config(advised: dict) -> None:
    """The printed eval command, read by eval's own parser, asks for exactly the strategy's config, and
    the run it reproduces recorded that same config in results.json."""
    advice = advised["advice"]
    for strategy in advice.strategies:
        config = strategy.config
        assert list(config) == [f.name for f in dataclasses.fields(Strategy)]
        argv = shlex.split(strategy.commands["eval"])
        assert argv[:2] == ["longembed", "eval"]
        args = build_parser(argv[1:]).parse_args(argv[1:])
        spec = settings_from_args(EvalSpec, args)
        assert strategy_from_args(args) == Strategy.from_dict(config), strategy.name
        assert [str(p) for p in spec.task_dirs] == [str(p) for p in advised["options"]["task_dirs"]]
        assert str(spec.output_dir) == str(advised["out"] / "rerun" / strategy.name)
        assert str(spec.cache_dir) == str(advised["options"]["cache_dir"])
        recorded = RunResults.load(advised["out"] / "runs" / strategy.name).config.strategy
        assert recorded == config, strategy.name
    by_name = {s.name: s.config for s in advice.strategies}
    assert by_name["naive-chunks"]["method"] == "truncate" and by_name["naive-chunks"]["late"] is False
    assert by_name["late-chunks"]["method"] == "pi" and by_name["late-chunks"]["max_length"] == 64
    assert by_name["truncate"]["max_length"] == 32 and by_name["truncate"]["chunking"] is None
    assert by_name["pi-64+bm25"]["fuse"] == "bm25" and by_name["pi-64+bm25"]["fuse_k"] == 60
    assert by_name["bm25"]["model"] == "bm25" and "--index" in advice.strategy("bm25").commands["serve"]


def test_advice_names_the_recommendation_and_every_strategys_commands(advised: dict) -> None:
    advice = advised["advice"]
    data = json.loads((advised["out"] / "advice.json").read_text())
    assert data["recommended"] == advice.recommendation.choice and data["margin"] == 2.0
    markdown = (advised["out"] / "advice.md").read_text()
    for strategy in advice.strategies:
        assert strategy.commands["index"] == shlex.join(
            ["longembed", "index", "SOURCE...", "--index", str(advised["out"] / "index" / strategy.name),
             "--from-advice", str(advised["out"] / "advice.json"), "--strategy", strategy.name])
        for command in strategy.commands.values():
            assert command in markdown
    serve = shlex.split(advice.strategy("late-chunks").commands["serve"])
    assert serve == ["longembed", "serve", "--index", str(advised["out"] / "index" / "late-chunks")]
    head = markdown.split("| strategy |")[0]
    assert f"**Use {advice.recommendation.choice}.**" in head and advice.strategy(advice.recommendation.choice).commands["eval"] in head
    # the dtype of each command's model: the one advise scored in (float32), and what --dtype auto picks here
    auto = resolve_dtype("auto")
    assert data["dtype_auto"] == auto.reason
    for record in data["strategies"]:
        expected = {} if record["kind"] == "bm25" else {"eval": "float32", "serve": "float32", "index": "float32"}
        assert record.get("dtypes", {}) == expected, record["name"]
    dense = sum(s.kind != "bm25" for s in advice.strategies)
    shown_twice = advice.strategy(advice.recommendation.choice).kind != "bm25"  # under "To use it" too
    assert markdown.count("The model runs in: eval float32, serve float32, index float32") == dense + shown_twice


def test_each_strategys_estimate_is_set_against_its_runs_time(advised: dict) -> None:
    advice, said = advised["advice"], advised["said"]
    encoding = [r for r in advice.estimate.strategies if r.tokens_to_encode > 0]
    assert encoding and all(r.actual_seconds is not None and r.actual_seconds >= 0 for r in encoding)
    assert any(line.startswith("estimate: the encoding runs took") for line in said)
    markdown = advice_markdown(advice)  # (advice.md itself is rewritten by the rerun test)
    assert "| strategy | tokens encoded | estimated s | actual s | error |" in markdown
    for row in encoding:
        assert f"| {row.name} | {row.tokens_to_encode:,} | {row.seconds:.1f} | {row.actual_seconds:.1f} |" in markdown
