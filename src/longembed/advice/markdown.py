"""``advice.md``: what to use and what it costs against the best, the table of strategies with their
intervals, verdicts and costs, the commands that reproduce, serve and index each, the plot, and how
every number was obtained (data, sampling, statistics, where costs were timed, the estimate's error)."""

from __future__ import annotations

import shlex
from pathlib import Path

from longembed.advice.commands import serve_request
from longembed.advice.estimate import error_percent
from longembed.advice.judged import judged_lines
from longembed.advice.recommend import REALISTIC_QUERIES, UNDECIDED, WITHIN, WORSE, fmt_bytes
from longembed.evaluation.estimate import format_duration
from longembed.loading import DEFAULT_MODEL, DEFAULT_MODEL_NAME
from longembed.report.formatting import fmt, fmt_interval, md_table
from longembed.results.advice import Advice, StrategyResult
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.strategy import Strategy

HEADER = ["strategy", "method", "score [95% interval]", "vs best [95% interval]", "lower bound", "verdict",
          "encode s / 1k tokens", "vectors / document", "index", "query ms"]


def advice_markdown(advice: Advice, plot: str | None = None) -> str:
    """The whole of advice.md (``plot``: the plot's file name, linked when given)."""
    r = advice.recommendation
    m = sum(s.versus_best is not None for s in advice.strategies)
    lines = [advice_title(advice), "",
             f"**Use {r.choice}.** {r.reason}", ""]
    if advice.sampling is not None:
        lines += [f"**Measured on a sample** (the full data was estimated above --budget-seconds): "
                  f"{sampled_text(advice)} Its eval commands score the whole data (the scores here are the "
                  "sample's).", ""]
    lines += command_lines(advice.strategy(r.choice), "To use it", advice.dtype_auto) + [""]
    lines += [strategy_table(advice), "",
              f"Every difference is the strategy's score minus the best's ({r.best}) on the same queries, in points. "
              f"**lower bound**: of that difference, simultaneous over the {m} comparisons with the best "
              f"(Bonferroni: one-sided {100 * (1 - 0.025 / max(m, 1)):.2f}% each); **verdict**: *within* the margin "
              f"of {advice.margin:g} points when the bound is at least -{advice.margin:g} (it may replace the best), "
              f"*worse* when even its simultaneous upper bound is below -{advice.margin:g}, else *can't tell* (with "
              f"the queries that would tell, at 80% power). Recommended: the cheapest of the best and the strategies "
              f"within the margin; cheapest means: {r.cost_order}.", ""]
    if plot is not None:
        lines += [f"![score against cost]({plot})", ""]
    lines += judged_lines(advice, task_folders(advice))
    lines += ["## The strategies and their commands", "", *strategy_lines(advice), "",
              "## How this was measured", "", *method_lines(advice)]
    return "\n".join(lines) + "\n"


def advice_title(advice: Advice) -> str:
    """``# Which strategy for MODEL on TASKS``: the model by name (the packaged default's own name, not
    ``default``) and each task folder's task by its folder (a folder's name alone, often ``task`` or
    ``data``, says little)."""
    model = (f"{DEFAULT_MODEL_NAME} (the packaged default)" if advice.model == DEFAULT_MODEL
             else Path(str(advice.model).rstrip("/")).name or advice.model)
    folders = task_folders(advice)
    tasks = [f"{task} (the task folder {folders[task]})" if task in folders else task for task in advice.tasks]
    return f"# Which strategy for {model} on {', '.join(tasks)}"


def task_folders(advice: Advice) -> dict[str, str]:
    """Task name -> the folder it was read from, for the advice's ``--task-dir`` tasks (read from its eval
    commands, which every strategy shares: each ``--task-dir``, named by ``--task-name`` or its folder)."""
    if not advice.strategies or "eval" not in advice.strategies[0].commands:
        return {}
    words = shlex.split(advice.strategies[0].commands["eval"])
    folders = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--task-dir"]
    names = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--task-name"]
    if names and len(names) != len(folders):
        return {}
    return dict(zip(names or [Path(f.rstrip("/")).name for f in folders], folders, strict=True))


