"""The estimate ``longembed advise`` prints before it encodes anything, and the budget it keeps to.

Per strategy: the texts and tokens its run still has to encode (``evaluate_model(..., dry_run=True)``:
cached texts excluded) and seconds from the cost model ``longembed eval`` fits on a timed warm-up of
the strategy's encoder (:func:`~longembed.evaluation.estimate.measure_cost_model`, t(n) = c + a n +
b n^2 per sequence of n tokens).  The seconds follow what the run will encode: one sequence per
document (cut at Lt), chunks of the chunking's size (naive chunks), or windows of Lt (late chunks of
longer documents).  BM25 and the hybrids encode nothing (a hybrid reuses its dense strategy's cached
vectors), so they count 0; the uncached cost measurements are added.  Rough by design, as eval's.

:func:`fit_budget` samples the data (:meth:`~longembed.advice.data.AdviceData.selection`) until the
estimate fits ``--budget-seconds``, or the smallest sample allowed is reached, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from longembed.advice.data import AdviceData, Selection
from longembed.advice.strategies import Candidate
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.estimate import CostModel, format_duration, text_seconds
from longembed.results import Estimate
from longembed.results.advice import AdviceEstimate, Sampling, StrategyEstimate
from longembed.retrieval.strategy import Strategy

#: Rounds of sampling before giving up on the budget, and the margin each round aims under it.
SAMPLING_ROUNDS = 4
MARGIN = 0.9
ESTIMATE_METHOD = (
    "seconds from a cost model t(n) = c + a n + b n^2 per sequence, fitted on a timed warm-up of each encoder on "
    "this machine at 512 tokens and at the longest sequence it will run, fastest of two (as longembed eval's), "
    "each document costed as its run encodes it; cached texts, BM25 and the hybrids count 0; rough"
)


@dataclass
class DenseEstimate:
    """What a dense strategy's dry run counted (``estimate``) and the cost model of its encoder."""

    candidate: Candidate
    encoder: CachedEncoder
    estimate: Estimate


def strategy_seconds(
    planned: DenseEstimate, model: CostModel, document_tokens: Mapping[str, Sequence[int]] | None = None
) -> float:
    """Estimated seconds of a dense strategy's run: every unit's documents and queries to encode.

    ``document_tokens`` (unit label -> each document's tokens, all of them) lets the documents be costed
    one by one, as the run encodes them: costs grow faster than tokens (attention, a late-chunking window
    per part), so the mean document's cost times the count is too low when lengths vary.  A unit whose
    documents are partly cached takes that share of the sum.  Without it (or for a unit it does not
    match), the mean document is costed."""
    encoder, candidate = planned.encoder.encoder, planned.candidate
    seconds = 0.0
    for u in planned.estimate.units:
        tokens = (document_tokens or {}).get(u.unit)
        if tokens is not None and len(tokens) == u.documents.count and u.documents.count:
            share = u.documents.to_encode / u.documents.count
            seconds += share * sum(side_seconds(1, n, candidate.strategy, encoder, model) for n in tokens)
        else:
            seconds += side_seconds(u.documents.to_encode, u.documents.tokens, candidate.strategy, encoder, model)
        seconds += query_seconds(u.queries.to_encode, u.queries.tokens, model)
    return seconds


def side_seconds(count: int, tokens: int, strategy: Strategy, encoder: object, model: CostModel) -> float:
    """Seconds to encode ``count`` documents of ``tokens`` tokens in all, as the strategy encodes them
    (:func:`~longembed.evaluation.estimate.text_seconds` on the mean document; naive chunks: every
    chunk of the side's tokens)."""
    if count == 0:
        return 0.0
    if strategy.chunked and not strategy.late:
        return text_seconds(tokens, encoder, model, strategy.chunking)  # type: ignore[arg-type]
    chunking = strategy.chunking if strategy.chunked else None
    return count * text_seconds(tokens / count, encoder, model, chunking, strategy.chunked)  # type: ignore[arg-type]


