"""A retrieval strategy, one frozen value: which model and extension, what a document vector is, whether
BM25 is fused in, and the prompts.  Eval runs one, advise compares several, an index is built with one,
and advice.json, an index's metadata and results.json all record :meth:`Strategy.to_dict`.

The fields are also ``longembed eval`` / ``longembed index``'s strategy flags (the encoder's own fields,
``model``, ``method``, ``max_length`` and its options, come from the encoder's flags).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from longembed.chunking.spans import chunk_overlap, overlapping, parse_chunking
from longembed.errors import UserError
from longembed.flag_fields import flag_field
from longembed.retrieval.fusion import FUSE_METHODS, FUSE_SOURCES, Fusion

#: ``model`` of a strategy that is BM25 alone (no vectors).
BM25 = "bm25"
DOCUMENT, CHUNKS, TOKENS = "document", "chunks", "tokens"
GRANULARITIES = (DOCUMENT, CHUNKS, TOKENS)
#: What a strategy is: lexical only, dense only, or a dense ranking fused with BM25's.
DENSE, HYBRID = "dense", "hybrid"
#: The names :meth:`Strategy.from_name` reads and :attr:`Strategy.name` gives.
TRUNCATE, NAIVE_CHUNKS, LATE_CHUNKS, FUSION_SUFFIX = "truncate", "naive-chunks", "late-chunks", "+bm25"
#: A hybrid's tuned twin in advise is called ``<hybrid>-tuned`` (``late-chunks+bm25-tuned``): its rule was
#: fitted to the user's queries, so the name says so rather than naming the rule it happened to fit.
TUNED_SUFFIX = "-tuned"
#: Naive chunks whose neighbours share tokens (``tokens:SIZE:OVERLAP``): a chunk boundary cuts no passage
#: that one chunk does not also hold whole (up to the overlap).
OVERLAP_NAIVE_CHUNKS = "naive-chunks-overlap"
#: Late interaction (``--granularity tokens``, ColBERT's MaxSim over one vector per token): the token states of
#: one pass over the whole document (``--late``, as windows of Lt) or of each chunk embedded alone (``--naive``).
LATE_TOKENS, NAIVE_TOKENS = "late-tokens", "naive-tokens"
#: Why index / search / serve refuse ``--granularity tokens`` for now.
TOKENS_NOT_SEARCHABLE = ("--granularity tokens (late interaction, MaxSim) runs in eval only for now (issue 56): "
                         "an index stores one vector per document or chunk, not per token")
#: What advise calls the late chunks of a ``longembed train contextual`` folder (a name :attr:`Strategy.name`
#: gives as late-chunks).
TRAINED_LATE_CHUNKS = "trained-late-chunks"
DEFAULT_CHUNKING = "tokens:256"
#: ``to_dict`` keys of older files that describe how a run ran, not the strategy (ignored when read).
RUN_ONLY_KEYS = ("batch_size", "device")

CHUNK_GROUP = "chunks (retrieve passages, not only documents)"
HYBRID_GROUP = "hybrid retrieval (the dense ranking fused with BM25's)"
PROMPT_GROUP = "benchmark"


@dataclass(frozen=True)
class Strategy:
    """One retrieval strategy (see the module docstring).

    ``model``: a model folder or name, ``"bm25"`` for BM25 alone, or None for "the encoder at hand" (a
    Python ``evaluate_model`` call; the run records the encoder's name).  ``method``, ``max_length``,
    ``encoder_options``: the encoder (``load_encoder``'s arguments).  ``granularity``: ``document`` (one
    vector per document) or ``chunks`` (a document scores its best chunk), cut by ``chunking``, late or
    naive.  ``fuse`` (``bm25``) with ``fuse_method`` rrf (``fuse_k``) or linear (``fuse_weight``): the
    dense ranking fused with BM25's.  ``query_prompt``, ``document_prompt``: None for the model's own.
    """

    model: str | None = flag_field("the model (the encoder's --model flag)", None, flag=False)
    method: str | None = flag_field("the extension method (the encoder's --method flag)", None, flag=False)
    max_length: int | None = flag_field("Lt (the encoder's --max-length flag)", None, flag=False)
    encoder_options: Mapping[str, Any] = flag_field("load_encoder's other options (the encoder's flags)",
                                                    default_factory=dict, flag=False)
    granularity: str = flag_field(
        "document: one vector per document; chunks: a document scores its best chunk (MaxSim), and a passage "
        "task (qmsum_passages) embeds its passages with their context; tokens: late interaction, one vector per "
        "token, a document scores the sum over query tokens of its best-matching token (ColBERT's MaxSim), its "
        "tokens from one pass over the whole document (--late) or from each chunk alone (--naive; eval only) "
        "(default: document)",
        DOCUMENT, choices=GRANULARITIES, group=CHUNK_GROUP, show_default=False,
    )
    chunking: str = flag_field("with --granularity chunks: tokens:SIZE[:OVERLAP] or sentences:N (default "
                               "tokens:256)", DEFAULT_CHUNKING, group=CHUNK_GROUP, metavar="SPEC", show_default=False)
    late: bool = flag_field("", True, group=CHUNK_GROUP, show_default=False, switches={
        "--late": (True, "late chunking: one pass over the whole document, chunk = mean of its token states "
                   "(with --granularity tokens: each token's own state) (default)"),
        "--naive": (False, "naive chunking: every chunk embedded alone"),
    })
    fuse: str | None = flag_field(
        "fuse the dense ranking with this lexical one (bm25), on any granularity (default: none)", None,
        choices=FUSE_SOURCES, group=HYBRID_GROUP, show_default=False,
    )
    fuse_method: str | None = flag_field(
        "rrf: reciprocal rank fusion, sum of 1/(k + rank) (Cormack et al. 2009); linear: min-max normalised "
        "scores mixed by --fuse-weight (default: rrf)", None, choices=FUSE_METHODS, group=HYBRID_GROUP,
        show_default=False,
    )
    fuse_weight: float | None = flag_field(
        "with --fuse-method linear: the BM25 side's weight w in (1 - w) dense + w bm25 (default 0.5)", None,
        type=float, metavar="W", group=HYBRID_GROUP, show_default=False,
    )
    fuse_k: int | None = flag_field("with rrf: the constant k (default 60, the paper's)", None, type=int,
                                    metavar="K", group=HYBRID_GROUP, show_default=False)
    query_prompt: str | None = flag_field(
        "prefix of every query (default: the model's 'query' prompt, else none; '' for none)", None,
        group=PROMPT_GROUP, show_default=False,
    )
    document_prompt: str | None = flag_field(
        "prefix of every document (default: the model's 'document' or 'passage' prompt)", None,
        group=PROMPT_GROUP, show_default=False,
    )

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise UserError(f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}")
        if not isinstance(self.late, bool):
            raise UserError(f"late must be true or false, got {self.late!r}")
        # one spelling of each chunking ("tokens:256:0" is "tokens:256"), so equal strategies compare, cache
        # and round-trip (advice.json, an index's metadata) alike
        object.__setattr__(self, "chunking", str(parse_chunking(self.chunking)))
        if self.multivector and self.late:  # one pass over the document: no chunking decides its tokens
            object.__setattr__(self, "chunking", DEFAULT_CHUNKING)
        fusion = Fusion.from_options(self.fuse, self.fuse_method, self.fuse_weight, self.fuse_k)
        if self.lexical_only and (fusion is not None or self.granularity != DOCUMENT):
            raise UserError(f"--fuse bm25 and --granularity {CHUNKS}/{TOKENS} need an embedding model: model bm25 is "
                             "BM25 alone (for a hybrid give --model MODEL --fuse bm25)")
        # one spelling of each fusion: the method's own parameter set, the other None
        normal = {"fuse_method": None, "fuse_k": None, "fuse_weight": None}
        if fusion is not None:
            normal = {"fuse_method": fusion.method, "fuse_k": fusion.k if fusion.method == "rrf" else None,
                      "fuse_weight": fusion.weight if fusion.method == "linear" else None}
        for name, value in normal.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "encoder_options", dict(sorted(dict(self.encoder_options).items())))

    # ------------------------------------------------------------------ what it is
    @property
    def lexical_only(self) -> bool:
        return self.model == BM25

    @property
    def chunked(self) -> bool:
        return self.granularity == CHUNKS

    @property
    def multivector(self) -> bool:
        """Late interaction: one vector per token, scored by MaxSim (``granularity`` tokens)."""
        return self.granularity == TOKENS

    @property
    def cuts_chunks(self) -> bool:
        """Whether ``chunking`` decides the vectors: chunks, or the tokens of naive chunks."""
        return self.chunked or (self.multivector and not self.late)

    @property
    def fusion(self) -> Fusion | None:
        """The :class:`~longembed.retrieval.fusion.Fusion` rule (None: no fusion)."""
        return Fusion.from_options(self.fuse, self.fuse_method, self.fuse_weight, self.fuse_k)

    @property
    def kind(self) -> str:
        """``bm25``, ``dense`` or ``hybrid``."""
        return BM25 if self.lexical_only else HYBRID if self.fuse is not None else DENSE

    @property
    def systems(self) -> list[str]:
        """The rankings a search combines: ["bm25"], ["dense"] or ["dense", "bm25"]."""
        return {BM25: [BM25], DENSE: ["dense"], HYBRID: ["dense", BM25]}[self.kind]

    @property
    def dense(self) -> Strategy:
        """The dense strategy whose vectors this one ranks (itself without fusion)."""
        return replace(self, fuse=None, fuse_method=None, fuse_k=None, fuse_weight=None)

    def fused_by(self, fusion: Fusion) -> Strategy:
        """This strategy's dense side fused with BM25 by ``fusion`` (advise's tuned rule, say)."""
        return replace(self, fuse=fusion.source, fuse_method=fusion.method, fuse_k=fusion.k if fusion.method == "rrf" else None,
                       fuse_weight=fusion.weight if fusion.method == "linear" else None)

    @property
    def name(self) -> str:
        """The name advise gives this strategy: ``bm25``, ``truncate``, ``pi-4096``, ``naive-chunks``,
        ``naive-chunks-overlap`` (token chunks sharing tokens with their neighbours), ``late-chunks``,
        ``late-tokens`` / ``naive-tokens`` (late interaction), a dense one with ``+bm25`` (``+bm25-linear`` for
        the linear mix)."""
        if self.lexical_only:
            return BM25
        method = self.method or TRUNCATE
        if self.chunked:
            base = LATE_CHUNKS if self.late else OVERLAP_NAIVE_CHUNKS if chunk_overlap(self.chunking) else NAIVE_CHUNKS
        elif self.multivector:
            base = LATE_TOKENS if self.late else NAIVE_TOKENS
        else:
            base = method if method == TRUNCATE or self.max_length is None else f"{method}-{self.max_length}"
        if self.fuse is None:
            return base
        return base + FUSION_SUFFIX + ("" if self.fuse_method == "rrf" else f"-{self.fuse_method}")

    # ------------------------------------------------------------------ names
    @classmethod
    def from_name(cls, name: str, model: str | None, base: Strategy | None = None) -> Strategy:
        """The strategy advise calls ``name``, for ``model`` (any but ``bm25`` needs one); ``base`` gives
        what the name leaves open (the encoder's options, the chunking, late chunking's method and length,
        the prompts)."""
        base = base or cls()
        if name == BM25:
            return cls(BM25)
        if model is None or model == BM25:
            raise UserError(f"--strategy {name} needs --model (the embedding model it ran)")
        if name.endswith(FUSION_SUFFIX + TUNED_SUFFIX):
            raise UserError(f"--strategy {name}: a tuned fusion's rule was fitted to advise's queries and is recorded "
                             f"in its advice.json: give --from-advice ADVICE.json --strategy {name}, or the strategy's flags "
                             "with the rule's (--fuse bm25 --fuse-method linear --fuse-weight W, as advice prints them)")
        dense, fused = (name[: -len(FUSION_SUFFIX)], True) if name.endswith(FUSION_SUFFIX) else (name, False)
        common = replace(base, model=model, granularity=DOCUMENT, fuse=BM25 if fused else None, fuse_method=None,
                         fuse_k=None, fuse_weight=None)
        if dense == TRUNCATE:
            return replace(common, method=TRUNCATE, max_length=None)
        if dense == NAIVE_CHUNKS:
            if chunk_overlap(base.chunking):
                raise UserError(f"--strategy {name} names chunks without overlap, and --chunking {base.chunking} "
                                 f"overlaps: give --strategy {OVERLAP_NAIVE_CHUNKS}{name[len(dense):]}, or a chunking "
                                 "without overlap")
            return replace(common, method=TRUNCATE, max_length=None, granularity=CHUNKS, late=False)
        if dense == OVERLAP_NAIVE_CHUNKS:
            return replace(common, method=TRUNCATE, max_length=None, granularity=CHUNKS, late=False,
                           chunking=overlapping(base.chunking))
        if dense == LATE_CHUNKS:
            return replace(common, method=base.method or TRUNCATE, granularity=CHUNKS, late=True)
        if dense == LATE_TOKENS:
            return replace(common, method=base.method or TRUNCATE, granularity=TOKENS, late=True)
        if dense == NAIVE_TOKENS:
            return replace(common, method=TRUNCATE, max_length=None, granularity=TOKENS, late=False)
        match = re.fullmatch(r"([a-z_]+)-(\d+)", dense)
        if match is None:
            raise UserError(f"--strategy {name!r} is not a strategy name advise prints (bm25, truncate, "
                             "<method>-<length> such as pi-4096, naive-chunks, naive-chunks-overlap, late-chunks, "
                             "late-tokens, naive-tokens, each dense one with +bm25)")
        return replace(common, method=match.group(1), max_length=int(match.group(2)))

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict[str, Any]:
        """The strategy as advice.json's ``config``, an index's metadata and results.json record it: every
        field, keyed by its name (``chunking``/``late`` null for one vector per document; ``chunking`` null
        for the tokens of one pass over the document, which no chunking decides)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["encoder_options"] = dict(self.encoder_options)
        if self.granularity == DOCUMENT:
            out["chunking"] = out["late"] = None
        elif not self.cuts_chunks:
            out["chunking"] = None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], default_model: str | None = None) -> Strategy:
        """The strategy :meth:`to_dict` wrote; also reads the older spellings (a nested ``fusion``,
        ``naive``, encoder options as keys of their own).  ``default_model``: the model when the data
        names none (an advice file's own).  A dense strategy that names no model is an error, never BM25."""
        if not isinstance(data, Mapping):
            raise UserError(f"a strategy is a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known and value is not None}
        options = dict(values.pop("encoder_options", None) or {})
        options.update({k: v for k, v in data.items()
                        if k not in known and k not in (*RUN_ONLY_KEYS, "fusion", "naive") and v is not None})
        if data.get("naive"):
            values["late"] = False
        fusion = data.get("fusion")
        if fusion is not None:
            values.update(_fusion_fields(fusion))
        values["model"] = values.get("model") or default_model
        if values["model"] is None:
            raise UserError(f"the strategy {_describe(data)} names no model (a dense strategy needs the model it "
                             "ran; BM25 alone is model 'bm25')")
        for key, kind in (("granularity", str), ("chunking", str), ("method", str), ("model", str),
                          ("max_length", int), ("fuse", str), ("fuse_method", str)):
            if key in values and (not isinstance(values[key], kind) or isinstance(values[key], bool)):
                raise UserError(f"the strategy's {key} must be a {kind.__name__}, got {values[key]!r}")
        return cls(**values, encoder_options=options)


def _fusion_fields(fusion: Any) -> dict[str, Any]:
    """A nested ``fusion`` object (indexes before the strategy's flat keys) as the ``fuse*`` fields."""
    if not isinstance(fusion, Mapping) or "method" not in fusion:
        raise UserError(f"a strategy's fusion must be an object with 'method' (rrf or linear), got {fusion!r}")
    return {"fuse": fusion.get("source", BM25), "fuse_method": fusion["method"], "fuse_k": fusion.get("k"),
            "fuse_weight": fusion.get("weight")}


def _describe(data: Mapping[str, Any]) -> str:
    keys = ", ".join(f"{k}={v!r}" for k, v in data.items() if v is not None)
    return "{" + keys + "}"
