"""One vector per token for late interaction (``--granularity tokens``): the model's own token states,
L2-normalised, stored as float16, of the tokens ColBERT would match.

Which tokens are kept, and why: the text's own tokens only.  The special tokens ([CLS], [SEP]) and the
prompt's tokens are dropped on both sides: PyLate and ColBERT keep them because their model was trained
with them as matching vectors (and [Q]/[D] markers), a sentence model's are not.  Documents also drop
PyLate's skiplist, the tokens that are one punctuation character (``string.punctuation``, as PyLate's
``skiplist_words``); queries keep every token of their text (PyLate's queries skip nothing but padding).
No padding is ever stored (every text is its own array), and there is no query augmentation ([MASK]
padding is a trained behaviour).  A text (with ``late=False``, a chunk) left with no token (all
punctuation) keeps its text tokens, and one with none at all its special tokens, so every text has at
least one vector.
"""

from __future__ import annotations

import string
from collections.abc import Collection, Sequence
from typing import Any, Protocol

import numpy as np

from longembed.chunking.tokens import TokenEmbeddings

#: the dtype token vectors are stored in (half the memory of float32; MaxSim widens each block to float32)
TOKEN_VECTOR_DTYPE = np.float16


class TokenStateEncoder(Protocol):
    """What :func:`encode_token_vectors` needs of an encoder (a ``LongContextEncoder``)."""

    tokenizer: Any
    window_length: int

    def encode_tokens(self, texts: Sequence[str], **options: Any) -> list[TokenEmbeddings]: ...

    def chunk_spans(self, texts: Sequence[str], chunking: Any) -> list[list[tuple[int, int]]]: ...


def punctuation_ids(tokenizer: Any) -> frozenset[int]:
    """The ids of the tokens that are one punctuation character (PyLate's skiplist); none without a
    tokenizer that maps tokens to ids."""
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    if convert is None:
        return frozenset()
    unknown = getattr(tokenizer, "unk_token_id", None)
    return frozenset(int(i) for i in convert(list(string.punctuation)) if i is not None and i != unknown)


def kept_tokens(tokens: TokenEmbeddings, skip_ids: Collection[int] = ()) -> np.ndarray:
    """The indices of the tokens a text keeps (see the module docstring): its text tokens not in
    ``skip_ids``; else its text tokens; else every token."""
    text = tokens.text_tokens
    kept = text & ~np.isin(tokens.input_ids, np.fromiter(skip_ids, dtype=np.int64, count=len(skip_ids)))
    for mask in (kept, text):
        if mask.any():
            return np.flatnonzero(mask)
    return np.arange(len(tokens.input_ids))


def unit_token_vectors(states: np.ndarray) -> np.ndarray:
    """Token states as unit rows in :data:`TOKEN_VECTOR_DTYPE` (normalised in float32 first)."""
    states = np.asarray(states, dtype=np.float32)
    norms = np.linalg.norm(states, axis=1, keepdims=True)
    return (states / np.maximum(norms, 1e-12)).astype(TOKEN_VECTOR_DTYPE)


def encode_token_vectors(encoder: TokenStateEncoder, texts: Sequence[str], *, late: bool = True,
                         chunking: str = "tokens:256", document: bool = True, **options: Any) -> list[np.ndarray]:
    """Per text, its kept tokens' unit vectors, (kept tokens, dim) float16.

    ``late``: one pass over the whole text, a text longer than the encoder's max_length run as windows of
    max_length sharing an eighth (each token sees its context up to Lt, as late chunking runs it);
    otherwise each chunk of ``chunking`` is embedded alone and the text's tokens are its chunks' tokens,
    in order.  ``document``: drop the punctuation skiplist (documents) or not (queries).  ``options``: the
    encoder's ``encode_tokens`` options (prompt, temperature, batch_size)."""
    skip = punctuation_ids(encoder.tokenizer) if document else frozenset()
    if late:
        states = encoder.encode_tokens(list(texts), window_overlap=encoder.window_length // 8, **options)
        return [unit_token_vectors(t.embeddings[kept_tokens(t, skip)]) for t in states]
    spans = encoder.chunk_spans(list(texts), chunking)
    pieces = [text[a:b] for text, text_spans in zip(texts, spans, strict=True) for a, b in text_spans]
    states = encoder.encode_tokens(pieces, **options)
    vectors = [unit_token_vectors(t.embeddings[kept_tokens(t, skip)]) for t in states]
    bounds = np.cumsum([0] + [len(s) for s in spans])
    return [np.concatenate(vectors[bounds[i] : bounds[i + 1]]) for i in range(len(texts))]
