"""advise says which dtype its printed commands run the model in: eval float32, serve and index --dtype auto
as it resolved where advise ran, the strategy's own --dtype when it has one (issue 53, item 4)."""

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
                          dtypes=command_dtypes(config, auto))


def test_eval_keeps_float32_and_serve_and_index_take_autos_choice() -> None:
    config = Strategy("default", "truncate").to_dict()
    assert command_dtypes(config, "bfloat16") == {"eval": "float32", "serve": "bfloat16", "index": "bfloat16"}
    assert command_dtypes(config, "float32") == {"eval": "float32", "serve": "float32", "index": "float32"}
    given = Strategy("default", "truncate", encoder_options={"dtype": "float16"}).to_dict()
    assert command_dtypes(given, "bfloat16") == {"eval": "float16", "serve": "float16", "index": "float16"}
    assert command_dtypes(Strategy("bm25").to_dict(), "bfloat16") == {}


def test_advice_md_says_each_commands_dtype_below_its_commands() -> None:
    lines = command_lines(result(Strategy("default", "truncate")), "Commands", AUTO_REASON)
    assert lines[-1] == (f"The model runs in: eval float32, serve bfloat16, index bfloat16 (serve and index default "
                         f"to --dtype auto; where advise ran: {AUTO_REASON}).")
    given = command_lines(result(Strategy("default", "truncate", encoder_options={"dtype": "float16"})), "C", AUTO_REASON)
    assert given[-1] == "The model runs in: eval float16, serve float16, index float16."
    assert command_lines(result(Strategy("bm25")), "Commands", AUTO_REASON)[-1] == "```"  # no model, no dtype