def query_seconds(count: int, tokens: int, model: CostModel) -> float:
    return 0.0 if count == 0 else count * model.seconds(tokens / count)


def advice_estimate(
    candidates: list[Candidate], planned: dict[str, DenseEstimate], cost_model: Callable[[CachedEncoder], CostModel],
    measurement_seconds: float, budget: float | None, document_tokens: Mapping[str, Sequence[int]] | None = None,
) -> AdviceEstimate:
    """The estimate of every strategy: ``planned`` holds the dry runs of the dense strategies (hybrids
    reuse their dense strategy's, BM25 has none); ``cost_model`` gives an encoder's fitted cost model."""
    rows = []
    seconds: dict[str, float] = {}
    documents = max((p.estimate.documents for p in planned.values()), default=0)
    for candidate in candidates:
        dense = planned.get(candidate.name)
        if dense is not None:
            seconds[candidate.name] = (strategy_seconds(dense, cost_model(dense.encoder), document_tokens)
                                       if dense.estimate.tokens_to_encode else 0.0)
            rows.append(strategy_row(dense, candidate, seconds[candidate.name], documents))
            continue
        if candidate.tuned_from is not None:
            rows.append(strategy_row(None, candidate, 0.0, documents, f"fitted on {candidate.tuned_from}'s stored scores: "
                                     "nothing encoded"))
            continue
        source = next((p for p in planned.values() if p.candidate.strategy == candidate.strategy.dense), None)
        if source is not None and source.encoder.cache is None:  # no cache: the hybrid encodes everything again
            rows.append(strategy_row(source, candidate, seconds[source.candidate.name], documents,
                                     "no embedding cache: encodes again"))
            continue
        rows.append(strategy_row(None, candidate, 0.0, documents, free_note(candidate, candidates)))
    total = sum(r.seconds for r in rows) + measurement_seconds
    return AdviceEstimate(rows, round(measurement_seconds, 6), round(total, 6), budget, ESTIMATE_METHOD)  # unrounded enough to compare with any budget


def strategy_row(planned: DenseEstimate | None, candidate: Candidate, seconds: float, documents: int,
                 note: str = "") -> StrategyEstimate:
    """One line of the estimate (a strategy that encodes nothing: ``planned`` None)."""
    if planned is None:
        return StrategyEstimate(candidate.name, documents, 0, 0, 0, 0.0, note)
    e = planned.estimate
    return StrategyEstimate(candidate.name, e.documents, e.documents - e.documents_cached,
                            e.queries - e.queries_cached, e.tokens_to_encode, round(seconds, 1), note)


def estimate_error(estimate: AdviceEstimate) -> str:
    """"the encoding runs took 5.1 min against 4.2 min estimated (+22%): truncate +5%, ...": the
    estimate's error over the strategies that encoded something, and per strategy."""
    rows = [r for r in estimate.strategies if r.actual_seconds is not None and r.tokens_to_encode > 0]
    if not rows:
        return "estimate: nothing was encoded (every vector came from the cache)"
    estimated, actual = sum(r.seconds for r in rows), sum(r.actual_seconds or 0.0 for r in rows)
    each = ", ".join(f"{r.name} {error_percent(r.seconds, r.actual_seconds or 0.0)}" for r in rows)
    return (f"estimate: the encoding runs took {format_duration(actual)} against {format_duration(estimated)} estimated "
            f"({error_percent(estimated, actual)}): {each}")


def error_percent(estimated: float, actual: float) -> str:
    """How far off the estimate was, as a share of it: "+22%" (an estimate that rounds to 0 s, as a
    tiny model's can, has no share: "estimated 0 s")."""
    if estimated <= 0:
        return "estimated 0 s"
    return f"{100 * (actual - estimated) / estimated:+.0f}%"


def free_note(candidate: Candidate, candidates: Sequence[Candidate]) -> str:
    """Why BM25 or a hybrid counts 0 seconds."""
    if candidate.strategy.lexical_only:
        return "BM25: nothing to encode; indexing not timed"
    dense = next(c.name for c in candidates if c.strategy == candidate.strategy.dense)
    return f"reuses {dense}'s cached vectors: BM25 scoring only"


