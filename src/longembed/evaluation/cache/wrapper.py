"""CachedEncoder: any encoder whose vectors are read from the on-disk embedding cache when they exist.

    >>> cached = CachedEncoder(load_encoder("default", method="pi", max_length=4096))
    >>> result = cached.encode(texts, shard="passkey/4096/documents", prompt="")
    >>> result.vectors, result.n_cached, result.n_encoded

As mteb's ``CachedEmbeddingWrapper``, it wraps an encoder and stores what it computes
(:mod:`.storage`), in one namespace per (prompt, temperature, normalization, quantity): a vector is
reused exactly when it would be computed the same.  Missing texts are encoded longest first, in
chunks, each written as soon as it is done, so a killed run loses at most one chunk.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from longembed.chunking.multivector import encode_token_vectors
from longembed.config import EncoderConfig, check_temperature
from longembed.encoder_protocol import ChunkEncoder, Encoder, EncoderMetadata, encoder_metadata
from longembed.errors import UserError
from longembed.evaluation.cache.storage import (
    CacheNamespace,
    EmbeddingCache,
    ShardEntries,
    stack_entries,
    stored_dtype,
    text_key,
)
from longembed.evaluation.provenance import cache_fingerprint, library_versions, model_identity
from longembed.loading import ModelSource
from longembed.tasks.base import WORDS_PER_TOKEN

#: The keyword options of an encoder's ``encode`` that the wrapper passes only where ``encode`` takes them.
ENCODE_OPTIONS = ("batch_size", "prompt", "normalize_embeddings", "show_progress_bar", "temperature")
#: Characters per token, roughly (English under WordPiece/BPE): the progress bars' token estimate.
CHARS_PER_TOKEN = 4
#: tqdm's default bar with the counts as approximate tokens ("~12.3k/50.0k tok").
PROGRESS_FORMAT = "{l_bar}{bar}| ~{n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}, {rate_fmt}]"


@dataclass
class CachedEncoding:
    """The result of :func:`encode_cached`: vectors in input order, plus what it cost.

    For chunked documents ``vectors`` holds every text's chunk vectors one after another and ``rows``
    how many each text has (None: one vector per text).
    """

    vectors: np.ndarray
    tokens: np.ndarray
    n_unique: int
    n_cached: int
    n_encoded: int
    encode_seconds: float
    rows: np.ndarray | None = None

    def owners(self) -> np.ndarray:
        """For each row of ``vectors``, the index of its text."""
        counts = np.ones(len(self.tokens), dtype=np.int64) if self.rows is None else self.rows
        return np.repeat(np.arange(len(counts)), counts)


def accepts_keyword(function: Callable, name: str) -> bool:
    """Whether ``function`` takes the keyword ``name`` (or any keyword)."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _described(name: str) -> Any:
    """A read-only attribute answered by the wrapped encoder's metadata (``self.metadata``)."""
    return property(lambda self: getattr(self.metadata, name), doc=f"The wrapped encoder's ``{name}``.")


