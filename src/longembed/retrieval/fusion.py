"""Hybrid retrieval: a dense ranking fused with BM25's (the options; the arithmetic is
:mod:`longembed.retrieval.rank_fusion`, kept apart so that ``longembed eval --help`` imports no numpy).
``longembed eval`` and ``longembed search`` both fuse through here, so they cannot drift apart.

BM25 is the strongest single system on LongEmbed's real tasks (the paper's Table 7, and our QMSum
runs); fusing it with an embedding model's ranking is what a RAG system would deploy.  Two rules:

- **rrf** (reciprocal rank fusion, Cormack, Clarke and Buettcher, SIGIR 2009): a document scores
  ``sum over systems of 1 / (k + rank)``, k = 60 as in the paper.  Ranks are competition ranks
  (1 + the number of documents a system scores strictly higher), so a system's ties share a rank and
  the input order never decides.  A document BM25 scores 0 (it shares no term with the query) is not
  in BM25's ranking, as it would not be in a Lucene index's answer: it gets nothing from BM25.
- **linear**: each system's scores min-max normalised per query over the candidate documents, then
  ``(1 - w) * dense + w * bm25``; ``w`` (``--fuse-weight``) is the lexical side's weight.

A document outside a query's candidate set (``-inf``, e.g. another context's passages on a passage
task) stays ``-inf``.

**Ties.**  RRF of two systems ties often: ranks (1, 3) and (3, 1), or (2, 2), give the same sum, and on
a QMSum set of 35 meetings half of the queries had a tie somewhere in their fused list.  Breaking such
ties by document id lets the names of the files move the score (2 nDCG@10 points there).  So fused ties
are broken by :func:`~longembed.retrieval.rank_fusion.tie_break_scores`: the sum of the two systems'
min-max-normalised scores (CombSUM, Fox and Shaw 1994).  RRF keeps only ranks; the normalised sum puts
back how far ahead each system put the document, which is the information RRF threw away, and it
treats the two systems symmetrically (no system is preferred by fiat).  Under the linear mix the same
key breaks ties of the weighted sum (with w = 0.5 it is that sum, so only the id is left).  Documents
tied on both keys (the same text twice, say) are ordered by document id, ascending: the last resort,
which carries no information and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longembed.errors import UserError

#: what a dense ranking can be fused with (``--fuse``), and how (``--fuse-method``).
FUSE_SOURCES = ("bm25",)
FUSE_METHODS = ("rrf", "linear")
RRF_K = 60  # Cormack et al. 2009
LINEAR_WEIGHT = 0.5


@dataclass(frozen=True)
class Fusion:
    """How a dense ranking is fused with a lexical one: ``source`` (bm25), ``method`` (rrf or
    linear), ``k`` (rrf's constant) and ``weight`` (linear's lexical weight)."""

    source: str = "bm25"
    method: str = "rrf"
    k: int = RRF_K
    weight: float = LINEAR_WEIGHT

    def __post_init__(self) -> None:
        if self.source not in FUSE_SOURCES:
            raise UserError(f"fuse must be one of {FUSE_SOURCES}, got {self.source!r}")
        if self.method not in FUSE_METHODS:
            raise UserError(f"fuse_method must be one of {FUSE_METHODS}, got {self.method!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise UserError(f"fuse_k must be a positive integer (rrf's k; 60 in Cormack et al.), got {self.k!r}")
        if isinstance(self.weight, bool) or not isinstance(self.weight, int | float) or not 0 <= self.weight <= 1:
            raise UserError(f"fuse_weight must be in [0, 1] (the lexical side's weight), got {self.weight!r}")

    def describe(self) -> str:
        """The rule in words, as advice prints it: "reciprocal rank fusion, k = 60" or "a linear mix of
        min-max normalised scores, bm25 weight 0.5"."""
        if self.method == "rrf":
            return f"reciprocal rank fusion, k = {self.k}"
        return f"a linear mix of min-max normalised scores, {self.source} weight {self.weight:g}"

    @classmethod
    def from_options(
        cls, source: str | None, method: str | None = None, weight: float | None = None, k: int | None = None
    ) -> Fusion | None:
        """The fusion a run asks for (None: no fusion).  Options that the chosen method does not use
        are errors rather than silently ignored: a weight with rrf, k with linear, either without a
        source."""
        if source is None:
            given = [name for name, value in (("fuse_method", method), ("fuse_weight", weight), ("fuse_k", k))
                     if value is not None]
            if given:
                raise UserError(f"{', '.join(given)} given without fuse (e.g. fuse='bm25', --fuse bm25)")
            return None
        method = method or "rrf"
        if method == "rrf" and weight is not None:
            raise UserError("fuse_weight is the linear mix's weight; with rrf set fuse_k, or use fuse_method='linear'")
        if method == "linear" and k is not None:
            raise UserError("fuse_k is rrf's constant; with linear set fuse_weight, or use fuse_method='rrf'")
        return cls(source, method, RRF_K if k is None else k, LINEAR_WEIGHT if weight is None else weight)

    def to_dict(self) -> dict[str, Any]:
        """As recorded in results.json's config (only the parameter the method uses)."""
        parameter = {"k": self.k} if self.method == "rrf" else {"weight": self.weight}
        return {"source": self.source, "method": self.method, **parameter}
