"""The strategies advise measures: which per position scheme and pooling, their runs' options, and the
errors that stop a bad request before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from longembed import load_encoder
from longembed.advice.strategies import EXTENSION_FOR_SCHEME, ModelFacts, plan_candidates
from longembed.extension.methods import METHODS
from longembed.retrieval.strategy import BM25, DENSE, HYBRID, Strategy


def names(facts: ModelFacts, max_length: int | None, chunking: str = "tokens:256", **options) -> list[str]:
    return [c.name for c in plan_candidates(facts, max_length, base=Strategy(chunking=chunking), **options)[0]]


def test_an_absolute_mean_pooling_model_gets_every_strategy() -> None:
    candidates, left_out = plan_candidates(ModelFacts("ape", "mean", 512), 4096)
    by_name = {c.name: c for c in candidates}
    assert list(by_name) == ["bm25", "truncate", "pi-4096", "naive-chunks", "naive-chunks-overlap", "late-chunks",
                             "truncate+bm25", "pi-4096+bm25", "naive-chunks+bm25", "naive-chunks-overlap+bm25",
                             "late-chunks+bm25", "truncate+bm25-tuned", "pi-4096+bm25-tuned", "naive-chunks+bm25-tuned",
                             "naive-chunks-overlap+bm25-tuned", "late-chunks+bm25-tuned"]
    assert list(left_out) == ["late-tokens"] and "eval --granularity tokens` only" in left_out["late-tokens"]
    assert [by_name[n].strategy.kind for n in ("bm25", "truncate", "pi-4096+bm25")] == [BM25, DENSE, HYBRID]
    naive, late = by_name["naive-chunks"].strategy, by_name["late-chunks"].strategy
    assert naive.method == "truncate" and not naive.late  # chunks fit Lo
    assert (late.method, late.max_length, late.late) == ("pi", 4096, True)  # one pass at N
    assert by_name["late-chunks+bm25"].strategy.dense == late
    for candidate in candidates:  # each name is the strategy's own: --strategy NAME rebuilds it
        if candidate.tuned_from is None:
            assert candidate.strategy.name == candidate.name
        else:  # a tuned twin is named for its hybrid, whose scores it is fitted on (its rule is the fit's)
            assert candidate.name == candidate.tuned_from + "-tuned"
            assert by_name[candidate.tuned_from].strategy == candidate.strategy


@pytest.mark.parametrize(("family", "scheme", "method"), [("bert", "ape", "pi"), ("nomic", "rope", "ntk"),
                                                          ("jina", "alibi", "native")])
def test_the_extension_fits_the_models_positions(
    tiny_models: dict[str, Path], family: str, scheme: str, method: str
) -> None:
    encoder = load_encoder(tiny_models[family], method="truncate", lazy=True)
    facts = ModelFacts(encoder.position_scheme, encoder.pooling, encoder.original_length)
    assert facts.position_scheme == scheme
    assert scheme in METHODS[method].schemes  # the method declares the scheme it is chosen for
    n = 2 * facts.original_length
    planned = names(facts, n, chunking="tokens:8")
    assert f"{method}-{n}" in planned and f"{method}-{n}+bm25" in planned
    assert [name for name in planned if name.endswith(f"-{n}")] == [f"{method}-{n}"]  # only that one


def test_naive_chunks_are_also_offered_overlapping_when_they_can_overlap() -> None:
    facts = ModelFacts("ape", "mean", 512)
    candidates, _ = plan_candidates(facts, None, base=Strategy(chunking="tokens:256"))
    overlap = {c.name: c.strategy for c in candidates}["naive-chunks-overlap"]
    assert (overlap.chunking, overlap.late, overlap.granularity) == ("tokens:256:32", False, "chunks")
    # the user's chunks overlap already: one naive candidate, named for its overlap
    planned = names(facts, None, chunking="tokens:256:64")
    assert "naive-chunks" not in planned and "naive-chunks-overlap" in planned
    # sentences cannot overlap: said, not silently skipped
    candidates, left_out = plan_candidates(facts, None, base=Strategy(chunking="sentences:4"))
    assert "naive-chunks-overlap" not in [c.name for c in candidates] and "cannot overlap" in left_out[
        "naive-chunks-overlap"]


def test_late_chunks_are_left_out_of_a_model_that_does_not_mean_pool() -> None:
    candidates, left_out = plan_candidates(ModelFacts("rope", "cls", 2048), 8192)
    assert "late-chunks" not in [c.name for c in candidates]
    assert "late-chunks+bm25" not in [c.name for c in candidates]
    assert "naive-chunks" in [c.name for c in candidates]
    assert "'cls'" in left_out["late-chunks"] and "mean-pools" in left_out["late-chunks"]


def test_without_a_length_above_the_window_nothing_is_extended() -> None:
    for max_length in (None, 512):
        candidates, left_out = plan_candidates(ModelFacts("ape", "mean", 512), max_length)
        assert [c.name for c in candidates if c.strategy.kind == DENSE] == ["truncate", "naive-chunks", "naive-chunks-overlap",
                                                                                 "late-chunks"]
        assert next(c for c in candidates if c.name == "late-chunks").strategy.method == "truncate"  # windows of Lo
        assert "nothing to extend" in left_out["extension"]


def test_methods_replace_the_schemes_choice() -> None:
    candidates, _ = plan_candidates(ModelFacts("ape", "mean", 512), 2048, methods=["rp", "gp"])
    dense = [c.name for c in candidates if c.strategy.kind == DENSE]
    assert dense == ["truncate", "rp-2048", "gp-2048", "naive-chunks", "naive-chunks-overlap", "late-chunks"]
    assert next(c for c in candidates if c.name == "late-chunks").strategy.method == "rp"  # the first method


@pytest.mark.parametrize(("max_length", "options", "message"), [
    (256, {}, "below the model's window Lo = 512"),
    (None, {"methods": ["pi"]}, "must be above its Lo = 512"),
    (4096, {"methods": ["truncate"]}, "truncate is always a candidate"),
    (4096, {"methods": ["ntk"]}, "does not apply to APE models"),
    (4096, {"methods": ["pi", "pi"]}, "lists a method twice"),
    (4096, {"chunking": "tokens:512"}, "choose tokens:SIZE with SIZE < 512"),
    (4096, {"chunking": "words:5"}, "chunking"),
])
def test_bad_requests_are_refused(max_length: int | None, options: dict, message: str) -> None:
    chunking = options.pop("chunking", "tokens:256")
    with pytest.raises(ValueError, match=message):  # a bad chunking fails as the strategy is made
        plan_candidates(ModelFacts("ape", "mean", 512), max_length, base=Strategy(chunking=chunking), **options)


def test_each_strategy_runs_with_the_options_of_its_kind() -> None:
    candidates, _ = plan_candidates(ModelFacts("ape", "mean", 512), 4096)
    specs = {c.name: c.strategy for c in candidates}
    assert specs["bm25"].granularity == "document" and specs["bm25"].fusion is None
    assert (specs["naive-chunks"].granularity, specs["naive-chunks"].late) == ("chunks", False)
    assert (specs["late-chunks"].granularity, specs["late-chunks"].late) == ("chunks", True)
    fused = specs["late-chunks+bm25"]
    assert fused.fusion.to_dict() == {"source": "bm25", "method": "rrf", "k": 60}
    assert (fused.granularity, fused.late) == ("chunks", True)
    assert set(EXTENSION_FOR_SCHEME) == {"ape", "rope", "alibi"}
