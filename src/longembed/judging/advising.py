"""The judging page's Advise button: :func:`longembed.advice.advise` on the judged task, run in a background
thread of the server while judging goes on, its progress lines and then its recommendation given to the page.

Why a thread of the server and not a ``longembed advise`` process: it is the library call the CLI makes,
its progress arrives line by line through ``log`` and its result as the typed
:class:`~longembed.results.advice.Advice` (a process would hand back text to parse, after importing torch
and loading the model again); an error in it is an exception caught in the thread and shown on the page.
Judging is not blocked: a click is a short append under the log's lock, and advise only reads, from a
snapshot of the task taken under that lock (:meth:`JudgmentLog.snapshot`), so it sees one moment of the
judgments and never writes into them.  The advice goes to ``TASK/.advice/`` (hidden, as the indexes: not
a task file), replaced by the next run; a server stopped mid-advice loses that advice, never a judgment.

After the advice, the strategies whose top 10 was mostly unjudged (``advise``'s warning) are offered back
to the page: their indexes are brought up to date, each question's unjudged results among their top
``max(depth, 10)`` counted ("judge these 23 results to compare late-chunks fairly"), and
:meth:`AdviceJob.pool_back` adds them to the questions' pools (:meth:`JudgingSession.pool_more`).
"""

from __future__ import annotations

import shlex
import shutil
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.advice import advise
from longembed.advice.commands import index_command
from longembed.advice.judged import JUDGED_DEPTH, JUDGED_WARNING_PERCENT
from longembed.errors import UserError
from longembed.judging.pool import Searcher
from longembed.judging.session import JudgingSession
from longembed.results.advice import ADVICE_FILE, Advice, StrategyResult

#: the advice's folder inside the task folder (the snapshot it reads is its ``task/``)
ADVICE_FOLDER = ".advice"
#: progress lines the page is sent (the last ones)
PROGRESS_LINES = 12
IDLE, RUNNING, DONE, FAILED = "idle", "running", "done", "failed"


@dataclass(frozen=True)
class AdviceSettings:
    """What ``advise`` is asked beyond the task: the model and chunking the pool used, and where to run."""

    model: str
    docs: str  # the documents folder, for the index command the page shows
    chunking: str | None = None
    device: str | None = None
    batch_size: int = 16


#: the searchers of strategies named (their indexes built or brought up to date first), for the pool-back
PoolSearchers = Callable[[Sequence[str], Callable[[str], None]], Mapping[str, Searcher]]


@dataclass
class AdviceJob:
    """One advice at a time for a judging session (module docstring); :meth:`state` is what the page polls."""

    session: JudgingSession
    settings: AdviceSettings
    searchers_for: PoolSearchers | None = None
    run_advise: Callable[..., Advice] = advise
    state_name: str = IDLE
    lines: list[str] = field(default_factory=list)
    judgments: int = 0  # the judgments the running (or last) advice read
    log_size: int = -1  # the judgment log's size then (a click, or a changed mind, grows it)
    result: dict[str, Any] | None = None
    error: str | None = None
    _offered: dict[str, Searcher] = field(default_factory=dict, repr=False)
    _generation: int = 0  # which advice a late offer belongs to
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def folder(self) -> Path:
        return self.session.log.folder / ADVICE_FOLDER

    def start(self) -> dict[str, Any]:
        """Start an advice in the background unless one runs, or the last one read the judgments as they
        stand (the log has not grown since: no click, no changed mind); the state either way."""
        with self._lock:
            unchanged = self.state_name == DONE and self._log_size() == self.log_size
            if self.state_name != RUNNING and not unchanged:
                self.log_size = self._log_size()
                self.state_name, self.lines, self.result, self.error = RUNNING, [], None, None
                self.judgments = self.session.progress()["judgments"]
                self._generation += 1
                threading.Thread(target=self._run, args=(self._generation,), name="longembed-advise",
                                 daemon=True).start()
        return self.state()

    def state(self) -> dict[str, Any]:
        """The state ("idle", "running", "done" or "failed"), the last progress lines, the judgments it read
        and those made since, and the advice (:func:`advice_payload`) or the error."""
        with self._lock:
            return {"state": self.state_name, "lines": self.lines[-PROGRESS_LINES:], "judgments": self.judgments,
                    "judged_since": self.session.progress()["judgments"] - self.judgments,
                    "advice": self.result, "error": self.error}

    def _log_size(self) -> int:
        return self.session.log.path.stat().st_size

    def say(self, line: str) -> None:
        with self._lock:
            self.lines.extend(part for part in line.strip("\n").splitlines() if part.strip())

    def _run(self, generation: int) -> None:
        try:
            advice = self._advise()
            low = unjudged_strategies(advice)
            pending = {"pending": True, "strategies": low} if low else None
            payload = advice_payload(advice, self.session.strategies, self.settings, self.folder, pending)
            with self._lock:
                self.result, self.state_name = payload, DONE
        except Exception as exc:  # the page shows it; the server and the judgments go on
            message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, UserError):
                traceback.print_exc()
            with self._lock:
                self.error, self.state_name = message, FAILED
            return
        if low:  # the advice is shown meanwhile: the offer may build indexes
            self._settle_offer(low, generation)

    def _settle_offer(self, low: list[str], generation: int) -> None:
        try:
            offer, searchers = self._offer(low)
        except Exception as exc:  # no offer, the advice stands
            traceback.print_exc()
            self.say(f"could not pool {', '.join(low)}: {type(exc).__name__}: {exc}")
            offer, searchers = None, {}
        with self._lock:
            if self.result is not None and generation == self._generation:
                self.result["pool_back"], self._offered = offer, searchers

    def _advise(self) -> Advice:
        """advise on a snapshot of the task, into a fresh :data:`ADVICE_FOLDER`."""
        shutil.rmtree(self.folder, ignore_errors=True)
        task = self.session.log.snapshot(self.folder / "task")
        self.say(f"advise on {self.judgments} judgments (a snapshot: judging goes on meanwhile)")
        options = {} if self.settings.chunking is None else {"chunking": self.settings.chunking}
        return self.run_advise(self.settings.model, task_dirs=[task], task_names=[self.session.log.folder.name],
                               output_dir=self.folder, device=self.settings.device,
                               batch_size=self.settings.batch_size, show_progress=False, log=self.say, **options)

    def _offer(self, low: list[str]) -> tuple[dict[str, Any] | None, dict[str, Searcher]]:
        """How many results the mostly unjudged strategies ``low`` would add to the pools (None: none, or
        none of them can be pooled: a tuned fusion is fitted, not searched)."""
        depth = max(self.session.depth, JUDGED_DEPTH)
        self.say(f"counting the unjudged results of {', '.join(low)} in each question's top {depth}")
        open_now = {name: self.session.searchers[name] for name in low if name in self.session.searchers}
        others = [name for name in low if name not in open_now]
        searchers = {**open_now, **(self.searchers_for(others, self.say) if others and self.searchers_for else {})}
        results = self.session.unpooled(searchers, depth) if searchers else 0
        if not results:
            return None, {}
        return {"strategies": list(searchers), "depth": depth, "results": results}, searchers

    def pool_back(self) -> dict[str, Any]:
        """Pool the offered strategies into every question asked (and those asked from now on)."""
        with self._lock:
            offered, offer = self._offered, (self.result or {}).get("pool_back")
        if not offered or not offer or offer.get("pending"):
            raise UserError("nothing to pool: press Advise first (it offers the strategies judged too little)")
        extended, added = self.session.pool_more(offered, int(offer["depth"]))
        with self._lock:
            self._offered = {}
            if self.result is not None:
                self.result["pool_back"] = None
        return {"questions": extended, "added": added, "progress": self.session.progress()}


