"""--strategy NAME (advise's names) and --from-advice advice.json give eval's exact configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.advice.strategies import ModelFacts, plan_candidates
from longembed.cli.main import build_parser, main
from longembed.cli.parsers.index import STRATEGY_FIELDS
from longembed.evaluation.spec import EvalSpec
from longembed.extension.methods import APE
from longembed.retrieval.fusion import Fusion
from longembed.search.strategy import IndexStrategy, strategy_from_advice, strategy_from_name

BASE = IndexStrategy("m", "pi", 4096)


def test_every_name_advise_plans_is_a_strategy_with_advises_options() -> None:
    candidates, _ = plan_candidates(ModelFacts(APE, "mean", 512), 4096)
    for candidate in candidates:
        strategy = strategy_from_name(candidate.name, "m", BASE)
        assert strategy.name == candidate.name == strategy.default_name()
        if candidate.encoder is None:
            assert strategy.lexical_only
            continue
        options = candidate.eval_options()
        assert strategy.method == candidate.encoder
        assert strategy.granularity == options["granularity"]
        assert strategy.chunked == (options["granularity"] == "chunks")
        if strategy.chunked:
            assert strategy.late == options["late"] and strategy.chunking == options["chunking"]
        assert (strategy.fusion is not None) == ("fuse" in options)
        assert strategy.max_length == (None if candidate.encoder == "truncate" else 4096)


def test_an_unknown_name_or_a_missing_model_is_refused() -> None:
    with pytest.raises(ValueError, match="not a strategy name advise prints"):
        strategy_from_name("colbert", "m", BASE)
    with pytest.raises(ValueError, match="needs --model"):
        strategy_from_name("truncate", None, BASE)


def test_from_advice_reads_the_config_object_or_the_run_record(tmp_path: Path) -> None:
    path = tmp_path / "advice.json"
    path.write_text(json.dumps({"model": "m", "recommended": "late-chunks+bm25", "strategies": [
        {"name": "bm25", "kind": "bm25"},
        {"name": "late-chunks+bm25", "config": {"model": "m", "method": "pi", "max_length": 4096, "granularity": "chunks",
                                                "chunking": "tokens:128", "late": True, "fuse": "bm25",
                                                "fuse_method": "linear", "fuse_weight": 0.7, "temperature": 0.9,
                                                "batch_size": 8}}]}))
    strategy = strategy_from_advice(path)
    assert strategy_from_advice(path, "bm25") == IndexStrategy("bm25", name="bm25")
    assert strategy == IndexStrategy("m", "pi", 4096, {"temperature": 0.9}, "chunks", "tokens:128", True,
                                     Fusion("bm25", "linear", weight=0.7), name="late-chunks+bm25")
    # advice.json as main writes it today: the recommendation's choice and each strategy's run record
    path.write_text(json.dumps({"model": "m", "recommendation": {"best": "x", "choice": "naive-chunks"}, "strategies": [
        {"name": "naive-chunks", "kind": "dense", "method": "truncate", "max_length": None,
         "granularity": {"level": "chunks", "chunking": "tokens:256", "late": False}, "fusion": None}]}))
    assert strategy_from_advice(path) == IndexStrategy("m", "truncate", None, granularity="chunks", late=False,
                                                       name="naive-chunks")
    path.write_text("{}")
    with pytest.raises(ValueError, match="not an advice.json"):
        strategy_from_advice(path)


def test_index_takes_evals_strategy_flags_with_evals_help() -> None:
    index = build_parser(["index"])._subparsers._group_actions[0].choices["index"]  # noqa: SLF001
    evaluate = build_parser(["eval"])._subparsers._group_actions[0].choices["eval"]  # noqa: SLF001
    by_flags = {tuple(a.option_strings): a for a in evaluate._actions}  # noqa: SLF001
    for action in index._actions:  # noqa: SLF001
        if action.dest in STRATEGY_FIELDS or action.dest in ("method", "max_length", "temperature", "chunking"):
            twin = by_flags[tuple(action.option_strings)]
            assert (action.option_strings, action.help, action.choices) == (twin.option_strings, twin.help, twin.choices)
    assert set(STRATEGY_FIELDS) <= {f for f in EvalSpec.__dataclass_fields__}


def test_bm25_with_dense_flags_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.txt").write_text("some text")
    assert main(["index", str(tmp_path), "--index", str(tmp_path / "i"), "--model", "bm25", "--fuse", "bm25"]) == 2
    assert "--fuse need an embedding model" in capsys.readouterr().err
