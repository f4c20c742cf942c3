"""The passage a result shows: the best sentence window of the document for the query, not the chunk
that scored the document (that chunk is 256 tokens; the answer is a sentence somewhere in it or next to it).

Around a document's best chunks, overlapping windows of whole sentences (at most :data:`WINDOW_SENTENCES`
sentences and :data:`WINDOW_WORDS` words, one sentence apart; a sentence longer than that is cut at
spaces) are scored against the query: by cosine with the query vector (the windows embedded with the
document prompt, all windows of a search in one batch), by BM25 (eval's tokenizer and stemmer) for a
lexical strategy, and by the strategy's fusion of the two for a hybrid.  The document's rank is not
touched: only which part of it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from longembed.chunking.spans import SENTENCE_END, Span, sentence_spans
from longembed.errors import UserError
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import fuse_scores

#: at most this many sentences per window
WINDOW_SENTENCES = 3
#: at most this many words (whitespace-separated) per window; a longer sentence is cut into pieces this long
WINDOW_WORDS = 100
#: the best chunks of a document whose neighbourhood is searched for the passage
CHUNKS_PER_DOCUMENT = 3

_WORDS = re.compile(r"\S+")
#: how far back a window's first sentence is looked for, before a chunk that starts mid-sentence
_LOOK_BACK = 2000

EmbedTexts = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class PassageQuery:
    """What a passage is chosen for: the query's text (BM25) and unit vector (dense; None for a
    lexical-only strategy)."""

    text: str
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class PassageRequest:
    """One result document: its text and the character spans of its best chunks (best first)."""

    text: str
    chunks: Sequence[Span]


def sentence_pieces(text: str, start: int, end: int, max_words: int = WINDOW_WORDS) -> list[Span]:
    """The sentences of ``text[start:end]`` as absolute spans, a sentence of more than ``max_words``
    words cut at whitespace into pieces of at most ``max_words`` words (never inside a word)."""
    pieces: list[Span] = []
    for s, e in sentence_spans(text[start:end]):
        pieces.extend(_word_pieces(text, start + s, start + e, max_words))
    return pieces


def _word_pieces(text: str, start: int, end: int, max_words: int) -> list[Span]:
    words = [(start + m.start(), start + m.end()) for m in _WORDS.finditer(text[start:end])]
    return [(words[i][0], words[min(i + max_words, len(words)) - 1][1]) for i in range(0, len(words), max_words)]


def windows(text: str, chunks: Sequence[Span], max_sentences: int = WINDOW_SENTENCES,
            max_words: int = WINDOW_WORDS) -> list[Span]:
    """Overlapping windows around ``chunks``: one starting at every sentence that a chunk overlaps, each
    as many whole sentences as fit in ``max_sentences`` and ``max_words`` (at least one; a window may run
    past its chunk's end, so an answer cut by a chunk boundary is whole in some window).  Sorted, unique."""
    if max_sentences < 1 or max_words < 1:
        raise UserError(f"a passage window needs at least one sentence and one word, got {max_sentences}, {max_words}")
    if not chunks:
        return []
    # the sentences of the stretch the chunks cover, with room for windows running past a chunk's end
    lo = _sentence_start(text, min(s for s, _ in chunks))
    hi = min(len(text), max(e for _, e in chunks) + _reach(max_sentences, max_words))
    pieces = sentence_pieces(text, lo, hi, max_words)
    out: set[Span] = set()
    for i, (start, end) in enumerate(pieces):
        if not any(start < ce and end > cs for cs, ce in chunks):
            continue
        words, last = _words(text, start, end), i
        while last + 1 < len(pieces) and last + 2 - i <= max_sentences:
            more = _words(text, *pieces[last + 1])
            if words + more > max_words:
                break
            words, last = words + more, last + 1
        out.add((start, pieces[last][1]))
    return sorted(out)


def _reach(max_sentences: int, max_words: int) -> int:
    """Characters a window can run past its first sentence (generous: long words, spacing)."""
    return 20 * max_words * max_sentences


def _sentence_start(text: str, position: int) -> int:
    """Where the sentence holding ``position`` starts (a chunk may begin mid-sentence): just after the
    last sentence end before it, else (a sentence longer than :data:`_LOOK_BACK`) after the last space."""
    lo = max(0, position - _LOOK_BACK)
    ends = [m.end() for m in SENTENCE_END.finditer(text, lo, position)]
    if ends:
        return ends[-1]
    if lo == 0:
        return 0
    space = text.rfind(" ", lo, position)
    return position if space < 0 else space + 1


def _words(text: str, start: int, end: int) -> int:
    return len(text[start:end].split())


def choose_passages(query: PassageQuery, documents: Sequence[PassageRequest], embed: EmbedTexts | None,
                    lexical: bool, fusion: Fusion | None = None) -> list[Span]:
    """Per document, the span of its best window for ``query`` (see the module docstring).

    ``embed``: the windows' vectors with the document prompt (None: no dense side); ``lexical``: score
    windows by BM25; with both, ``fusion`` says how to fuse them (as the strategy fuses documents).  A
    document with no window (only whitespace in its chunks) gets its best chunk."""
    dense = embed is not None and query.vector is not None
    if not dense and not lexical:
        raise UserError("choosing a passage needs a query vector and a way to embed windows, BM25, or both")
    if dense and lexical and fusion is None:
        raise UserError("dense and lexical passage scores without a fusion rule: say how to fuse them")
    spans = [windows(d.text, d.chunks) for d in documents]
    texts = [d.text[s:e] for d, ws in zip(documents, spans, strict=True) for s, e in ws]
    if not texts:
        return [_fallback(d) for d in documents]
    dense_scores = _dense_scores(query, texts, embed) if dense else None
    lexical_scores = BM25Model().score([query.text], texts)[0].astype(np.float64) if lexical else None
    chosen, offset = [], 0
    for document, ws in zip(documents, spans, strict=True):
        part = slice(offset, offset + len(ws))
        offset += len(ws)
        if not ws:
            chosen.append(_fallback(document))
            continue
        scores = _window_scores(None if dense_scores is None else dense_scores[part],
                                None if lexical_scores is None else lexical_scores[part], fusion)
        chosen.append(ws[int(np.argmax(scores))])  # the first of equals: the earliest window
    return chosen


def _dense_scores(query: PassageQuery, texts: list[str], embed: EmbedTexts) -> np.ndarray:
    vectors = np.asarray(embed(texts), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    return vectors @ np.asarray(query.vector, dtype=np.float64) / np.where(norms > 0, norms, 1.0)


def _window_scores(dense: np.ndarray | None, lexical: np.ndarray | None, fusion: Fusion | None) -> np.ndarray:
    if dense is not None and lexical is not None:
        assert fusion is not None
        return fuse_scores(fusion, dense[None, :], lexical[None, :])[0]
    scores = dense if dense is not None else lexical
    assert scores is not None
    return scores


def _fallback(document: PassageRequest) -> Span:
    return tuple(document.chunks[0]) if document.chunks else (0, len(document.text))  # type: ignore[return-value]


def best_chunk_rows(chunk_scores: np.ndarray, first_row: int, n: int = CHUNKS_PER_DOCUMENT) -> list[int]:
    """The global rows of a document's ``n`` best chunks, best first (the first of equals first), from
    its chunks' scores (``chunk_scores[i]`` is row ``first_row + i``)."""
    order = np.argsort(-np.asarray(chunk_scores, dtype=np.float64), kind="stable")[:n]
    return [first_row + int(i) for i in order]


def overlaps(span: Span, answers: Sequence[Span]) -> bool:
    """Whether ``span`` shares a character with any of ``answers`` (half-open spans)."""
    return any(span[0] < e and s < span[1] for s, e in answers)


