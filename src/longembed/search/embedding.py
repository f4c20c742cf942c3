"""Documents -> chunk rows: what ``longembed index`` stores for each document, embedded as eval embeds it.

* BM25 only: one row per document, no vector (the passage is the whole document);
* one vector per document: ``encode(texts, prompt=document prompt, normalize_embeddings=True)``, the
  vectors scaled to unit length again, as eval's cache does; the passage is the first window the model
  read (its first Lt tokens);
* chunks: ``encode_chunks(texts, chunking, late=..., prompt=..., normalize_embeddings=True)``, one row
  per chunk with its character span.

Every row records where its span is in the document (``location``, ``page``), from the reader's map.

The same :class:`DocumentEmbedder` runs in the build's process (``--engine local``) and in each Ray
actor (``--engine ray``), so both engines write the same rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from longembed.encoder import (
    ChunkInputs,
    LongContextEncoder,
    encode_chunk_inputs,
    encode_inputs,
    prepare_chunks,
    prepare_texts,
)
from longembed.errors import UserError
from longembed.inputs import TokenizedInput, tokenize_bounded
from longembed.locations import location_of, marks_json
from longembed.retrieval.pipeline import unit_rows
from longembed.retrieval.strategy import Strategy
from longembed.search.sources import Document
from longembed.search.store import ChunkRows
from longembed.search.truncation import tokens_after


def resolved_prompts(strategy: Strategy, encoder: LongContextEncoder | None) -> dict[str, str]:
    """The prefixes of queries and documents: the strategy's, else the model's (eval's rule)."""
    model = {"query": "", "document": ""} if encoder is None else encoder.retrieval_prompts()
    return {"query": model["query"] if strategy.query_prompt is None else strategy.query_prompt,
            "document": model["document"] if strategy.document_prompt is None else strategy.document_prompt}


#: vectors computed before, found by a document's text: a (dim,) vector or a (chunks, dim) matrix, None
#: where there is none (:class:`~longembed.evaluation.cache.lookup.CachedDocumentVectors`: advise's cache)
VectorLookup = Callable[[Sequence[str]], list[np.ndarray | None]]

#: a document's rows as :meth:`DocumentEmbedder.embed` makes them: its unit vectors and their character spans
Embedded = tuple[np.ndarray, list[tuple[int, int]]]


@dataclass(frozen=True)
class PreparedDocuments:
    """Documents made ready for :meth:`DocumentEmbedder.embed`: the entries found in the cache
    (``reused``, None where a document must be encoded), the model's ``inputs`` and row ``spans`` of the
    documents to encode (None for BM25), the ``tokens`` the model will read, and the tokens a truncating
    strategy leaves out of each document it cuts (``cut``: id -> tokens)."""

    documents: Sequence[Document]
    reused: list[Embedded | None]
    spans: list[list[tuple[int, int]]]
    inputs: ChunkInputs | list[TokenizedInput] | None
    tokens: int
    cut: dict[str, int] = field(default_factory=dict)


class DocumentEmbedder:
    """Turns documents into :class:`~longembed.search.store.ChunkRows` with one encoder (None: BM25).

    ``cached``: where a document's vectors may already be (advise's embedding cache, for ``index
    --from-advice``); a document found there is not encoded, and :attr:`from_cache` counts its vectors.
    """

    def __init__(self, strategy: Strategy, encoder: LongContextEncoder | None, batch_size: int = 16,
                 cached: VectorLookup | None = None) -> None:
        self.strategy = strategy
        self.encoder = encoder
        self.batch_size = batch_size
        self.prompt = resolved_prompts(strategy, encoder)["document"]
        self.cached = cached
        self.from_cache = 0  # vectors read from ``cached``
        self.encoded = 0  # vectors computed
        self.cut: dict[str, int] = {}  # id -> tokens past the window, of the documents a truncating strategy cut

    def rows(self, documents: Sequence[Document]) -> ChunkRows:
        """The rows of ``documents``: :meth:`prepare` then :meth:`embed`."""
        return self.embed(self.prepare(documents))

    def prepare(self, documents: Sequence[Document]) -> PreparedDocuments:
        """The tokenizing half of :meth:`rows` (the model does not run): safe in another thread while
        :meth:`embed` runs the model on other documents."""
        texts = [d.text for d in documents]
        if self.encoder is None:
            return PreparedDocuments(documents, [None] * len(texts), [[(0, len(t))] for t in texts], None, 0)
        found = self.cached(texts) if self.cached is not None else [None] * len(texts)
        reused = [None if vectors is None else self.reuse(text, vectors) for text, vectors in zip(texts, found, strict=True)]
        missing = [t for t, entry in zip(texts, reused, strict=True) if entry is None]
        if not missing:  # every document found in the cache: nothing to tokenize
            return PreparedDocuments(documents, reused, [], [], 0)
        if self.strategy.chunked:
            chunks = prepare_chunks(self.encoder, missing, self.strategy.chunking, late=self.strategy.late,
                                    prompt=self.prompt)
            return PreparedDocuments(documents, reused, chunks.spans, chunks, chunks.tokens)
        inputs = prepare_texts(self.encoder, missing, prompt=self.prompt)
        spans = [[(0, self.first_window_end(t))] for t in missing]
        cut = {}
        windows = iter(spans)
        for document, entry in zip(documents, reused, strict=True):
            end = (entry[1] if entry is not None else next(windows))[-1][1]
            if end < len(document.text):
                cut[document.id] = tokens_after(self.encoder.tokenizer, document.text, end)
        tokens = sum(min(x.n_tokens, self.encoder.max_length) for x in inputs)
        return PreparedDocuments(documents, reused, spans, inputs, tokens, cut)

    def embed(self, prepared: PreparedDocuments) -> ChunkRows:
        """The encoding half of :meth:`rows`: the model runs over what :meth:`prepare` tokenized, and the
        cached entries fill the rest, in the documents' order."""
        if self.encoder is None or prepared.inputs is None:
            return _rows(prepared.documents, prepared.spans, None)
        computed = iter(self.encode(prepared))
        embedded = [next(computed) if entry is None else entry for entry in prepared.reused]
        self.encoded += sum(len(vectors) for (vectors, _), entry in zip(embedded, prepared.reused, strict=True)
                            if entry is None)
        self.from_cache += sum(len(entry[0]) for entry in prepared.reused if entry is not None)
        self.cut.update(prepared.cut)
        return _rows(prepared.documents, [spans for _, spans in embedded], np.concatenate([v for v, _ in embedded]))

    def encode(self, prepared: PreparedDocuments) -> list[Embedded]:
        """The documents to encode (those not reused): each one's (unit vectors, their spans), as eval."""
        assert self.encoder is not None and prepared.inputs is not None
        if not prepared.spans:
            return []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a document cut at Lt: the build counts the cuts
            if isinstance(prepared.inputs, ChunkInputs):
                encoded = encode_chunk_inputs(self.encoder, prepared.inputs, batch_size=self.batch_size,
                                              normalize_embeddings=True)
                return [(vectors, list(spans)) for (vectors, _), spans in zip(encoded, prepared.spans, strict=True)]
            vectors = np.asarray(encode_inputs(self.encoder, prepared.inputs, batch_size=self.batch_size,
                                               normalize_embeddings=True), dtype=np.float32)
        return [(unit_rows(v[None, :]), spans) for v, spans in zip(vectors, prepared.spans, strict=True)]

    def reuse(self, text: str, vectors: np.ndarray) -> Embedded | None:
        """A cached entry as :meth:`encode` would have returned it, the chunks' spans cut again; None
        (encode it) when the entry does not have one vector per chunk (never a passage shifted by one)."""
        assert self.encoder is not None
        if not self.strategy.chunked:
            return unit_rows(np.asarray(vectors, dtype=np.float32).reshape(1, -1)), [(0, self.first_window_end(text))]
        (spans,) = self.encoder.chunk_spans([text], self.strategy.chunking)
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or len(matrix) != len(spans):
            return None
        return matrix, list(spans)

    def first_window_end(self, text: str) -> int:
        """The character where the model stopped reading ``text`` (its end when it read all of it)."""
        assert self.encoder is not None
        tokenizer = self.encoder.tokenizer
        budget = self.encoder.max_length - tokenizer.num_special_tokens_to_add() - \
            len(tokenizer(self.prompt, add_special_tokens=False)["input_ids"])
        (tokens,) = tokenize_bounded([text], tokenizer, "", None, budget)  # not the whole of a long text
        offsets = tokens.offsets or []
        return len(text) if tokens.complete and len(offsets) <= budget else int(offsets[max(budget, 1) - 1][1])


def _rows(documents: Sequence[Document], spans: Sequence[Sequence[tuple[int, int]]],
          vectors: np.ndarray | None) -> ChunkRows:
    rows = ChunkRows([], [], [], [], [], [], [], [], vectors)
    for document, document_spans in zip(documents, spans, strict=True):
        if not document_spans:
            raise UserError(f"{document.source}: document {document.id!r} gave no chunk to embed")
        sha = document.sha256
        for number, (start, end) in enumerate(document_spans):
            rows.ids.append(document.id)
            rows.sources.append(document.source)
            rows.chunks.append(number)
            rows.starts.append(int(start))
            rows.ends.append(int(end))
            rows.sha256s.append(sha)
            rows.texts.append(document.text[start:end])
            rows.documents.append(document.text if number == 0 else None)
            location, page = location_of(document.locations, int(start), int(end))
            rows.locations.append(location)
            rows.pages.append(page)
            rows.marks.append(marks_json(document.locations) if number == 0 else None)
    if vectors is not None and len(vectors) != len(rows.ids):
        raise UserError(f"{len(vectors)} vectors for {len(rows.ids)} chunks")
    return rows
