"""The strategies ``longembed advise`` measures for one model, each a named
:class:`~longembed.retrieval.strategy.Strategy`, and why the others are left out (the list and its
reasons: docs/guides/advise.md, "Strategies")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from longembed.chunking.spans import TokenChunking, chunk_overlap, overlapping, parse_chunking
from longembed.errors import UserError
from longembed.extension.methods import ALIBI, APE, ROPE, check_method
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.strategy import (
    BM25,
    CHUNKS,
    FUSION_SUFFIX,
    LATE_CHUNKS,
    LATE_TOKENS,
    OVERLAP_NAIVE_CHUNKS,
    TRAINED_LATE_CHUNKS,
    TRUNCATE,
    TUNED_SUFFIX,
    Strategy,
)

#: The extension method that fits each position scheme (LongEmbed's best training-free choice per family
#: that longembed can also export: PI for absolute positions, NTK for RoPE; ALiBi extrapolates natively).
EXTENSION_FOR_SCHEME = {APE: "pi", ROPE: "ntk", ALIBI: "native"}
#: Why late interaction is not a candidate yet: advise recommends what ``index`` + ``search`` reproduce.
LATE_INTERACTION_LEFT_OUT = (
    "late interaction (late-tokens, naive-tokens: one vector per token, MaxSim) runs in `longembed eval "
    "--granularity tokens` only: an index keeps no token vectors yet, so its recommended command could not "
    "reproduce its score (issue 56)")



class Candidate(NamedTuple):
    """One strategy advise measures: the name it reports, the :class:`~longembed.retrieval.strategy.Strategy`
    its run evaluates, and a line saying what it does."""

    name: str
    strategy: Strategy
    description: str
    #: a tuned fusion: the hybrid whose stored scores it is fitted on (its ``strategy`` is that hybrid's
    #: until advise fits the rule; :mod:`longembed.evaluation.fusion_tuning`)
    tuned_from: str | None = None


@dataclass(frozen=True)
class ModelFacts:
    """What the candidates depend on: the model's position scheme, pooling and window Lo."""

    position_scheme: str
    pooling: str
    original_length: int


@dataclass(frozen=True)
class ContextualFacts:
    """A ``longembed train contextual`` folder: where it is, and the method and Lt it runs with."""

    folder: str
    method: str
    max_length: int | None


def plan_candidates(
    model: ModelFacts, max_length: int | None, methods: list[str] | None = None, base: Strategy | None = None,
    contextual: ContextualFacts | None = None,
) -> tuple[list[Candidate], dict[str, str]]:
    """The strategies to measure, in the order advice lists them, and those left out with the reason
    (with ``contextual``, the trained folder's late chunks too).  ``base``: the advised model's strategy
    (its model, encoder options, chunking and prompts), which every candidate varies.

    Errors (UserError): ``max_length`` below Lo; ``methods`` given without a ``max_length`` above Lo, naming
    truncate (always a candidate), or a method that does not fit the model's positions; chunks of
    ``base.chunking`` longer than the model's window.
    """
    base = base or Strategy()
    lo, chunking = model.original_length, base.chunking
    if max_length is not None and max_length < lo:
        raise UserError(f"--max-length {max_length} is below the model's window Lo = {lo}: advice about "
                         f"documents that short needs no extension (leave --max-length out)")
    _check_chunking(chunking, lo)
    left_out: dict[str, str] = {}
    extensions = _extension_methods(model, max_length, methods, left_out)
    truncate = replace(base, method=TRUNCATE, max_length=None, granularity="document")
    dense = [Candidate(TRUNCATE, truncate, f"one vector per document from its first {lo} tokens")]
    dense += [Candidate(f"{m}-{max_length}", replace(truncate, method=m, max_length=max_length),
                        f"one vector per document, {m} extending the window to {max_length} tokens") for m in extensions]
    naive = replace(truncate, granularity=CHUNKS, late=False)
    dense.append(Candidate(naive.name, naive, f"chunks ({chunking}) embedded alone, a document scored by its best chunk"))
    dense += _overlapping_candidate(naive, left_out)
    if model.pooling == "mean":
        context = f"{extensions[0]} at {max_length}" if extensions else f"windows of {lo}"
        late = replace(truncate, granularity=CHUNKS, late=True, method=extensions[0] if extensions else TRUNCATE,
                       max_length=max_length if extensions else None)
        dense.append(Candidate(LATE_CHUNKS, late, f"late chunks ({chunking}): one pass over the document "
                               f"({context}), a chunk the mean of its token states"))
    else:
        left_out[LATE_CHUNKS] = (f"late chunking mean-pools each chunk's token states, and this model pools with "
                                 f"{model.pooling!r} (its vectors were trained that way)")
    if contextual is not None:
        trained = replace(truncate, model=contextual.folder, method=contextual.method, max_length=contextual.max_length,
                          granularity=CHUNKS, late=True)
        dense.append(Candidate(TRAINED_LATE_CHUNKS, trained, f"late chunks ({chunking}) of the model fine-tuned for "
                               f"them ({contextual.folder}, run with {contextual.method} at {contextual.max_length})"))
    left_out[LATE_TOKENS] = LATE_INTERACTION_LEFT_OUT
    hybrids = [Candidate(c.name + FUSION_SUFFIX, replace(c.strategy, fuse=BM25),
                         f"{c.name} fused with BM25 ({Fusion(BM25).describe()})") for c in dense]
    tuned = [Candidate(c.name + TUNED_SUFFIX, c.strategy, f"{c.name[: -len(FUSION_SUFFIX)]} fused with BM25 by the "
                       "rule cross-validated on your queries (scored out-of-fold)", tuned_from=c.name) for c in hybrids]
    lexical = Candidate(BM25, Strategy(BM25), "BM25 (lexical; no model)")
    return [lexical, *dense, *hybrids, *tuned], left_out


