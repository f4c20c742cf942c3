"""LangChain adapter: a LongContextEncoder as ``langchain_core.embeddings.Embeddings``.

    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from longembed.integrations.langchain import LongEmbedEmbeddings
    >>> embeddings = LongEmbedEmbeddings.from_pretrained("path/to/nomic-embed-text-v1.5", "selfextend", 8192)
    >>> store = InMemoryVectorStore.from_texts(long_documents, embeddings)

Documents are embedded with the model's "document" (or "passage") prompt and queries with its
"query" prompt, as ``longembed eval`` does, so a vector store searches the way the benchmark scored.
Vectors come back as plain Python floats (what LangChain's stores expect), unit length when the
model normalizes.

Indexing chunk vectors (find the passage, not only the document): :meth:`LongEmbedEmbeddings.
chunk_documents` runs ``encoder.encode_chunks`` (late chunking by default: one pass over each whole
text) and returns one ``Document`` per chunk, its text ``text[start:end]`` and its span in the
metadata (``text_index``, ``start``, ``end``, beside the metadata you give), with the chunk vectors.
:func:`add_chunks` stores them as they are: through ``add_embeddings`` in a store that has it (FAISS,
PGVector), and in langchain_core's ``InMemoryVectorStore``, which has no such method, as the records
its ``add_documents`` writes.  Search with :meth:`LongEmbedEmbeddings.embed_query` vectors
(``similarity_search_by_vector``); a hit's metadata points back into its source text.  (Storing the
chunk texts through ``add_documents`` would embed each chunk alone: naive chunking.)
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longembed.chunking.spans import Chunking
from longembed.encoder import LongContextEncoder, load_encoder
from longembed.errors import MissingExtraError, UserError, UserTypeError
from longembed.integrations import INSTALL_HINT, retrieval_prompts

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
except ImportError as exc:
    raise MissingExtraError(f"longembed.integrations.langchain needs langchain-core ({exc}): {INSTALL_HINT}") from exc

__all__ = ["LongEmbedEmbeddings", "add_chunks"]


class LongEmbedEmbeddings(Embeddings):
    """LangChain embeddings from a LongContextEncoder (texts of any length, any extension method).

    batch_size: texts per ``encode`` batch.  normalize_embeddings: None follows the model folder,
    True / False force it (as ``encode``'s argument).
    """

    def __init__(
        self, encoder: LongContextEncoder, *, batch_size: int = 32, normalize_embeddings: bool | None = None
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise UserError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.encoder = encoder
        self.batch_size = batch_size
        self.normalize_embeddings = normalize_embeddings

    @classmethod
    def from_pretrained(
        cls,
        model: str | Path,
        method: str = "truncate",
        max_length: int | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
        normalize_embeddings: bool | None = None,
        **options: Any,
    ) -> LongEmbedEmbeddings:
        """Load the encoder (``load_encoder``'s arguments and options) and wrap it."""
        encoder = load_encoder(model, method=method, max_length=max_length, device=device, **options)
        return cls(encoder, batch_size=batch_size, normalize_embeddings=normalize_embeddings)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, with the document prompt.  ``texts`` must be a list (or
        other sequence) of non-empty strings; a single string is a TypeError, not one document."""
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise UserTypeError(f"embed_documents takes a list of strings, got {type(texts).__name__}; "
                            "for one text use embed_documents([text]) or embed_query(text)")
        if not texts:
            return []
        return self._embed(list(texts), retrieval_prompts(self.encoder)["document"]).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The vector of one query string, with the query prompt."""
        if not isinstance(text, str):
            raise UserTypeError(f"embed_query takes one string, got {type(text).__name__}")
        return self._embed([text], retrieval_prompts(self.encoder)["query"])[0].tolist()

    def chunk_documents(
        self, texts: Sequence[str], chunking: str | Chunking = "tokens:256", late: bool = True,
        metadatas: Sequence[dict[str, Any]] | None = None,
    ) -> tuple[list[Document], list[list[float]]]:
        """One ``Document`` per chunk of each text (``text[start:end]``; metadata: the text's own,
        ``text_index``, ``start``, ``end``) and the chunk vectors, from ``encoder.encode_chunks`` with the
        document prompt (``chunking`` and ``late`` as there).  See the module docstring for indexing them."""
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise UserTypeError(f"chunk_documents takes a list of strings, got {type(texts).__name__}")
        if metadatas is not None and len(metadatas) != len(texts):
            raise UserError(f"metadatas has {len(metadatas)} entries for {len(texts)} texts: give one per text")
        chunked = self.encoder.encode_chunks(
            list(texts), chunking=chunking, late=late, batch_size=self.batch_size,
            normalize_embeddings=self.normalize_embeddings, prompt=retrieval_prompts(self.encoder)["document"],
        )
        documents, vectors = [], []
        for i, (text, (text_vectors, spans)) in enumerate(zip(texts, chunked, strict=True)):
            own = dict(metadatas[i]) if metadatas is not None else {}
            for vector, (start, end) in zip(text_vectors, spans, strict=True):
                documents.append(Document(text[start:end], metadata={**own, "text_index": i, "start": start, "end": end}))
                vectors.append(vector.tolist())
        return documents, vectors

    def _embed(self, texts: list[str], prompt: str) -> np.ndarray:
        return self.encoder.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=self.normalize_embeddings, prompt=prompt
        )


def add_chunks(
    store: VectorStore, documents: Sequence[Document], vectors: Sequence[Sequence[float]],
    ids: Sequence[str] | None = None,
) -> list[str]:
    """Store chunk ``documents`` with the ``vectors`` computed for them (``chunk_documents``' two
    lists), without embedding them again.

    Args:
        store: a LangChain vector store that takes vectors computed elsewhere: one with
            ``add_embeddings`` (FAISS, PGVector, ...) or langchain_core's ``InMemoryVectorStore``.
        documents: one ``Document`` per chunk.
        vectors: one vector per document, in the same order.
        ids: optional ids, one per document (default: each document's ``id``, else a new uuid4).

    Returns:
        The ids the store keeps the chunks under.

    Raises:
        ValueError: the lists differ in length.
        TypeError: the store has no way to take precomputed vectors.
    """
    if len(documents) != len(vectors) or (ids is not None and len(ids) != len(documents)):
        counts = f"{len(documents)} documents, {len(vectors)} vectors" + ("" if ids is None else f", {len(ids)} ids")
        raise UserError(f"add_chunks needs one vector (and id) per document, got {counts}")
    if hasattr(store, "add_embeddings"):
        pairs = [(document.page_content, list(vector)) for document, vector in zip(documents, vectors, strict=True)]
        metadatas = [document.metadata for document in documents]
        return list(store.add_embeddings(pairs, metadatas=metadatas, ids=None if ids is None else list(ids)))
    if isinstance(store, InMemoryVectorStore):
        return _add_to_memory_store(store, documents, vectors, ids)
    raise UserTypeError(f"{type(store).__name__} takes no precomputed vectors (it has no add_embeddings): use a store "
                    "that does (FAISS, PGVector) or langchain_core's InMemoryVectorStore")


def _add_to_memory_store(
    store: InMemoryVectorStore, documents: Sequence[Document], vectors: Sequence[Sequence[float]],
    ids: Sequence[str] | None,
) -> list[str]:
    """The records ``InMemoryVectorStore.add_documents`` writes, with the given vectors instead of its
    embedding's (a test checks the record's shape against the installed langchain_core)."""
    stored = []
    for i, (document, vector) in enumerate(zip(documents, vectors, strict=True)):
        doc_id = (ids[i] if ids is not None else document.id) or str(uuid.uuid4())
        store.store[doc_id] = {"id": doc_id, "vector": list(vector), "text": document.page_content,
                               "metadata": document.metadata}
        stored.append(doc_id)
    return stored