def format_advice_estimate(estimate: AdviceEstimate, sampled: bool = False) -> str:
    """The estimate as printed: one line per strategy, the cost measurements, the total and the budget."""
    title = "estimate of the sampled runs" if sampled else "estimate (before any encoding)"
    lines = [f"{title}:", f"  {'strategy':<24}{'documents':>10}{'to encode':>11}{'tokens to encode':>18}{'est. s':>9}"]
    for row in estimate.strategies:
        note = f"  ({row.note})" if row.note else ""
        lines.append(f"  {row.name:<24}{row.documents:>10}{row.documents_to_encode:>11}{row.tokens_to_encode:>18,}"
                     f"{row.seconds:>9.0f}{note}")
    lines.append(f"  {'cost measurements (uncached encodes of the timing samples)':<63}{estimate.measurement_seconds:>9.0f}")
    budget = "" if estimate.budget_seconds is None else f" (budget {format_duration(estimate.budget_seconds)})"
    lines.append(f"total: about {format_duration(estimate.seconds)}{budget}; {estimate.method}")
    return "\n".join(lines)


def fit_budget(
    data: AdviceData, estimate: Callable[[Selection], AdviceEstimate], budget: float | None, seed: int,
    say: Callable[[str], None],
) -> tuple[Selection, AdviceEstimate, Sampling | None]:
    """The full data and its estimate (printed), or, when that is over ``budget``, a sample whose
    estimate fits it (both printed, with what was sampled); sampling stops at the smallest sample allowed
    (which may not fit: then the advice says so)."""
    selection = data.selection()
    full = estimate(selection)
    full.text = format_advice_estimate(full)
    say(full.text)
    if budget is None or full.seconds <= budget:
        return selection, full, None
    current, fraction = full, 1.0
    for _ in range(SAMPLING_ROUNDS):
        encoding = current.seconds - current.measurement_seconds
        room = budget - current.measurement_seconds
        fraction = 0.0 if room <= 0 or encoding <= 0 else fraction * min(1.0, MARGIN * room / encoding)
        smaller = data.selection(fraction, seed)
        if smaller.sampled == selection.sampled:
            break  # the smallest sample allowed: nothing left to cut
        selection, current = smaller, estimate(smaller)
        if current.seconds <= budget:
            break
    sampling = Sampling(seed, round(fraction, 6), selection.sampled, full.seconds, current.seconds,
                        current.seconds <= budget, sampling_method(seed))
    printed = [describe_sampling(sampling, budget), format_advice_estimate(current, sampled=True)]
    for text in printed:
        say(text)
    current.text = "\n".join([full.text, *printed])
    return selection, current, sampling


def sampling_method(seed: int) -> str:
    return (f"seeded (seed {seed}): of a retrieval task, queries drawn at random, each with all its relevant "
            "documents, and random distractors up to the same fraction of the documents, with every other query "
            "whose relevant documents are all in the sample; of passkey and needle, "
            "the first queries of each length's nested set (2 documents each); at least 10 queries (per length)")


def describe_sampling(sampling: Sampling, budget: float) -> str:
    """What was sampled, in words (printed, and written in advice.md)."""
    parts = []
    for task in sampling.tasks:
        if task.per_length:
            parts.append(f"{task.task}: {task.queries} of {task.queries_of} queries per length")
        else:
            parts.append(f"{task.task}: {task.queries} of {task.queries_of} queries, {task.documents} of "
                         f"{task.documents_of} documents")
    fits = ("fits it" if sampling.within_budget
            else "still does not fit it: this is the smallest sample allowed")
    return (f"over budget: the full data was estimated at {format_duration(sampling.full_estimate_seconds)}, above "
            f"--budget-seconds {format_duration(budget)}; sampled ({sampling.how}): {'; '.join(parts)}. The sample's "
            f"estimate, {format_duration(sampling.estimate_seconds)}, {fits}.")