def _overlapping_candidate(naive: Strategy, left_out: dict[str, str]) -> list[Candidate]:
    """Naive chunks whose neighbours share an eighth of their tokens, beside the naive chunks that do not:
    a boundary moved by two tokens moved a score 3 points (issue 54), and a passage cut by one boundary
    is whole in the next chunk.  None when the naive chunks overlap already, or cannot (said in
    ``left_out``).  Late chunks are not doubled: each of their chunks has seen the text around it."""
    if chunk_overlap(naive.chunking):
        return []
    try:
        chunking = overlapping(naive.chunking)
    except UserError as exc:
        left_out[OVERLAP_NAIVE_CHUNKS] = str(exc)
        return []
    strategy = replace(naive, chunking=chunking)
    return [Candidate(OVERLAP_NAIVE_CHUNKS, strategy, f"chunks ({chunking}: neighbours share "
                      f"{chunk_overlap(chunking)} tokens) embedded alone, a document scored by its best chunk")]


def _extension_methods(
    model: ModelFacts, max_length: int | None, methods: list[str] | None, left_out: dict[str, str]
) -> list[str]:
    """The extension methods to run at ``max_length`` (checked against the model's scheme), or none when
    there is nothing to extend (said in ``left_out``)."""
    lo = model.original_length
    if max_length is None or max_length == lo:
        if methods:
            raise UserError(f"--methods extend the model's window to --max-length, which must be above its Lo = {lo}")
        left_out["extension"] = f"no --max-length above the model's window (Lo = {lo}): nothing to extend"
        return []
    if methods is None:
        methods = [EXTENSION_FOR_SCHEME[model.position_scheme]]
    if TRUNCATE in methods:
        raise UserError("truncate is always a candidate: list only extension methods in --methods")
    if len(set(methods)) != len(methods):
        raise UserError(f"--methods lists a method twice: {list(methods)}")
    for method in methods:
        check_method(method, model.position_scheme)
    return list(methods)


def _check_chunking(chunking: str, lo: int) -> None:
    """Token chunks must fit the plain model's window (naive chunks are embedded without extension)."""
    rule = parse_chunking(chunking)
    if isinstance(rule, TokenChunking) and rule.size >= lo:
        raise UserError(f"chunking {chunking!r} makes chunks of {rule.size} tokens, and the model's window is "
                         f"Lo = {lo} (special tokens and prompt included): choose tokens:SIZE with SIZE < {lo}")