class CachedEncoder:
    """Encodes through an on-disk cache; uncached (with a note) when the model has no folder."""

    def __init__(
        self,
        encoder: Encoder,
        cache_dir: str | Path | None = None,
        *,
        use_cache: bool = True,
        include_code: bool = True,
        batch_size: int = 16,
        chunk_size: int = 64,
        show_progress: bool = True,
        log: Callable[[str], None] | None = print,
    ):
        if batch_size < 1 or chunk_size < 1:
            raise UserError("batch_size and chunk_size must be positive")
        self.metadata: EncoderMetadata = encoder_metadata(encoder)
        self.encoder = encoder
        self.batch_size = batch_size
        self.chunk_size = chunk_size
        self.show_progress = show_progress
        self.include_code = include_code
        self.versions = library_versions()
        self.identity = model_identity(self.metadata)
        self.cache: EmbeddingCache | None = None
        if use_cache and self.identity is not None:
            self.cache = EmbeddingCache(cache_dir)
        elif use_cache and log is not None:
            log("embedding cache disabled: this encoder has no model folder to identify it by")
        self.configured_temperature = float(self.metadata.config.temperature)
        self._per_call_temperature = accepts_keyword(encoder.encode, "temperature")
        self._takes = {name: accepts_keyword(encoder.encode, name) for name in ENCODE_OPTIONS}
        self._namespaces: dict[tuple, CacheNamespace | None] = {}
        self._token_memo: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ the encoder's metadata
    # what a runner reads of an encoder, from the wrapped one's metadata; encode and encode_chunks
    # below take a cache shard and return a CachedEncoding
    config: EncoderConfig = _described("config")
    tokenizer: Any = _described("tokenizer")
    prompts: dict[str, str] = _described("prompts")
    source: ModelSource | None = _described("source")
    device: Any = _described("device")
    method: str | None = _described("method")
    position_scheme: str | None = _described("position_scheme")
    max_length: int | None = _described("max_length")
    original_length: int | None = _described("original_length")
    pooling: str | None = _described("pooling")
    normalize: bool | None = _described("normalize")

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None) -> str:
        return self.metadata.resolve_prompt(prompt, prompt_name)

    def retrieval_prompts(self) -> dict[str, str]:
        return self.metadata.retrieval_prompts()

    # ------------------------------------------------------------------ keys
    def temperature(self, value: float | None, name: str = "temperature") -> float:
        """The tau a call will use (None: the encoder's own), checked; an encoder whose encode() takes
        no ``temperature=`` can only use its own."""
        tau = self.configured_temperature if value is None else check_temperature(value, name)
        if tau != self.configured_temperature and not self._per_call_temperature:
            raise UserError(
                f"{name} {tau} differs from the encoder's ({self.configured_temperature}) but its encode() "
                "takes no temperature= argument"
            )
        return tau

    def namespace(
        self, prompt: str, temperature: float | None = None, normalize: bool = True, quantity: str = "embedding"
    ) -> CacheNamespace | None:
        """The cache namespace of vectors computed with this prompt, tau and normalization (None: no cache)."""
        if self.cache is None or self.identity is None:
            return None
        tau = self.temperature(temperature)
        key = (prompt, tau, normalize, quantity)
        if key not in self._namespaces:
            self._namespaces[key] = self.cache.namespace(
                cache_fingerprint(
                    self.metadata, self.identity, prompt, tau, self.versions,
                    include_code=self.include_code, normalize=normalize, quantity=quantity,
                )
            )
        return self._namespaces[key]

    # ------------------------------------------------------------------ tokens
    def count_tokens(self, texts: Sequence[str], prompt: str = "") -> list[int]:
        """Tokens per text as the encoder sees it (prompt and special tokens included).

        Without a tokenizer: words / 0.75 (LongEmbed's rough conversion).  Counted once per text.
        """
        todo = [t for t in dict.fromkeys(texts) if (prompt, text_key(t)) not in self._token_memo]
        if todo:
            if self.tokenizer is not None:
                ids = self.tokenizer(
                    [prompt + t for t in todo], add_special_tokens=True, truncation=False, verbose=False
                )["input_ids"]
                counts = [len(x) for x in ids]
            else:
                counts = [round(len((prompt + t).split()) / WORDS_PER_TOKEN) for t in todo]
            for text, n in zip(todo, counts, strict=True):
                self._token_memo[(prompt, text_key(text))] = n
        return [self._token_memo[(prompt, text_key(t))] for t in texts]

    def missing(
        self, texts: Sequence[str], shard: str, prompt: str = "", temperature: float | None = None,
        normalize: bool = True, quantity: str = "embedding", keys: Sequence[str] | None = None,
    ) -> tuple[int, list[str]]:
        """(distinct texts already cached, the distinct texts that are not): for cost estimates."""
        return count_missing(texts, self.namespace(prompt, temperature, normalize, quantity), shard, keys)

    # ------------------------------------------------------------------ encoding
    def _call_options(self, prompt: str, tau: float, **options: Any) -> dict[str, Any]:
        """Keyword arguments of the wrapped encoder's calls: batch size, prompt, and tau when it is
        not the encoder's own (an encoder without per-call tau never sees the argument)."""
        kwargs: dict[str, Any] = {"batch_size": self.batch_size, "prompt": prompt, **options}
        if tau != self.configured_temperature:
            kwargs["temperature"] = tau
        return kwargs

    def _encode_texts(self, texts: list[str], kwargs: dict[str, Any]) -> np.ndarray:
        """The wrapped encoder's vectors of ``texts``: the options its ``encode`` takes passed, a prompt
        it cannot take put before each text, the rest (batch size, progress bar, normalization: this
        wrapper normalizes) left out."""
        taken = {k: v for k, v in kwargs.items() if k not in ENCODE_OPTIONS or self._takes[k]}
        if not self._takes["prompt"] and kwargs.get("prompt"):
            texts = [kwargs["prompt"] + t for t in texts]
        return np.asarray(self.encoder.encode(texts, **taken), dtype=np.float32)

    def encode(
        self,
        texts: Sequence[str],
        *,
        shard: str,
        prompt: str = "",
        temperature: float | None = None,
        normalize_embeddings: bool = True,
        desc: str | None = None,
    ) -> CachedEncoding:
        """Vectors of ``texts`` in order: cached ones read, the rest encoded in chunks and stored.

        ``shard`` groups the cache entries (e.g. "passkey/4096/documents"); unit vectors unless
        ``normalize_embeddings=False`` (raw pooled vectors, a separate namespace).
        """
        tau = self.temperature(temperature)
        kwargs = self._call_options(prompt, tau, normalize_embeddings=normalize_embeddings, show_progress_bar=False)

        def encode_chunk(chunk: list[str]) -> np.ndarray:
            with warnings.catch_warnings():
                # inputs longer than max_length are truncated with a warning per call; callers count
                # them from the token counts and report them once
                warnings.simplefilter("ignore", UserWarning)
                return self._encode_texts(chunk, kwargs)

        result = self.compute(
            texts, encode_chunk, shard=shard, prompt=prompt,
            namespace=self.namespace(prompt, tau, normalize_embeddings), desc=desc,
            read_chars=_read_chars(self.max_length),
        )
        if normalize_embeddings:
            norms = np.linalg.norm(result.vectors, axis=1, keepdims=True)
            result.vectors = result.vectors / np.where(norms > 0, norms, 1.0)
        return result

    def encode_chunks(
        self,
        texts: Sequence[str],
        *,
        shard: str,
        chunking: str | None = "tokens:256",
        spans: Sequence[Sequence[tuple[int, int]]] | None = None,
        late: bool = True,
        prompt: str = "",
        temperature: float | None = None,
        desc: str | None = None,
    ) -> CachedEncoding:
        """Unit chunk vectors of every text (``rows``: how many per text), through the cache.

        Chunks come from ``chunking`` ("tokens:256", "sentences:4", ...) or, for a passage task, from
        ``spans`` (character spans per text, which then also key the cache).  ``late`` chooses late
        or naive chunking (``LongContextEncoder.encode_chunks``).
        """
        if (chunking is None) == (spans is None):
            raise UserError("give exactly one of chunking and spans")
        if not isinstance(self.encoder, ChunkEncoder):
            raise UserError(f"{type(self.encoder).__name__} embeds whole texts only (it has no encode_chunks): "
                            "use granularity='document'")
        tau = self.temperature(temperature)
        keys = None if spans is None else chunk_keys(texts, spans)
        spans_of = {} if spans is None else {text_key(t): list(s) for t, s in zip(texts, spans, strict=True)}
        kwargs = self._call_options(prompt, tau, late=late, normalize_embeddings=True)

        def encode_chunk(chunk: list[str]) -> list[np.ndarray]:
            how = chunking if spans is None else [spans_of[text_key(t)] for t in chunk]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                return [vectors for vectors, _ in self.encoder.encode_chunks(chunk, how, **kwargs)]

        quantity = chunk_quantity(chunking, late)
        return self.compute(
            texts, encode_chunk, shard=shard, prompt=prompt, keys=keys,
            namespace=self.namespace(prompt, tau, True, quantity), desc=desc,
        )

    def encode_token_vectors(
        self,
        texts: Sequence[str],
        *,
        shard: str,
        late: bool = True,
        chunking: str = "tokens:256",
        document: bool = True,
        prompt: str = "",
        temperature: float | None = None,
        desc: str | None = None,
    ) -> CachedEncoding:
        """Late interaction's token vectors of every text (``rows``: how many per text), float16 unit rows,
        through the cache (:func:`~longembed.chunking.multivector.encode_token_vectors`: ``late`` one pass
        over each text, else each chunk of ``chunking`` alone; ``document``: documents drop punctuation)."""
        if not hasattr(self.encoder, "encode_tokens") or not hasattr(self.encoder, "chunk_spans"):
            raise UserError(f"{type(self.encoder).__name__} gives no token states (it has no encode_tokens): "
                            "--granularity tokens needs a longembed encoder")
        tau = self.temperature(temperature)
        options = self._call_options(prompt, tau)

        def encode_chunk(chunk: list[str]) -> list[np.ndarray]:
            return encode_token_vectors(self.encoder, chunk, late=late, chunking=chunking, document=document,
                                        **options)

        return self.compute(
            texts, encode_chunk, shard=shard, prompt=prompt, desc=desc,
            namespace=self.namespace(prompt, tau, True, token_quantity(late, chunking, document)),
        )

    def compute(
        self,
        texts: Sequence[str],
        function: Callable[[list[str]], np.ndarray],
        *,
        shard: str,
        namespace: CacheNamespace | None,
        prompt: str = "",
        desc: str | None = None,
        keys: Sequence[str] | None = None,
        read_chars: int | None = None,
    ) -> CachedEncoding:
        """Any per-text quantity (rows of ``function(texts)``, or one matrix per text) through the cache
        of ``namespace``; ``keys`` replace the texts' own cache keys.

        The progress bar counts tokens (about :data:`CHARS_PER_TOKEN` characters each; a text read only
        up to ``read_chars`` characters, as a truncating encoder reads it, counts only those), not texts:
        missing texts are encoded longest first, so a bar of texts would see the slowest ones first and
        put the remaining time several times too high.  Its clock starts once the model's weights are
        loaded (a lazy encoder loads them at its first encode), for the same reason.
        """
        def weight(text: str) -> float:
            return (len(text) if read_chars is None else min(len(text), read_chars)) / CHARS_PER_TOKEN

        total = sum(weight(t) for t in texts)
        with tqdm(total=total, desc=desc or shard, unit="tok", unit_scale=True, disable=not self.show_progress,
                  bar_format=PROGRESS_FORMAT) as bar:

            def before_encoding() -> None:
                self.load_weights()
                bar.unpause()  # the clock restarts: loading is not the first chunk's encoding time

            return encode_cached(
                texts,
                encode=function,
                count_tokens=lambda chunk: self.count_tokens(chunk, prompt),
                namespace=namespace,
                shard=shard,
                chunk_size=self.chunk_size,
                progress=bar.update,
                keys=keys,
                weight=weight,
                before_encoding=before_encoding,
            )

    def load_weights(self) -> None:
        """Load a lazy encoder's weights now (an encoder that has none to load: nothing)."""
        if getattr(self.encoder, "model_loaded", True) is False:
            _ = self.encoder.model  # type: ignore[attr-defined]


