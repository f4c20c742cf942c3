"""``longembed advise``: which retrieval strategy to use for one model on one's own documents.

    >>> from longembed.advice import advise
    >>> advice = advise("path/to/all-MiniLM-L6-v2", max_length=4096, task_dirs=["my-contracts"], output_dir="advice")
    >>> advice.recommendation.choice

It runs the candidate strategies (BM25, the model truncated, the extension method that fits it, naive
and late chunks, each fused with BM25) as ordinary benchmark runs, measures what each costs on this
machine, compares each with the best on the same queries, and recommends the cheapest strategy shown to
be within a margin of the best (non-inferiority, a lower bound simultaneous over the strategies:
:mod:`.recommend`).  Modules: ``spec`` (the options and flags), ``strategies`` (which ones, and why),
``data`` (the data, read once, and its budget sample), ``estimate``, ``costs``, ``recommend``,
``commands`` (each strategy's configuration and commands), ``markdown``, ``plot``, ``write``, and
``advisor`` (``advise``).  Names are imported on first use, so the command line's ``--help`` reads only ``spec``.

The advice.json it writes is described in the docs (Reference: advice.json).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.advice.advisor import advise, estimate_advice
    from longembed.advice.recommend import compare_with_best, recommend
    from longembed.advice.spec import AdviseSpec
    from longembed.advice.strategies import Candidate, ModelFacts, plan_candidates

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