def unjudged_strategies(advice: Advice) -> list[str]:
    """The strategies whose top 10 was mostly unjudged (advise's warning), a tuned fusion left out."""
    return [s.name for s in advice.strategies
            if s.judged_at_10 is not None and s.judged_at_10 < JUDGED_WARNING_PERCENT and s.tuning is None]


def advice_payload(advice: Advice, pooled: Sequence[str], settings: AdviceSettings, folder: Path,
                   offer: dict[str, Any] | None) -> dict[str, Any]:
    """What the page shows of an advice: the choice and why, each strategy's score with its interval,
    verdict and judged@10, the warning for those mostly unjudged, the commands to use next, the offer."""
    choice = advice.strategy(advice.recommendation.choice)
    rows = [strategy_row(s, advice.recommendation.best, advice.recommendation.choice, set(pooled))
            for s in advice.strategies]
    low = [row for row in rows if row["low"]]
    warning = "" if not low else (
        f"The top 10 of {', '.join(r['name'] for r in low)} was mostly unjudged (below "
        f"{JUDGED_WARNING_PERCENT:g}%): unjudged documents count as not relevant, so their scores are biased low.")
    index_dir = f"{folder.parent}-index"
    index = index_command(choice.name, folder / ADVICE_FILE, index_dir).replace(
        " SOURCE... ", f" {shlex.quote(settings.docs)} ", 1)
    return {"choice": choice.name, "best": advice.recommendation.best,
            "reason": advice.recommendation.reason.replace("**", ""),
            "strategies": rows, "warning": warning, "pool_back": offer,
            "commands": {"index": index, "search": shlex.join(["longembed", "search", "--index", index_dir,
                                                              "your question"]),
                         "serve": shlex.join(["longembed", "serve", "--index", index_dir])},
            "advice_md": str(folder / "advice.md")}


def strategy_row(strategy: StrategyResult, best: str, choice: str, pooled: set[str]) -> dict[str, Any]:
    """One row of the page's table."""
    interval = strategy.interval
    verdict = "best" if strategy.name == best else (strategy.versus_best.verdict if strategy.versus_best else "")
    judged = strategy.judged_at_10
    return {"name": strategy.name, "description": strategy.description, "score": round(strategy.score, 1),
            "low_bound": None if interval is None else round(interval.low, 1),
            "high_bound": None if interval is None else round(interval.high, 1),
            "verdict": verdict, "judged_at_10": judged, "pooled": strategy.name in pooled,
            "low": judged is not None and judged < JUDGED_WARNING_PERCENT, "choice": strategy.name == choice}