def chunk_quantity(chunking: str | None, late: bool) -> str:
    """The cache quantity of chunk vectors: "chunks/late/tokens:256", "chunks/naive/spans", ..."""
    return f"chunks/{'late' if late else 'naive'}/{chunking if chunking is not None else 'spans'}"


def token_quantity(late: bool, chunking: str | None, document: bool) -> str:
    """The cache quantity of late interaction's token vectors: "tokens/late/documents",
    "tokens/naive/tokens:256/documents", "tokens/late/queries"."""
    how = "late" if late else f"naive/{chunking}"
    return f"tokens/{how}/{'documents' if document else 'queries'}"


def chunk_keys(texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]) -> list[str]:
    """Cache keys of texts chunked at given spans: sha256 of the text's key and its spans."""
    return [
        hashlib.sha256(f"{text_key(text)}:{json.dumps([list(s) for s in text_spans])}".encode()).hexdigest()
        for text, text_spans in zip(texts, spans, strict=True)
    ]


def _read_chars(max_length: int | None) -> int | None:
    """About how many characters of a text an encoder cut at ``max_length`` tokens reads (None: all)."""
    return None if not max_length else CHARS_PER_TOKEN * int(max_length)


# ---------------------------------------------------------------------- the encode loop
# plan (which texts are cached, which to encode, in which chunks), encode and store chunk by chunk,
# assemble every text's vector in input order


