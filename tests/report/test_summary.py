"""The multi-run table (longembed.report.table) and the decision table (longembed.report.summary,
``longembed report --summary``), on runs built by hand, against naive references: rows counted and
read back from the runs, grouping by data, a numpy bootstrap of the paired differences, and verdicts
set by construction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from longembed.advice.spec import MARGIN as ADVICE_MARGIN
from longembed.cli.main import main
from longembed.report.summary import decision_table, summary_markdown
from longembed.report.table import load_table, score_table
from longembed.results import Counts, Interval, RunConfig, RunResults, TaskResult, UnitResult
from longembed.results.noninferiority import MARGIN, UNDECIDED, WITHIN, WORSE, simultaneous_confidence

N = 60  # queries per unit


def _counts(tokens: float = 3000.0) -> Counts:
    return Counts(documents=2 * N, queries=N, document_tokens_mean=tokens, document_tokens_max=int(tokens),
                  tokens_counted="tokenizer")


def _unit(per_query: dict[str, float], sha: str, tokens: float = 3000.0) -> UnitResult:
    mean = float(np.mean(list(per_query.values())))
    return UnitResult(score=mean, metrics={"accuracy@1": mean, "recall@10": min(100.0, mean + 10)},
                      counts=_counts(tokens), cache=None, encode_time_s=0.0, wall_time_s=0.0,
                      interval=Interval(mean, mean - 5, mean + 5), data_sha256=sha, per_query=dict(per_query))


def make_run(model: str, method: str, max_length: int | None, passkey: dict[int, dict[str, float]],
             sha_prefix: str = "p", fusion: dict | None = None) -> RunResults:
    """A finished run of passkey at the given lengths (length -> query id -> score)."""
    lengths = {n: _unit(s, f"{sha_prefix}{n}", tokens=n * 0.95) for n, s in passkey.items()}
    score = float(np.mean([u.score for u in lengths.values()]))
    task = TaskResult("accuracy@1", score, {"accuracy@1": score}, _counts(), by_length={n: u.score for n, u in
                      lengths.items()}, lengths=lengths, interval=Interval(score, score - 3, score + 3))
    encoder = {"model": model} if model == "bm25" else {"model": f"/models/{model}", "method": method,
                                                         "max_length": max_length}
    resolved = {} if model == "bm25" else {"method": method, "max_length": max_length}
    return RunResults(config=RunConfig(encoder=encoder, resolved=resolved, fusion=fusion), complete=True,
                      tasks={"passkey": task}, average=score, average_interval=Interval(score, score - 2, score + 2))


def queries(values) -> dict[str, float]:
    return {f"q{i:02d}": float(v) for i, v in enumerate(values)}


RNG = np.random.default_rng(7)
BASE = RNG.choice([0.0, 100.0], size=N, p=[0.3, 0.7])


def shifted(flip_down: int, flip_up: int = 0) -> np.ndarray:
    """BASE with ``flip_down`` of its 100s set to 0 and ``flip_up`` of its 0s set to 100."""
    out = BASE.copy()
    out[np.flatnonzero(BASE == 100.0)[:flip_down]] = 0.0
    out[np.flatnonzero(BASE == 0.0)[:flip_up]] = 100.0
    return out


@pytest.fixture()
def runs() -> dict[str, RunResults]:
    """MiniLM at 4k: PI best; truncate identical to PI (tied); PCW one query down (-1.7 points: undecided at
    60 queries); GP 30 queries down (-50: worse); BM25 on the same data; and MiniLM at 4k on other data."""
    best = queries(BASE)
    return {
        "pi": make_run("MiniLM", "pi", 4096, {4096: best, 1024: queries(shifted(0, 2))}),
        "truncate": make_run("MiniLM", "truncate", 512, {4096: dict(best), 1024: queries(shifted(0))}),
        "pcw": make_run("MiniLM", "pcw", 4096, {4096: queries(shifted(1))}),
        "gp": make_run("MiniLM", "gp", 4096, {4096: queries(shifted(30))}),
        "bm25": make_run("bm25", "", None, {4096: queries(shifted(2))}),
        "pi-other-data": make_run("MiniLM", "pi", 4096, {4096: queries(shifted(0))}, sha_prefix="other"),
        "e5-pi": make_run("e5", "pi", 4096, {4096: queries(shifted(5))}),
    }


# --------------------------------------------------------------------------- the table
def test_the_table_has_a_row_per_run_unit_metric_task_and_average(runs: dict[str, RunResults]) -> None:
    table = score_table(runs)
    expected = 0
    for run in runs.values():
        units = [u for t in run.tasks.values() for u in t.units().values()]
        expected += sum(len(u.metrics) for u in units) + len(run.tasks) + 1  # + task rows (synthetic) + average
    assert len(table) == expected
    row = table.select(run="pcw", task="passkey", length=4096, main=True)[0]
    unit = runs["pcw"].tasks["passkey"].lengths[4096]
    assert (row.score, row.low, row.high, row.queries) == (unit.score, unit.interval.low, unit.interval.high, N)
    assert (row.model, row.strategy, row.method, row.max_length, row.level) == ("MiniLM", "pcw 4096", "pcw", 4096, "unit")
    assert row.tokens_per_document == pytest.approx(4096 * 0.95)
    truncate = table.select(run="truncate", task="passkey", length=4096, main=True)[0]
    assert truncate.tokens_per_document == 512  # min(document tokens, Lt)
    assert table.select(run="bm25", main=True, level="unit")[0].strategy == "bm25"
    assert table.averages()["gp"].score == runs["gp"].average
    assert table.per_query("gp", "passkey", 4096) == runs["gp"].tasks["passkey"].lengths[4096].per_query
    with pytest.raises(ValueError, match="no such column: colour"):
        table.select(colour="red")


def test_a_unit_without_an_interval_gets_the_bootstrap_of_its_per_query_scores(runs: dict[str, RunResults]) -> None:
    unit = runs["gp"].tasks["passkey"].lengths[4096]
    unit.interval = None
    row = score_table(runs).select(run="gp", length=4096, main=True)[0]
    values = np.array(list(unit.per_query.values()))
    draws = np.random.default_rng(123).integers(0, N, size=(20_000, N))
    low, high = np.percentile(values[draws].mean(axis=1), [2.5, 97.5])  # a naive bootstrap, another seed
    assert row.low == pytest.approx(low, abs=1.5) and row.high == pytest.approx(high, abs=1.5)
    unit.per_query = None
    assert score_table(runs).select(run="gp", length=4096, main=True)[0].interval is None


def test_to_pandas_gives_the_rows_and_groups_like_a_naive_loop(runs: dict[str, RunResults]) -> None:
    pd = pytest.importorskip("pandas")
    table = score_table(runs)
    frame = table.to_pandas()
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(table)
    main = frame[frame.main & (frame.level == "unit")]
    means = main.groupby("model")["score"].mean().to_dict()
    naive: dict[str, list[float]] = {}
    for r in table.rows:
        if r.main and r.level == "unit":
            naive.setdefault(r.model, []).append(r.score)
    assert means == pytest.approx({m: float(np.mean(v)) for m, v in naive.items()})
    assert str(frame["length"].dtype) == "Int64" and frame.loc[frame.level == "average", "length"].isna().all()


def test_load_table_reads_folders_and_glob_patterns(tmp_path: Path, runs: dict[str, RunResults]) -> None:
    for name, run in runs.items():
        run.save(tmp_path / "set" / name / "results.json")
    by_folder = load_table([tmp_path / "set"])
    by_glob = load_table([str(tmp_path / "set" / "p*")])
    assert len({r.run for r in by_folder.rows}) == len(runs)
    assert {r.path for r in by_glob.rows} == {str(tmp_path / "set" / n) for n in ("pi", "pcw", "pi-other-data")}
    with pytest.raises(FileNotFoundError):
        load_table([str(tmp_path / "nothing-*")])


# --------------------------------------------------------------------------- the decision table
def naive_difference_interval(best: dict[str, float], other: dict[str, float], confidence: float) -> tuple[float, float]:
    """A plain numpy percentile bootstrap of the mean paired difference (another seed than longembed's)."""
    d = np.array([other[q] - best[q] for q in best])
    draws = np.random.default_rng(99).integers(0, len(d), size=(20_000, len(d)))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(d[draws].mean(axis=1), [tail, 100 - tail])
    return float(low), float(high)


def test_cells_group_runs_on_the_same_data_and_bm25_joins_every_model(runs: dict[str, RunResults]) -> None:
    decisions = decision_table(score_table(runs))
    cells = {(c.model, c.length, c.data_sha256): c for c in decisions.cells}
    cell = cells[("MiniLM", 4096, "p4096")]
    assert {c.strategy for c in [cell.best, *cell.others]} == {"pi 4096", "truncate 512", "pcw 4096", "gp 4096", "bm25"}
    e5 = cells[("e5", 4096, "p4096")]  # e5 alone would be a single strategy: BM25 joins it
    assert {c.strategy for c in [e5.best, *e5.others]} == {"pi 4096", "bm25"}
    assert ("MiniLM", 1024, "p1024") in cells  # pi and truncate at 1k
    assert decisions.single == ["MiniLM passkey 4k: pi 4096"]  # the other data: one strategy, said


def test_the_best_and_the_verdicts_match_a_naive_reference(runs: dict[str, RunResults]) -> None:
    decisions = decision_table(score_table(runs))
    cell = next(c for c in decisions.cells if (c.model, c.length, c.data_sha256) == ("MiniLM", 4096, "p4096"))
    scores = {name: run.tasks["passkey"].lengths[4096].score for name, run in runs.items()
              if name in ("pi", "truncate", "pcw", "gp", "bm25")}
    assert cell.best.score == max(scores.values()) and cell.best.strategy in ("pi 4096", "truncate 512")
    others = {c.strategy: c for c in cell.others}
    m = len(others)
    best_scores = runs["pi"].tasks["passkey"].lengths[4096].per_query
    level = simultaneous_confidence(m)
    for name, strategy in (("pcw", "pcw 4096"), ("gp", "gp 4096"), ("bm25", "bm25")):
        other = runs[name].tasks["passkey"].lengths[4096].per_query
        contender = others[strategy]
        assert contender.difference.estimate == pytest.approx(scores[name] - cell.best.score)
        low, high = naive_difference_interval(best_scores, other, level)
        assert contender.bound.low == pytest.approx(low, abs=1.0) and contender.bound.high == pytest.approx(high, abs=1.0)
        naive = WITHIN if low >= -MARGIN else WORSE if high < -MARGIN else UNDECIDED
        if abs(low + MARGIN) > 1.0 and abs(high + MARGIN) > 1.0:  # the naive verdict is not at the edge
            assert contender.verdict == naive
    tied_twin = others.get("truncate 512") or others["pi 4096"]
    assert tied_twin.verdict == WITHIN and (tied_twin.bound.low, tied_twin.bound.high) == (0.0, 0.0)
    assert others["gp 4096"].verdict == WORSE and others["pcw 4096"].verdict == UNDECIDED
    assert cell.use.strategy == "truncate 512"  # tied with PI, reads 512 tokens a document instead of ~3,900


def test_a_wider_margin_ties_what_a_narrow_one_leaves_undecided(runs: dict[str, RunResults]) -> None:
    table = score_table(runs)
    verdict = {margin: next(c for c in decision_table(table, margin).cells if c.data_sha256 == "p4096"
                            and c.model == "MiniLM").others for margin in (2.0, 60.0)}
    assert {c.strategy: c.verdict for c in verdict[60.0]}["pcw 4096"] == WITHIN
    assert {c.strategy: c.verdict for c in verdict[2.0]}["pcw 4096"] == UNDECIDED
    assert MARGIN == ADVICE_MARGIN  # the summary's default margin is advise's
    with pytest.raises(ValueError, match="margin must be positive"):
        decision_table(table, 0)


def test_the_markdown_names_the_best_the_tied_and_the_rule(runs: dict[str, RunResults]) -> None:
    text = summary_markdown(decision_table(score_table(runs)), "longembed report --summary runs")
    assert "Generated by `longembed report --summary runs`" in text
    assert "### MiniLM" in text and "### e5" in text
    row = next(line for line in text.splitlines() if line.startswith("| passkey | 4k |") and "gp 4096" not in line
               and "truncate 512 (+0.0)" in line)
    assert "pcw 4096 (-1.7)" in row and "1 of 4" in row  # gp worse; bm25 (-3.3) undecided or worse
    assert "Bonferroni" in text


@pytest.mark.slow
def test_report_summary_cli_prints_markdown_and_json(tmp_path: Path, runs: dict[str, RunResults],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for name, run in runs.items():
        run.save(tmp_path / "set" / name / "results.json")
    env_src = str(Path(__file__).resolve().parents[2] / "src")
    command = [sys.executable, "-c", "from longembed.cli.main import main; raise SystemExit(main())", "report",
               "--summary", str(tmp_path / "set")]
    env = {"PYTHONPATH": env_src, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    markdown = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    assert "## Which strategy to use" in markdown and "| passkey | 4k |" in markdown
    # the same command's other answers in this process (a fresh interpreter each costs seconds of imports)
    summary = ["report", "--summary", str(tmp_path / "set")]
    capsys.readouterr()
    assert main([*summary, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["margin"] == 2.0 and {c["use"] for c in data["cells"]} >= {"truncate 512"}
    assert main(["report", str(tmp_path / "set"), "--json"]) == 2
    assert "--json goes with --summary" in capsys.readouterr().err
    assert main([*summary, "--base-model", "MiniLM"]) == 2
    assert "--base-model 'MiniLM': expected DERIVED=BASE" in capsys.readouterr().err


@pytest.mark.slow
def test_results_md_opens_with_the_table_its_command_generates(monkeypatch: pytest.MonkeyPatch) -> None:
    """RESULTS.md's decision table is the command's output on the committed runs, not text written by hand."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    paths = ["results/runs", "results/advise/*/runs", "results/essays/advice/runs"]
    bases = {"minilm-alibi": "all-MiniLM-L6-v2", "minilm-pi-4k-epoch": "all-MiniLM-L6-v2", "pilot-s1": "all-MiniLM-L6-v2",
             "pilot-s0.25": "all-MiniLM-L6-v2", "e5-pi-4k": "multilingual-e5-small"}
    command = ("longembed report --summary results/runs 'results/advise/*/runs' results/essays/advice/runs"
               + "".join(f" --base-model {derived}={base}" for derived, base in bases.items()))
    generated = summary_markdown(decision_table(load_table(paths, bases)), command)
    body = generated.split("\n", 2)[2]  # without its own heading: RESULTS.md gives the table its own
    results = (root / "RESULTS.md").read_text(encoding="utf-8")
    shown = results.split("## The decision table")[0].replace("\\\n    ", "")  # the command above the table, one line
    assert command in shown
    assert body in results


def test_base_models_make_a_trained_folder_a_strategy_of_its_base(runs: dict[str, RunResults]) -> None:
    runs["tuned"] = make_run("MiniLM-tuned", "pi", 4096, {4096: queries(shifted(0, 3))})
    alone = decision_table(score_table(runs))
    assert any(c.model == "MiniLM-tuned" for c in alone.cells)  # joined by BM25 only
    table = score_table(runs, base_models={"MiniLM-tuned": "MiniLM"})
    row = table.select(run="tuned", length=4096, main=True)[0]
    assert (row.model, row.strategy) == ("MiniLM", "MiniLM-tuned pi 4096")
    cell = next(c for c in decision_table(table).cells if (c.model, c.data_sha256) == ("MiniLM", "p4096"))
    assert cell.best.strategy == "MiniLM-tuned pi 4096"  # three more queries right than PI
    assert not any(c.model == "MiniLM-tuned" for c in decision_table(table).cells)
