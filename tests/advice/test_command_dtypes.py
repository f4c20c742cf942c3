"""advise says which dtype its printed commands run the model in: the strategy's own --dtype when it has one,
else eval's float32 for all three (index --from-advice builds in the dtype advise scored, so it reuses advise's
vectors and search reproduces the score; serve runs the index's), and what --dtype auto would pick instead
(issue 53, item 4)."""

from __future__ import annotations

from longembed.advice.commands import command_dtypes
from longembed.advice.markdown import command_lines
from longembed.results.advice import StrategyCost, StrategyResult
from longembed.retrieval.strategy import Strategy

AUTO_REASON = "bfloat16 (auto: this CPU computes it natively, AMX)"


def result(strategy: Strategy, auto: str = "bfloat16") -> StrategyResult:
    config = strategy.to_dict()
    cost = StrategyCost(1.0, 1.0, 384, 1536, 2.0, "float32 vectors")
    return StrategyResult(name=strategy.name, description="", kind=strategy.kind, run=f"runs/{strategy.name}",
                          score=50.0, interval=None, cost=cost, config=config,
                          commands={"eval": "longembed eval ...", "index": "longembed index ..."},
                          dtypes=command_dtypes(config))


def test_every_command_runs_in_the_dtype_advise_scored() -> None:
    config = Strategy("default", "truncate").to_dict()
    assert command_dtypes(config) == {"eval": "float32", "serve": "float32", "index": "float32"}
    given = Strategy("default", "truncate", encoder_options={"dtype": "bfloat16"}).to_dict()
    assert command_dtypes(given) == {"eval": "bfloat16", "serve": "bfloat16", "index": "bfloat16"}
    assert command_dtypes(Strategy("bm25").to_dict()) == {}


def test_advice_md_says_each_commands_dtype_below_its_commands() -> None:
    lines = command_lines(result(Strategy("default", "truncate")), "Commands", AUTO_REASON)
    assert lines[-1] == ("The model runs in: eval float32, serve float32, index float32 (index --from-advice keeps "
                         "the dtype advise scored, so it reuses these vectors and search reproduces the score; add "
                         f"--dtype auto to it for {AUTO_REASON}, re-embedding).")
    # where auto picks float32 anyway there is nothing to add
    plain = command_lines(result(Strategy("default", "truncate")), "C", "float32 (auto: no native bfloat16)")
    assert plain[-1] == "The model runs in: eval float32, serve float32, index float32."
    given = command_lines(result(Strategy("default", "truncate", encoder_options={"dtype": "float16"})), "C", AUTO_REASON)
    assert given[-1] == "The model runs in: eval float16, serve float16, index float16."
    assert command_lines(result(Strategy("bm25")), "Commands", AUTO_REASON)[-1] == "```"  # no model, no dtype
