"""mteb adapter: score a LongContextEncoder, with any extension method, with mteb.

    >>> import mteb
    >>> from longembed.integrations.mteb import LongEmbedMTEBModel
    >>> model = LongEmbedMTEBModel.from_pretrained("path/to/nomic-embed-text-v1.5", "selfextend", 8192)
    >>> results = mteb.evaluate(model, mteb.get_tasks(tasks=["LEMBNeedleRetrieval"]))

:class:`LongEmbedMTEBModel` meets mteb's encoder protocol (mteb >= 2: ``encode`` reads the texts
from a DataLoader of batches and learns from ``prompt_type`` whether they are queries or documents).
Queries get the model's "query" prompt and documents its "document" (or "passage") prompt, as
``longembed eval`` does; other inputs (STS, clustering, ...) get none.  Its ``mteb_model_meta``
names the run ``longembed/<model>-<method>-<max_length>``, so mteb files each configuration's results
apart; options beyond method and length (TempScale, attention scaling, ...) are its
``experiment_kwargs``.

:func:`retrieval_task` wraps a corpus, queries and relevance judgements held in memory (e.g. a
longembed task's data) as an mteb retrieval task, so mteb can score data that is not on the hub.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from longembed.config import EncoderConfig
from longembed.encoder import LongContextEncoder, load_encoder
from longembed.errors import MissingExtraError, UserError
from longembed.integrations import INSTALL_HINT, retrieval_prompts
from longembed.loading import DEFAULT_MODEL

try:
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction
    from mteb.types import PromptType
except ImportError as exc:
    raise MissingExtraError(f"longembed.integrations.mteb needs mteb ({exc}): {INSTALL_HINT}") from exc

__all__ = ["LongEmbedMTEBModel", "load_for_mteb", "model_meta", "retrieval_task"]

#: The name the packaged default model is filed under.
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
#: EncoderConfig fields that are part of the model name rather than experiment_kwargs.
NAMED_FIELDS = ("model", "method", "max_length")


class LongEmbedMTEBModel(AbsEncoder):
    """A LongContextEncoder as an mteb encoder (``mteb.evaluate(LongEmbedMTEBModel(encoder), tasks)``).

    batch_size is used when mteb passes none.  Vectors are ``encoder.encode``'s, unchanged (unit
    length when the model normalizes); mteb scores them by cosine similarity.
    """

    def __init__(self, encoder: LongContextEncoder, *, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise UserError(f"batch_size must be positive, got {batch_size}")
        self.encoder = encoder
        self.batch_size = batch_size
        self.mteb_model_meta = model_meta(encoder)

    @classmethod
    def from_pretrained(
        cls,
        model: str | Path,
        method: str = "truncate",
        max_length: int | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
        **options: Any,
    ) -> LongEmbedMTEBModel:
        """Load the encoder (``load_encoder``'s arguments and options) and wrap it."""
        return cls(load_encoder(model, method=method, max_length=max_length, device=device, **options),
                   batch_size=batch_size)

    def prompt_for(self, prompt_type: PromptType | None) -> str:
        """The prefix for inputs of ``prompt_type``: the query or document prompt, else none."""
        if prompt_type is None:
            return ""
        return retrieval_prompts(self.encoder)[PromptType(prompt_type).value]

    def encode(
        self,
        inputs: Iterable[Mapping[str, Any]],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Embed every text of ``inputs`` (mteb's DataLoader of ``{"text": [...], ...}`` batches), in
        order; float32 (n, dim).  ``batch_size`` and ``show_progress_bar`` are honoured; a
        ``precision`` other than float32 is refused (the encoder has no quantized output)."""
        precision = kwargs.get("precision")
        if precision not in (None, "float32"):
            raise UserError(f"longembed returns float32 vectors; precision={precision!r} is not supported")
        texts: list[str] = []
        for batch in inputs:
            if "text" not in batch:
                raise UserError(f"{task_metadata.name}: longembed embeds text only, got a batch of {sorted(batch)}")
            texts.extend(batch["text"])
        vectors = self.encoder.encode(
            texts,
            batch_size=kwargs.get("batch_size") or self.batch_size,
            show_progress_bar=bool(kwargs.get("show_progress_bar", False)),
            prompt=self.prompt_for(prompt_type),
        )
        return np.asarray(vectors, dtype=np.float32)


def load_for_mteb(
    model_name: str,
    revision: str | None = None,
    *,
    model: str,
    method: str,
    max_length: int,
    device: str | None = None,
    **options: Any,
) -> LongEmbedMTEBModel:
    """The loader in a ModelMeta made by :func:`model_meta` (``meta.load_model()``): mteb passes the
    meta's name and revision, then its loader_kwargs (model folder, method, max_length) and
    experiment_kwargs (the other encoder options)."""
    return LongEmbedMTEBModel.from_pretrained(model, method, max_length, device=device, **options)


def model_meta(encoder: LongContextEncoder) -> ModelMeta:
    """mteb's description of ``encoder``: name ``longembed/<model>-<method>-<max_length>``, a revision
    fingerprinting the model folder, the non-default encoder options as experiment_kwargs, and a
    loader that rebuilds the same encoder."""
    config = encoder.config
    folder = encoder.source.folder
    prompts = retrieval_prompts(encoder)
    return ModelMeta(
        loader=load_for_mteb,
        loader_kwargs={"model": str(folder or config.model), "method": encoder.method,
                       "max_length": encoder.max_length},
        name=f"longembed/{model_short_name(config.model)}-{encoder.method}-{encoder.max_length}",
        revision=folder_revision(folder) if folder is not None else None,
        release_date=None,
        languages=None,
        n_parameters=sum(p.numel() for p in encoder.model.parameters()),
        memory_usage_mb=None,
        max_tokens=encoder.max_length,
        embed_dim=encoder.embedding_dim,
        license=None,
        open_weights=None,
        public_training_code=None,
        public_training_data=None,
        framework=["PyTorch", "Transformers"],
        similarity_fn_name=ScoringFunction.COSINE,
        use_instructions=bool(prompts["query"] or prompts["document"]),
        training_datasets=None,
        experiment_kwargs=changed_options(config) or None,
    )


def model_short_name(model: str) -> str:
    """The model's name in a run name: the folder (or hub repository) name."""
    return DEFAULT_MODEL_NAME if model == DEFAULT_MODEL else Path(model.rstrip("/")).name


def changed_options(config: EncoderConfig) -> dict[str, Any]:
    """The encoder options that differ from their defaults (model, method and max_length excluded)."""
    defaults = EncoderConfig()
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in NAMED_FIELDS and getattr(config, f.name) != getattr(defaults, f.name)
    }


def folder_revision(folder: Path) -> str:
    """A cheap fingerprint of a model folder: sha256 of its config.json and every file's path and
    size (the weights are not read), first 12 hex digits.  Not a hub commit; it changes when the
    folder's files do."""
    digest = hashlib.sha256()
    config = folder / "config.json"
    if config.is_file():
        digest.update(config.read_bytes())
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            digest.update(f"{rel.as_posix()}\0{path.stat().st_size}\0".encode())
    return digest.hexdigest()[:12]


class InMemoryRetrievalTask(AbsTaskRetrieval):
    """An mteb retrieval task whose one split is given in memory instead of loaded from the hub.

    Build it with :func:`retrieval_task`: mteb wants ``metadata`` on the class (``unload_data`` drops
    an instance's own), so each task is a subclass carrying its metadata.
    """

    def __init__(self, split: dict[str, Any]) -> None:
        self._split = split
        super().__init__()

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """Hand mteb the split (as ``{subset: {split: RetrievalSplitData}}``); nothing is downloaded."""
        if self.data_loaded:
            return
        self.dataset = {"default": {self.metadata.eval_splits[0]: dict(self._split)}}
        self.data_loaded = True


def retrieval_task(
    name: str,
    corpus: Mapping[str, str],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    description: str | None = None,
    languages: tuple[str, ...] = ("eng-Latn",),
    split: str = "test",
) -> AbsTaskRetrieval:
    """An mteb retrieval task over ``corpus`` (id -> text), ``queries`` (id -> text) and ``qrels``
    (query id -> {document id: relevance}); main score nDCG@10.

    The dataset revision is a hash of the data, so mteb's saved results say which data they scored.
    Raises ValueError when qrels name an unknown query or document.
    """
    for qid, judged in qrels.items():
        missing = [d for d in judged if d not in corpus]
        if qid not in queries or missing:
            raise UserError(f"qrels of query {qid!r} name an unknown query or documents {missing[:3]}")
    qrels = {qid: dict(judged) for qid, judged in qrels.items()}
    content = json.dumps([dict(corpus), dict(queries), qrels], sort_keys=True).encode()
    metadata = TaskMetadata(
        name=name,
        description=description or f"{name}: a retrieval task held in memory (longembed)",
        dataset={"path": f"longembed/{name}", "revision": hashlib.sha256(content).hexdigest()[:12]},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=[split],
        eval_langs=list(languages),
        main_score="ndcg_at_10",
    )
    data = {
        "corpus": Dataset.from_dict({"id": list(corpus), "text": list(corpus.values())}),
        "queries": Dataset.from_dict({"id": list(queries), "text": list(queries.values())}),
        "relevant_docs": qrels,
        "top_ranked": None,
    }
    task_class = type(f"InMemoryRetrievalTask[{name}]", (InMemoryRetrievalTask,), {"metadata": metadata})
    return task_class(data)