def plan_chunks(lengths: Sequence[int], chunk_size: int, chunk_chars: int) -> list[tuple[int, int]]:
    """Split a list of texts (given their lengths) into [start, end) chunks.

    At most ``chunk_size`` texts and, past the first text, at most ``chunk_chars`` characters per
    chunk. Greedy from the start, so the chunks of a suffix that begins at a chunk boundary are the
    same as in the full list: a resumed run encodes exactly the batches an uninterrupted run would.
    """
    chunks: list[tuple[int, int]] = []
    start = 0
    while start < len(lengths):
        end, chars = start, 0
        while end < len(lengths) and end - start < chunk_size and (end == start or chars + lengths[end] <= chunk_chars):
            chars += lengths[end]
            end += 1
        chunks.append((start, end))
        start = end
    return chunks


@dataclass
class LookupPlan:
    """What one call has to do: the texts' keys in input order, the distinct texts by key, the keys
    found in the cache and those to encode (in encoding order)."""

    keys: list[str]
    unique: dict[str, str]
    cached: set[str]
    missing: list[str]


def plan_lookup(texts: Sequence[str], keys: Sequence[str] | None, entries: ShardEntries) -> LookupPlan:
    """Keys (the texts' own, or ``keys``), distinct texts, and which of them are cached or missing."""
    keys = [text_key(t) for t in texts] if keys is None else list(keys)
    if len(keys) != len(texts):
        raise UserError(f"{len(keys)} keys for {len(texts)} texts")
    unique: dict[str, str] = {}
    for key, text in zip(keys, texts, strict=True):
        unique.setdefault(key, text)
    cached = {k for k in unique if k in entries}
    missing = sorted((k for k in unique if k not in cached), key=lambda k: (-len(unique[k]), k))
    return LookupPlan(keys, unique, cached, missing)


