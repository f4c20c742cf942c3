"""``advice.md``: the recommendation, the table of strategies (score, difference from the best, costs),
the plot, and how every number was obtained (data and any sampling, statistics, where costs were timed,
the estimate against the wall time)."""

from __future__ import annotations

from longembed.advice.recommend import fmt_bytes
from longembed.evaluation.estimate import format_duration
from longembed.report.comparison_tables import p_text
from longembed.report.formatting import MISSING, fmt, fmt_interval, md_table
from longembed.results.advice import Advice, StrategyResult

HEADER = ["strategy", "score [95% interval]", "vs best [95% interval]", "adjusted p", "encode s / 1k tokens",
          "vectors / document", "index", "query ms"]


def advice_markdown(advice: Advice, plot: str | None = None) -> str:
    """The whole of advice.md (``plot``: the plot's file name, linked when given)."""
    r = advice.recommendation
    lines = [f"# Which strategy for {advice.model} on {', '.join(advice.tasks)}", "",
             f"**Use {r.choice}.** {r.reason}", ""]
    if r.caution:
        lines += [f"**Caution**: {r.caution}", ""]
    if advice.sampling is not None:
        lines += [f"**Measured on a sample** (the full data was estimated above --budget-seconds): "
                  f"{sampled_text(advice)}", ""]
    lines += [strategy_table(advice), "",
              f"`*`: significantly worse than the best ({r.best}) after Holm's correction (alpha {advice.alpha:g}). "
              f"Cheapest means: {r.cost_order}.", ""]
    if plot is not None:
        lines += [f"![score against cost]({plot})", ""]
    lines += ["## The strategies", "", *strategy_lines(advice), "", "## How this was measured", "", *method_lines(advice)]
    return "\n".join(lines) + "\n"


def strategy_table(advice: Advice) -> str:
    rows = [strategy_row(s) for s in advice.strategies]
    return md_table(HEADER, rows, numeric_from=1)


def strategy_row(s: StrategyResult) -> list[str]:
    versus, cost = s.versus_best, s.cost
    if versus is None:
        difference, p = "best", MISSING
    else:
        d = versus.difference
        difference = f"{d.estimate:+.1f} [{d.low:+.1f}, {d.high:+.1f}]"
        p = p_text(versus.p_adjusted) + (" *" if versus.significant else "")
    return [s.name, fmt_interval(s.score, s.interval), difference, p, f"{cost.encode_seconds_per_1k_tokens:.3g}",
            fmt(cost.vectors_per_document, 2), fmt_bytes(cost.index_bytes), f"{cost.query_latency_ms:.1f}"]


def strategy_lines(advice: Advice) -> list[str]:
    lines = [f"- **{s.name}**: {s.description} (run: `{s.run}`)" + hub_text(s) for s in advice.strategies]
    lines += [f"- left out, **{name}**: {why}" for name, why in advice.left_out.items()]
    return lines


def hub_text(s: StrategyResult) -> str:
    """"; **hub** on mine: d07 is ranked first for ...": the strategy's hubs, a sign that its vectors
    crowd together on these documents (README, "Hubs"); empty when it has none."""
    return "".join(f"; **hub** on {unit}: {line}" for unit, line in s.hubs.items())


def sampled_text(advice: Advice) -> str:
    sampling = advice.sampling
    assert sampling is not None
    parts = [f"{t.task} {t.queries} of {t.queries_of} queries per length" if t.per_length
             else f"{t.task} {t.queries} of {t.queries_of} queries and {t.documents} of {t.documents_of} documents"
             for t in sampling.tasks]
    fits = "fits the budget" if sampling.within_budget else "is still above the budget (the smallest sample allowed)"
    return (f"{'; '.join(parts)}; {sampling.how}. The full data was estimated at "
            f"{format_duration(sampling.full_estimate_seconds)}, the sample at "
            f"{format_duration(sampling.estimate_seconds)}, which {fits}.")


def method_lines(advice: Advice) -> list[str]:
    m, e = advice.measurement, advice.estimate
    machine = m.get("machine", {})
    budget = "" if e.budget_seconds is None else f" (budget {format_duration(e.budget_seconds)})"
    return [
        f"- **Model**: {advice.model}: {advice.position_scheme} positions, {advice.pooling} pooling, window "
        f"Lo = {advice.original_length}, asked about documents up to {advice.max_length or advice.original_length} "
        "tokens.",
        "- **Scores**: each strategy's run average (`runs/<strategy>/results.json`: `longembed report` and "
        "`longembed compare` read them), with its 95% percentile bootstrap interval over queries.",
        "- **Against the best**: `longembed.results.compare` with the best as baseline, on the same queries: the "
        "difference's 95% paired bootstrap interval and the paired sign-flip test, read at the average over tasks "
        "(else the task), Holm-adjusted over the comparisons with the best (one per strategy); every per-task "
        f"and per-length test is in `{advice.comparison}/comparison.md`.",
        f"- **Costs** are timings on this machine ({machine.get('processor', '?')}, {machine.get('cpu_count', '?')} "
        f"CPUs, {machine.get('torch_threads', '?')} torch threads, {machine.get('platform', '?')}) and noisy: "
        f"encode: one uncached encode of {m.get('sample_documents')} documents ({m.get('sample_tokens'):,} tokens; "
        "BM25: building its index) per 1,000 of their tokens; vectors per document and index over all "
        f"{m.get('index_documents')} evaluated documents (float32 vectors x dimensions x 4 bytes; BM25: bm25s' "
        f"sparse score matrix; a hybrid both); query latency: median of {m.get('latency_queries')} queries, each "
        "encoded uncached and scored against that index (top 10; a hybrid adds BM25 and the fusion).",
        f"- **Time**: estimated {format_duration(e.seconds)} before the runs{budget}; the advice took "
        f"{format_duration(advice.wall_time_s)} (wall time). The estimate printed:",
        "", "```", e.text, "```",
    ]
