"""A judging session: the questions (asked on the page, or queued from a file), each pooled once and
judged result by result into a :class:`~longembed.tasks.judgment_log.JudgmentLog`.

What the page gets of a question (:meth:`JudgingSession.payload`) is its id, text, the pooled results in
the recorded order (each with its grade, or None) and where to start: no strategy, rank or score.
The progress (:meth:`JudgingSession.progress`) counts the questions fully judged, the judgments made,
the results left in the questions asked, and the questions still queued.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from longembed.judging.pool import POOL_DEPTH, Searcher, pool_question
from longembed.tasks.judgment_log import JudgedQuestion, JudgmentLog


@dataclass
class JudgingSession:
    """The pooled strategies' searches, the log, the pool depth and seed, and the queued questions."""

    log: JudgmentLog
    searchers: Mapping[str, Searcher]
    depth: int = POOL_DEPTH
    seed: int = 0
    queued: Sequence[str] = ()
    _pooling: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def strategies(self) -> list[str]:
        return list(self.searchers)

    def ask(self, text: str) -> dict[str, Any]:
        """The question ``text``, pooled now if it was never asked (its pool recorded), else as recorded."""
        with self._pooling:  # two tabs asking the same new question pool it once
            asked = self.log.asked(text)
            if asked is None:
                pooled = pool_question(text.strip(), self.searchers, self.depth, self.seed)
                asked = self.log.ask(text, [r.to_page() for r in pooled], self.depth, self.strategies, self.seed,
                                     ranks={r.doc_id: r.ranks for r in pooled})
        return self.payload(asked)

    def extend_pools(self) -> tuple[int, int]:
        """Pool this session's strategies into the questions asked before without them, or pooled less
        deep than this session's depth (``advise``'s warning: a strategy judged too little); their new
        results join the pool's end; (questions extended, results added)."""
        extended = added = 0
        for question in self.log.questions():
            deeper = question.pool_depth < self.depth
            missing = {name: search for name, search in self.searchers.items()
                       if deeper or name not in question.strategies}
            if not missing:
                continue
            pooled = pool_question(question.text, missing, self.depth, self.seed)
            before = len(question.pool)
            after = self.log.extend(question.query_id, list(missing), [r.to_page() for r in pooled],
                                    {r.doc_id: r.ranks for r in pooled}, self.depth)
            extended, added = extended + 1, added + len(after.pool) - before
        return extended, added

    def unpooled(self, searchers: Mapping[str, Searcher], depth: int) -> int:
        """How many results :meth:`pool_more` with these arguments would add to the questions asked: what
        judging them costs (the page's "judge these 23 results")."""
        merged = {**self.searchers, **searchers}
        added = 0
        for question in self.log.questions():
            deeper = question.pool_depth < depth
            found = {str(result["id"]) for name, search in merged.items() if deeper or name not in question.strategies
                     for result in list(search(question.text, depth))[:depth]}
            added += len(found - set(question.pool))
        return added

    def pool_more(self, searchers: Mapping[str, Searcher], depth: int) -> tuple[int, int]:
        """Pool ``searchers`` too, ``depth`` deep at least, from now on and into every question asked
        (:meth:`extend_pools`); (questions extended, results added)."""
        with self._pooling:
            self.searchers = {**self.searchers, **searchers}
            self.depth = max(self.depth, depth)
            return self.extend_pools()

    def question(self, query_id: str) -> dict[str, Any]:
        return self.payload(self.log.question(query_id))

    def judge(self, query_id: str, doc_id: str, grade: int) -> dict[str, Any]:
        """Record the grade; the question as it now stands and the progress."""
        question = self.log.judge(query_id, doc_id, grade)
        return {"question": self.payload(question), "progress": self.progress()}

    def next_question(self) -> dict[str, Any] | None:
        """Where to go on: the first asked question with results left, else the first queued question not
        asked yet (pooled now), else None (all judged)."""
        questions = self.log.questions()
        unfinished = next((q for q in questions if q.left), None)
        if unfinished is not None:
            return self.payload(unfinished)
        asked = {q.text for q in questions}
        waiting = next((text for text in self.queued if text.strip() not in asked), None)
        return None if waiting is None else self.ask(waiting)

    def progress(self) -> dict[str, Any]:
        questions = self.log.questions()
        asked = {q.text for q in questions}
        return {
            "questions": len(questions),
            "questions_done": sum(1 for q in questions if q.pool and not q.left),
            "judgments": sum(len(q.grades) for q in questions),
            "results_left": sum(q.left for q in questions),
            "queued": sum(1 for text in dict.fromkeys(t.strip() for t in self.queued) if text and text not in asked),
            "depth": self.depth,
            "strategies": len(self.searchers),
            "list": [{"query_id": q.query_id, "text": q.text, "size": len(q.pool), "left": q.left}
                     for q in questions],
        }

    def payload(self, question: JudgedQuestion) -> dict[str, Any]:
        """What the page shows of ``question`` (module docstring)."""
        return {"query_id": question.query_id, "text": question.text, "left": question.left,
                "next": question.next_unjudged(),
                "results": [{**shown, "grade": question.grades.get(shown["doc_id"])} for shown in question.shown]}