#: the column shown when a task locates its answers (:mod:`longembed.evaluation.passage_hits`)
PASSAGE_COLUMN = "passage hit@1 [95% interval]"


def strategy_table(advice: Advice) -> str:
    rows = [strategy_row(s, advice.margin) for s in advice.strategies]
    if not any(s.passage_hit is not None for s in advice.strategies):
        return md_table(HEADER, rows, numeric_from=2)
    for row, s in zip(rows, advice.strategies, strict=True):
        row.insert(3, "-" if s.passage_hit is None else fmt_interval(s.passage_hit.estimate, s.passage_hit))
    return md_table([*HEADER[:3], PASSAGE_COLUMN, *HEADER[3:]], rows, numeric_from=2)


def verdict_text(s: StrategyResult, margin: float) -> str:
    versus = s.versus_best
    if versus is None:
        return "best"
    if versus.verdict == WITHIN:
        return f"within {margin:g}"
    if versus.verdict == WORSE:
        return f"worse by > {margin:g}"
    assert versus.verdict == UNDECIDED
    if versus.queries_needed is not None and versus.queries_needed > REALISTIC_QUERIES:
        return "can't tell (too close to the margin)"
    return "can't tell" + ("" if versus.queries_needed is None else f" (~{versus.queries_needed:,} queries)")


def strategy_row(s: StrategyResult, margin: float) -> list[str]:
    versus, cost = s.versus_best, s.cost
    if versus is None:
        difference, bound = "best", "-"
    else:
        d = versus.difference
        difference = f"{d.estimate:+.1f} [{d.low:+.1f}, {d.high:+.1f}]"
        bound = "-" if versus.bound is None else f"{versus.bound.low:+.1f}"
    method = s.config.get("method") or "-"
    return [s.name, str(method), fmt_interval(s.score, s.interval), difference, bound,
            verdict_text(s, margin), f"{cost.encode_seconds_per_1k_tokens:.3g}",
            fmt(cost.vectors_per_document, 2), fmt_bytes(cost.index_bytes), f"{cost.query_latency_ms:.1f}"]


def command_lines(s: StrategyResult, title: str, dtype_auto: str = "") -> list[str]:
    """The strategy's method and commands, as a fenced block."""
    c = s.config
    what = (f"{title} ({s.name}: model {c.get('model')}, method {c.get('method') or '-'}, max length "
            f"{c.get('max_length') or '-'}, {c.get('granularity')}"
            + (f" {c.get('chunking')} {'late' if c.get('late') else 'naive'}" if c.get("granularity") == "chunks" else "")
            + (f", fused with {c['fuse']} ({Strategy.from_dict(c).fusion.describe()})" if c.get("fuse") else "")
            + f"; its vectors from the embedding server: {serve_request(c)}):")
    lines = [what, "", "```sh"]
    for name, command in s.commands.items():
        note = TUNED_EVAL_NOTE.format(**s.tuning) if name == "eval" and s.tuning else COMMAND_NOTES[name]
        lines += [f"# {name}: {note}", command]
    return [*lines, "```", *dtype_lines(s, dtype_auto), *tuning_lines(s)]


def tuning_lines(s: StrategyResult) -> list[str]:
    """How a tuned fusion's rule was chosen and why its score is out-of-fold (none for other strategies)."""
    if not s.tuning:
        return []
    t = s.tuning
    rules = ", ".join(Fusion(**f).describe() for f in t["fold_fits"])
    return ["", f"Tuned: the rule above was fitted on all queries (in-sample {t['in_sample_score']:.1f}, optimistic); the "
            f"score shown, {s.score:.1f}, is out-of-fold: {t['folds']} folds (seed {t['seed']}), each fold's queries "
            f"scored by the rule fitted on the others ({rules})."]