def encode_missing(
    plan: LookupPlan,
    encode: Callable[[list[str]], np.ndarray | list[np.ndarray]],
    count_tokens: Callable[[list[str]], list[int]],
    store: Callable[[list[str], np.ndarray | list[np.ndarray], list[int]], None],
    chunk_size: int,
    chunk_chars: int,
    progress: Callable[[float], None] | None,
    weight: Callable[[str], float] | None = None,
) -> tuple[ShardEntries, float]:
    """Encode the plan's missing texts chunk by chunk, ``store`` each chunk as it is done; returns the
    computed entries and the seconds spent encoding.  ``progress`` gets, after each chunk, the weight
    of the texts it did (``weight`` of each, default 1: a count)."""
    computed = ShardEntries()
    seconds = 0.0
    for start, end in plan_chunks([len(plan.unique[k]) for k in plan.missing], chunk_size, chunk_chars):
        written_keys = plan.missing[start:end]
        chunk_texts = [plan.unique[k] for k in written_keys]
        began = time.perf_counter()
        encoded = encode(chunk_texts)
        seconds += time.perf_counter() - began
        vectors = (
            np.asarray(encoded, dtype=np.float32) if isinstance(encoded, np.ndarray)
            else [np.asarray(e, dtype=stored_dtype(e)) for e in encoded]
        )
        if len(vectors) != len(chunk_texts):
            raise UserError(f"the encoder returned {len(vectors)} vectors for {len(chunk_texts)} texts")
        tokens = count_tokens(chunk_texts)
        store(written_keys, vectors, tokens)
        for i, key in enumerate(written_keys):
            computed.vectors[key] = vectors[i]
            computed.tokens[key] = int(tokens[i])
        if progress is not None:
            done = set(written_keys)
            progress(sum(_weight(weight, plan.unique[k]) for k in plan.keys if k in done))
    return computed, seconds


