"""What an index holds and how it scores: :class:`IndexStrategy`, the options of an ``eval`` run.

An index is built with the strategy flags of ``longembed eval`` (``--model`` or ``--model bm25``,
``--method``, ``--max-length``, the encoder's options, ``--granularity``, ``--chunking``, ``--late`` /
``--naive``, ``--fuse``, ``--fuse-method``, ``--fuse-weight``, ``--fuse-k``, the prompts), by one of the
names ``longembed advise`` prints (:func:`strategy_from_name`: ``bm25``, ``truncate``, ``pi-4096``,
``naive-chunks``, ``late-chunks``, each dense one with ``+bm25``), or from an advice.json
(:func:`strategy_from_advice`).  The strategy is recorded in the index, so a search scores as the run
it reproduces, and a later build with another strategy is refused unless ``--rebuild``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from longembed.errors import UserError, UserFileError
from longembed.retrieval.fusion import Fusion

BM25 = "bm25"
GRANULARITIES = ("document", "chunks")
#: The strategy names of ``longembed advise`` (longembed.advice.candidates).
TRUNCATE, NAIVE_CHUNKS, LATE_CHUNKS, FUSION_SUFFIX = "truncate", "naive-chunks", "late-chunks", "+bm25"
#: The keys of an advice strategy's ``config``: eval's strategy flags (``fuse_method`` is ``--fuse-method``).
CONFIG_KEYS = ("model", "method", "max_length", "granularity", "chunking", "late", "naive", "fuse", "fuse_method",
               "fuse_weight", "fuse_k", "query_prompt", "document_prompt", "encoder_options")
#: ``config`` keys that are how a run ran, not what it computed (no part of an index's strategy).
RUN_ONLY_KEYS = ("batch_size", "device")


@dataclass(frozen=True)
class IndexStrategy:
    """One retrieval strategy, as ``longembed eval`` runs it.

    ``model``: a model folder or name, or ``"bm25"`` (lexical only: no vectors).  ``method``,
    ``max_length``, ``encoder_options``: the encoder (``load_encoder``'s arguments).  ``granularity``:
    ``document`` (one vector per document) or ``chunks`` (a document scores its best chunk), with
    ``chunking`` and ``late``.  ``fusion``: the dense ranking fused with BM25's.  ``query_prompt``,
    ``document_prompt``: None for the model's own (eval's default).  ``name``: what advice calls it.
    """

    model: str
    method: str | None = None
    max_length: int | None = None
    encoder_options: dict[str, Any] = field(default_factory=dict)
    granularity: str = "document"
    chunking: str = "tokens:256"
    late: bool = True
    fusion: Fusion | None = None
    query_prompt: str | None = None
    document_prompt: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise UserError(f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}")
        if self.lexical_only and self.fusion is not None:
            raise UserError("--fuse bm25 fuses a dense ranking with BM25's; with --model bm25 there is none")
        if not self.name:
            object.__setattr__(self, "name", self.default_name())

    @property
    def lexical_only(self) -> bool:
        return self.model == BM25

    @property
    def chunked(self) -> bool:
        return self.granularity == "chunks" and not self.lexical_only

    @property
    def systems(self) -> list[str]:
        """The rankings a search combines: ["bm25"], ["dense"] or ["dense", "bm25"]."""
        if self.lexical_only:
            return [BM25]
        return ["dense", BM25] if self.fusion is not None else ["dense"]

    def default_name(self) -> str:
        """The name advice would give this strategy (``pi-4096``, ``late-chunks+bm25``, ...)."""
        if self.lexical_only:
            return BM25
        method = self.method or TRUNCATE
        if self.chunked:
            base = LATE_CHUNKS if self.late else NAIVE_CHUNKS
        else:
            base = method if method == TRUNCATE or self.max_length is None else f"{method}-{self.max_length}"
        if self.fusion is None:
            return base
        return base + FUSION_SUFFIX + ("" if self.fusion.method == "rrf" else f"-{self.fusion.method}")

    def to_dict(self) -> dict[str, Any]:
        """As recorded in the index (and compared by a rebuild): every field but the name."""
        return {
            "model": self.model, "method": self.method, "max_length": self.max_length,
            "encoder_options": dict(sorted(self.encoder_options.items())), "granularity": self.granularity,
            "chunking": self.chunking if self.chunked else None, "late": self.late if self.chunked else None,
            "fusion": None if self.fusion is None else self.fusion.to_dict(),
            "query_prompt": self.query_prompt, "document_prompt": self.document_prompt,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], name: str = "") -> IndexStrategy:
        fusion = data.get("fusion")
        return cls(
            model=data["model"], method=data.get("method"), max_length=data.get("max_length"),
            encoder_options=dict(data.get("encoder_options") or {}), granularity=data.get("granularity", "document"),
            chunking=data.get("chunking") or "tokens:256", late=True if data.get("late") is None else data["late"],
            fusion=None if fusion is None else Fusion.from_options(
                fusion["source"], fusion["method"], fusion.get("weight"), fusion.get("k")),
            query_prompt=data.get("query_prompt"), document_prompt=data.get("document_prompt"), name=name,
        )


def strategy_from_name(name: str, model: str | None, base: IndexStrategy) -> IndexStrategy:
    """The strategy ``longembed advise`` calls ``name``, for ``model`` (any but ``bm25`` needs one);
    ``base`` gives what the name leaves open (the encoder's options, the chunking, late chunking's method
    and length, the prompts)."""
    dense, fused = (name[: -len(FUSION_SUFFIX)], True) if name.endswith(FUSION_SUFFIX) else (name, False)
    if name == BM25:
        return IndexStrategy(BM25, name=BM25)
    if model is None or model == BM25:
        raise UserError(f"--strategy {name} needs --model (the embedding model it ran)")
    fusion = Fusion.from_options("bm25", "rrf") if fused else None
    common = {"model": model, "encoder_options": base.encoder_options, "fusion": fusion, "chunking": base.chunking,
              "query_prompt": base.query_prompt, "document_prompt": base.document_prompt, "name": name}
    if dense == TRUNCATE:
        return IndexStrategy(method=TRUNCATE, **common)
    if dense == NAIVE_CHUNKS:
        return IndexStrategy(method=TRUNCATE, granularity="chunks", late=False, **common)
    if dense == LATE_CHUNKS:
        return IndexStrategy(method=base.method or TRUNCATE, max_length=base.max_length, granularity="chunks",
                             late=True, **common)
    match = re.fullmatch(r"([a-z_]+)-(\d+)", dense)
    if match is None:
        raise UserError(f"--strategy {name!r} is not a strategy name advise prints (bm25, truncate, "
                         "<method>-<length> such as pi-4096, naive-chunks, late-chunks, each dense one with +bm25)")
    return IndexStrategy(method=match.group(1), max_length=int(match.group(2)), **common)


def strategy_from_advice(path: str | Path, name: str | None = None) -> IndexStrategy:
    """The recommended strategy of an advice.json (or the one called ``name``), with its exact
    configuration: a strategy's ``config`` object (eval's flags) when the file has one, else what the
    file records of its run (the model, method, max_length, granularity and fusion)."""
    path = Path(path)
    try:
        advice = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserFileError(f"--from-advice {path}: cannot be read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"--from-advice {path}: not a JSON file ({exc})") from None
    if not isinstance(advice, dict) or not isinstance(advice.get("strategies"), list):
        raise UserError(f"--from-advice {path}: not an advice.json (no 'strategies' list)")
    wanted = name or advice.get("recommended") or (advice.get("recommendation") or {}).get("choice")
    if not wanted:
        raise UserError(f"--from-advice {path}: names no recommended strategy ('recommended')")
    found = next((s for s in advice["strategies"] if isinstance(s, dict) and s.get("name") == wanted), None)
    if found is None:
        names = [s.get("name") for s in advice["strategies"] if isinstance(s, dict)]
        raise UserError(f"--from-advice {path}: no strategy {wanted!r} (it has {', '.join(map(str, names))})")
    config = found.get("config")
    if isinstance(config, dict):
        return _from_config(config, advice.get("model"), wanted, path)
    return _from_record(found, advice.get("model"), wanted)


def _from_config(config: dict[str, Any], model: str | None, name: str, path: Path) -> IndexStrategy:
    unknown = sorted(set(config) - set(CONFIG_KEYS) - set(RUN_ONLY_KEYS))
    options = dict(config.get("encoder_options") or {})
    for key in unknown:  # encoder options given as flags of their own (e.g. "temperature")
        options[key] = config[key]
    late = config.get("late")
    if config.get("naive"):
        late = False
    strategy = IndexStrategy(
        model=config.get("model") or model or BM25, method=config.get("method"), max_length=config.get("max_length"),
        encoder_options=options, granularity=config.get("granularity") or "document",
        chunking=config.get("chunking") or "tokens:256", late=True if late is None else bool(late),
        fusion=Fusion.from_options(config.get("fuse"), config.get("fuse_method"), config.get("fuse_weight"),
                                   config.get("fuse_k")),
        query_prompt=config.get("query_prompt"), document_prompt=config.get("document_prompt"), name=name,
    )
    if strategy.model != BM25 and strategy.model is None:
        raise UserError(f"--from-advice {path}: strategy {name!r} names no model")
    return strategy


def _from_record(record: dict[str, Any], model: str | None, name: str) -> IndexStrategy:
    """A strategy from what advice.json records of its run (before advice carried ``config``)."""
    if record.get("kind") == BM25 or name == BM25:
        return IndexStrategy(BM25, name=name)
    granularity = record.get("granularity") or {}
    fusion = record.get("fusion")
    return IndexStrategy(
        model=model or BM25, method=record.get("method"), max_length=record.get("max_length"),
        granularity=granularity.get("level", "document"), chunking=granularity.get("chunking") or "tokens:256",
        late=bool(granularity.get("late", True)),
        fusion=None if not fusion else Fusion.from_options(fusion["source"], fusion["method"], fusion.get("weight"),
                                                           fusion.get("k")),
        name=name,
    )


def with_name(strategy: IndexStrategy, name: str) -> IndexStrategy:
    return replace(strategy, name=name)