def dtype_lines(s: StrategyResult, dtype_auto: str) -> list[str]:
    """The dtype each command runs the model in, one line (none for BM25, or advice written before it)."""
    if not s.dtypes:
        return []
    text = ", ".join(f"{name} {dtype}" for name, dtype in s.dtypes.items())
    given = (s.config.get("encoder_options") or {}).get("dtype")
    faster = given is None and dtype_auto and not dtype_auto.startswith(s.dtypes["index"])
    note = (f" (index --from-advice keeps the dtype advise scored, so it reuses these vectors and search reproduces "
            f"the score; add --dtype auto to it for {dtype_auto}, re-embedding)") if faster else ""
    return ["", f"The model runs in: {text}{note}."]


#: a tuned fusion's eval reruns the rule fitted on every query: its in-sample score, not the out-of-fold one
TUNED_EVAL_NOTE = ("reruns the fitted rule on this data: its in-sample score ({in_sample_score:.1f}), not the "
                   "out-of-fold score advise reports")
COMMAND_NOTES = {
    "eval": "reproduces its score on this data (a new run folder)",
    "serve": "a search server (POST /search and the search page at /) over that index, queries embedded by its model",
    "index": "your documents (SOURCE...) indexed as it indexes them, read from advice.json",
}


def strategy_lines(advice: Advice) -> list[str]:
    lines: list[str] = []
    for s in advice.strategies:
        lines += [f"- **{s.name}**: {s.description} (run: `{s.run}`)" + hub_text(s), ""]
        lines += ["  " + line if line else "" for line in command_lines(s, "Commands", advice.dtype_auto)] + [""]
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
        "- **Against the best**: `longembed.results.compare` with the best as baseline, on the same queries, read "
        "at the average over tasks (else the task): the difference's 95% paired bootstrap interval, and its "
        "Bonferroni-simultaneous interval, whose lower end is the bound the recommendation reads "
        f"(non-inferiority with a margin of {advice.margin:g} points, `--margin`); the queries a can't-tell "
        "comparison needs are a non-inferiority sample size (normal approximation, 80% power, at the observed "
        "difference and standard error). Every per-task and per-length test, with sign-flip p-values "
        f"Holm-adjusted over all of them, is in `{advice.comparison}/comparison.md`.",
        f"- **Costs** are timings on this machine ({machine.get('processor', '?')}, {machine.get('cpu_count', '?')} "
        f"CPUs, {machine.get('torch_threads', '?')} torch threads, {machine.get('platform', '?')}) and noisy: "
        f"encode: one uncached encode of {m.get('sample_documents')} documents ({m.get('sample_tokens'):,} tokens; "
        "BM25: building its index) per 1,000 of their tokens; vectors per document and index over all "
        f"{m.get('index_documents')} evaluated documents (float32 vectors x dimensions x 4 bytes; BM25: bm25s' "
        f"sparse score matrix; a hybrid both); query latency: median of {m.get('latency_queries')} queries, each "
        "encoded uncached and scored against that index (top 10; a hybrid adds BM25 and the fusion), after "
        "untimed warm-up queries.",
        f"- **Time**: estimated {format_duration(e.seconds)} before the runs{budget}; the advice took "
        f"{format_duration(advice.wall_time_s)} (wall time). Each strategy's estimate against its run's time:",
        "", *estimate_table(advice), "", "The estimate printed:", "", "```", e.text, "```",
    ]


def estimate_table(advice: Advice) -> list[str]:
    """Estimated against actual seconds per strategy that encodes (the estimate's error)."""
    rows = []
    for row in advice.estimate.strategies:
        if row.actual_seconds is None or (row.seconds == 0 and row.tokens_to_encode == 0):
            continue
        error = "-" if row.seconds <= 0 else error_percent(row.seconds, row.actual_seconds)
        rows.append([row.name, f"{row.tokens_to_encode:,}", f"{row.seconds:.1f}", f"{row.actual_seconds:.1f}", error])
    if not rows:
        return ["(nothing was encoded: every vector came from the cache)"]
    return md_table(["strategy", "tokens encoded", "estimated s", "actual s", "error"], rows, numeric_from=1).splitlines()