def _weight(weight: Callable[[str], float] | None, text: str) -> float:
    return 1 if weight is None else weight(text)


def encode_cached(
    texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray | list[np.ndarray]],
    count_tokens: Callable[[list[str]], list[int]],
    namespace: CacheNamespace | None,
    shard: str,
    chunk_size: int = 64,
    chunk_chars: int = 200_000,
    progress: Callable[[float], None] | None = None,
    keys: Sequence[str] | None = None,
    weight: Callable[[str], float] | None = None,
    before_encoding: Callable[[], None] | None = None,
) -> CachedEncoding:
    """Vectors of ``texts`` (in order), from the cache where possible, encoding the rest in chunks.

    ``encode`` returns one vector per text, or one (chunks, dim) matrix per text (chunked documents).
    ``keys`` replaces the texts' own keys (:func:`~longembed.evaluation.cache.storage.text_key`) when a vector
    depends on more than the text (e.g. the chunk spans a task gives).

    Identical texts are encoded once. Missing texts are encoded in chunks (:func:`plan_chunks`), each
    written to the cache as soon as it is done. With ``namespace=None`` nothing is read or written.
    ``progress(n)`` is called after each chunk with the weight of the texts done (``weight(text)``
    each; default 1, a count); ``before_encoding()`` once before the first text is encoded (not at all
    when everything is cached): a progress bar restarts its clock there, so loading the weights does
    not count as the first chunk's time.
    """
    entries = namespace.load(shard) if namespace is not None else ShardEntries()
    plan = plan_lookup(texts, keys, entries)
    if progress is not None and plan.cached:
        progress(sum(_weight(weight, plan.unique[k]) for k in plan.keys if k in plan.cached))
    if before_encoding is not None and plan.missing:
        before_encoding()

    def store(written_keys: list[str], vectors: np.ndarray | list[np.ndarray], tokens: list[int]) -> None:
        if namespace is not None:
            namespace.add(shard, written_keys, vectors, tokens)

    computed, seconds = encode_missing(plan, encode, count_tokens, store, chunk_size, chunk_chars, progress, weight)
    if namespace is not None and plan.missing:
        namespace.compact(shard)
    found = [(computed if key in computed else entries) for key in plan.keys]
    vectors, rows = stack_entries([source.vectors[key] for source, key in zip(found, plan.keys, strict=True)])
    return CachedEncoding(
        vectors=vectors,
        tokens=np.asarray([source.tokens[key] for source, key in zip(found, plan.keys, strict=True)], dtype=np.int64),
        n_unique=len(plan.unique),
        n_cached=len(plan.cached),
        n_encoded=len(plan.missing),
        encode_seconds=seconds,
        rows=rows,
    )


def count_missing(
    texts: Sequence[str], namespace: CacheNamespace | None, shard: str, keys: Sequence[str] | None = None
) -> tuple[int, list[str]]:
    """(number of distinct texts already cached, the distinct texts that are not), for estimates;
    ``keys`` as in :func:`encode_cached`."""
    entries = namespace.load(shard) if namespace is not None else ShardEntries()
    plan = plan_lookup(texts, keys, entries)
    missing = set(plan.missing)
    return len(plan.cached), [plan.unique[k] for k in plan.unique if k in missing]
