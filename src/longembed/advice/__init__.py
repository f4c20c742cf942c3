"""``longembed advise``: which retrieval strategy to use for one model on one's own documents.

    >>> from longembed.advice import advise
    >>> advice = advise("path/to/all-MiniLM-L6-v2", max_length=4096, task_dirs=["my-contracts"], output_dir="advice")
    >>> advice.recommendation.choice

It runs the candidate strategies (BM25, the model truncated, the extension method that fits it, naive
and late chunks, each fused with BM25) as ordinary benchmark runs, measures what each costs on this
machine, compares each with the best on the same queries, and recommends the cheapest strategy that is
statistically tied with the best.  Modules: ``spec`` (the options and flags), ``candidates``, ``data``
(the data, read once, and its budget sample), ``estimate``, ``costs``, ``recommend``, ``markdown``,
``plot``, ``write``, and ``run`` (``advise``).  Names are imported on first use, so the command line's
``--help`` reads only ``spec``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.advice.candidates import Candidate, ModelFacts, plan_candidates
    from longembed.advice.recommend import compare_with_best, recommend
    from longembed.advice.run import advise, estimate_advice
    from longembed.advice.spec import AdviseSpec

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
