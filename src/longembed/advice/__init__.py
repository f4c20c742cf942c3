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

**advice.json** (``"format": "longembed-advice/2"``; :class:`longembed.results.advice.Advice`, key for
key), what other tools read::

    {
      "format": "longembed-advice/2",
      "recommended": "naive-chunks",            # the strategy to use (= recommendation.choice)
      "margin": 2.0,                            # points of the score a cheaper strategy may lose
      "model": "...", "position_scheme": "ape", "pooling": "mean", "original_length": 512,
      "max_length": 4096, "tasks": ["mine"],
      "recommendation": {"best": "late-chunks+bm25", "choice": "naive-chunks", "margin": 2.0,
                         "within": [...], "undecided": [...], "cost_order": "...",
                         "reason": "the headline", "more_queries": "..."},
      "strategies": [                           # every strategy, in the order advise ran them
        {"name": "naive-chunks", "description": "...", "kind": "dense",   # or "bm25", "hybrid"
         "run": "runs/naive-chunks", "score": 96.6, "interval": {"estimate", "low", "high", ...},
         "config": {                            # exactly its `longembed eval` options, keyed as the flags
           "model": "default", "method": "truncate", "max_length": 512,
           "granularity": "chunks",             # or "document"
           "chunking": "tokens:256", "late": false,          # null for "document"
           "fuse": null, "fuse_method": null, "fuse_weight": null, "fuse_k": null,  # "bm25", "rrf", null, 60
           ...                                  # any encoder option advise was given (prompts, dtype, ...),
         },                                     # query_prompt / document_prompt / batch_size when set
         "commands": {"eval": "longembed eval ...", "serve": "longembed serve ...",   # no serve for bm25
                      "index": "longembed index SOURCE... --index DIR --from-advice advice.json --strategy NAME"},
         "cost": {"encode_seconds_per_1k_tokens", "vectors_per_document", "dimensions", "index_bytes",
                  "query_latency_ms", "index"},
         "versus_best": null or {"difference": interval (95%), "bound": interval (simultaneous; low is the
                                 bound the rule reads), "verdict": "within" | "worse" | "undecided",
                                 "queries", "queries_needed", "level", "p_value", "p_method", "p_adjusted",
                                 "significant"},
         "method": "truncate", "max_length": 512, "granularity": {...}, "fusion": null, "hubs": {...}},
        ...
      ],
      "estimate": {"strategies": [{"name", "seconds", "actual_seconds", "tokens_to_encode", ...}], ...},
      "sampling": null or {...}, "measurement": {...}, "wall_time_s": ..., "created": "..."
    }

BM25's config is ``{"model": "bm25", "method": null, "max_length": null, "granularity": "document",
...}``.  A hybrid's config is its dense strategy's plus ``fuse``/``fuse_method``/``fuse_k``.
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
