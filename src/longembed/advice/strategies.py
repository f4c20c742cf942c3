"""The strategies ``longembed advise`` measures for one model: which, and why the others are left out.

For a model with window Lo, asked about documents up to N tokens (``--max-length``):

* **bm25**: lexical retrieval (:class:`~longembed.retrieval.bm25.BM25Model`), no model at all;
* **truncate**: one vector per document from its first Lo tokens;
* **<method>-<N>**: one vector per document with the extension method that fits the model's position
  scheme (absolute -> pi, rotary -> ntk, ALiBi -> native: each method declares its ``schemes``), only
  when N > Lo; ``methods`` replaces the list;
* **naive-chunks**: the documents cut into chunks (``tokens:256``), each embedded alone by the plain
  model (a chunk fits its window, so no extension is needed); a document scores its best chunk;
* **late-chunks**: late chunking, the whole document run once (with the extension at N when there is
  one, else as windows of Lo) and each chunk the mean of its token states: mean-pooling models only;
* **trained-late-chunks** (with ``advise --contextual FOLDER``): late chunks of a model fine-tuned for them
  (``longembed train contextual``), run with the method and Lt it was trained under;
* **<dense>+bm25**: every strategy above but BM25, its ranking fused with BM25's (reciprocal rank
  fusion, k = 60): the dense vectors are reused from the cache, so a hybrid costs BM25's scoring only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longembed.chunking.spans import TokenChunking, parse_chunking
from longembed.errors import UserError
from longembed.extension.methods import ALIBI, APE, ROPE, check_method
from longembed.results.advice import BM25, DENSE, HYBRID

#: The extension method that fits each position scheme (LongEmbed's best training-free choice per family
#: that longembed can also export: PI for absolute positions, NTK for RoPE; ALiBi extrapolates natively).
EXTENSION_FOR_SCHEME = {APE: "pi", ROPE: "ntk", ALIBI: "native"}
TRUNCATE = "truncate"
#: The strategies named without a method: BM25, the chunk strategies.
BM25_NAME, NAIVE_CHUNKS, LATE_CHUNKS = "bm25", "naive-chunks", "late-chunks"
#: The late chunks of a ``longembed train contextual`` folder, and the key of its encoder.
TRAINED_LATE_CHUNKS, CONTEXTUAL = "trained-late-chunks", "contextual"
FUSION_SUFFIX = "+bm25"


@dataclass(frozen=True)
class Candidate:
    """One strategy to run: an ``evaluate_model`` run of an encoder (named by ``encoder``: "truncate" or
    an extension method; None for BM25) at a granularity, optionally fused with BM25 (``dense``: the
    strategy whose vectors a hybrid reuses)."""

    name: str
    kind: str
    description: str
    encoder: str | None = None
    granularity: str = "document"
    chunking: str = "tokens:256"
    late: bool = False
    dense: str | None = None
    #: the model this strategy runs, when not the advised one (a ``--contextual`` folder)
    model: str | None = None

    @property
    def chunked(self) -> bool:
        return self.granularity == "chunks"

    def eval_options(self) -> dict[str, Any]:
        """The ``evaluate_model`` options (``EvalSpec`` fields) of its run."""
        options: dict[str, Any] = {"granularity": self.granularity, "chunking": self.chunking, "late": self.late}
        if self.kind == HYBRID:
            options.update(fuse="bm25", fuse_method="rrf")
        return options


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
    model: ModelFacts, max_length: int | None, methods: list[str] | None = None, chunking: str = "tokens:256",
    contextual: ContextualFacts | None = None,
) -> tuple[list[Candidate], dict[str, str]]:
    """The strategies to measure, in the order advice lists them, and those left out with the reason
    (with ``contextual``, the trained folder's late chunks too).

    Errors (ValueError): ``max_length`` below Lo; ``methods`` given without a ``max_length`` above Lo, naming
    truncate (always a candidate), or a method that does not fit the model's positions; chunks of
    ``chunking`` longer than the model's window.
    """
    lo = model.original_length
    if max_length is not None and max_length < lo:
        raise UserError(f"--max-length {max_length} is below the model's window Lo = {lo}: advice about "
                         f"documents that short needs no extension (leave --max-length out)")
    _check_chunking(chunking, lo)
    left_out: dict[str, str] = {}
    extensions = _extension_methods(model, max_length, methods, left_out)
    dense = [Candidate(TRUNCATE, DENSE, f"one vector per document from its first {lo} tokens", TRUNCATE)]
    dense += [Candidate(f"{m}-{max_length}", DENSE, f"one vector per document, {m} extending the window to "
                        f"{max_length} tokens", m) for m in extensions]
    dense.append(Candidate(NAIVE_CHUNKS, DENSE, f"chunks ({chunking}) embedded alone, a document scored by its best "
                           "chunk", TRUNCATE, "chunks", chunking, late=False))
    if model.pooling == "mean":
        context = f"{extensions[0]} at {max_length}" if extensions else f"windows of {lo}"
        dense.append(Candidate(LATE_CHUNKS, DENSE, f"late chunks ({chunking}): one pass over the document "
                               f"({context}), a chunk the mean of its token states", extensions[0] if extensions
                               else TRUNCATE, "chunks", chunking, late=True))
    else:
        left_out[LATE_CHUNKS] = (f"late chunking mean-pools each chunk's token states, and this model pools with "
                                 f"{model.pooling!r} (its vectors were trained that way)")
    if contextual is not None:
        dense.append(Candidate(TRAINED_LATE_CHUNKS, DENSE, f"late chunks ({chunking}) of the model fine-tuned for them "
                               f"({contextual.folder}, run with {contextual.method} at {contextual.max_length})",
                               CONTEXTUAL, "chunks", chunking, late=True, model=contextual.folder))
    hybrids = [Candidate(c.name + FUSION_SUFFIX, HYBRID, f"{c.name} fused with BM25 (reciprocal rank fusion, k = 60)",
                         c.encoder, c.granularity, c.chunking, c.late, dense=c.name, model=c.model) for c in dense]
    return [Candidate(BM25_NAME, BM25, "BM25 (lexical; no model)"), *dense, *hybrids], left_out


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
