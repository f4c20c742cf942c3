"""The passage a result shows: the best sentence window of the document for the query, not the chunk
that scored the document (that chunk is 256 tokens; the answer is a sentence somewhere in it or next to it).

A document's pieces are defined once, over its whole text (:func:`document_pieces`): its sentences (a line
break ends one only after terminal punctuation or at a blank line, so a hard-wrapped paragraph is read by
the sentence), a sentence longer than :data:`WINDOW_WORDS` words cut at spaces; so the pieces around any
chunk are a slice of the document's pieces, and an index can embed them all when it is built.  Around a
document's best chunks (:attr:`PassageRule.chunks`, 4), every piece a chunk overlaps is a candidate, and
overlapping windows of consecutive pieces (at most :data:`WINDOW_SENTENCES` pieces and :data:`WINDOW_WORDS`
words, one piece apart) are scored against the query.  Dense: each piece has one vector (the document
prompt): saved with the index (:attr:`PassageRequest.vectors`), else embedded here (all pieces of a search
in one batch); a window's vector is the word-weighted mean of its pieces' unit vectors, scaled to unit
length (what mean pooling over the window would give, without embedding it again), scored by cosine with
the query vector.  Lexical: a window's BM25 among its document's windows (eval's tokenizer and stemmer,
from its pieces' term counts: :func:`window_bm25`).  A lexical strategy uses BM25, a hybrid fuses the two
as the strategy fuses documents, and a dense one mixes them linearly, BM25 weighing
:attr:`PassageRule.lexical_weight` (0.5): tuned on SQuAD, where cosine alone over 2 chunks showed the answer
for 66% of questions and this rule for 81% (benchmarks/RESULTS.md, "Passage choice, fourth session").
The document's rank is not touched: only which part of it is shown.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from longembed.chunking.spans import Span, spans_between
from longembed.errors import UserError
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import fuse_scores

#: at most this many sentences (pieces) per window
WINDOW_SENTENCES = 3
#: at most this many words (whitespace-separated) per window; a longer sentence is cut into pieces this long
WINDOW_WORDS = 100
#: the best chunks of a document whose sentences are searched for the passage (on SQuAD, 2: 66.3% of passages
#: held the answer with cosine alone, 4: 72.1%; every piece: 73.1% at a cost that grows with the document)
CHUNKS_PER_DOCUMENT = 4
#: a dense-only strategy's window score: this weight of the window's BM25 (min-max per document), the rest its
#: cosine (min-max); on SQuAD over 4 chunks 0: 72.1%, 0.3: 80.3%, 0.5: 80.8%, 0.7: 80.8%, 1 (BM25 alone): 77.4%
LEXICAL_WEIGHT = 0.5
#: window scores are compared to this many decimals: equal windows tie whatever the query vector's last bits
TIE_DECIMALS = 9
#: documents whose pieces and pieces' BM25 terms are kept for the next query that shows them
DOCUMENTS_KEPT = 64
#: how a search's results show a passage: the best window for the query, or the chunk that scored the document
PASSAGE_CHOICES = ("query", "chunk")

_WORDS = re.compile(r"\S+")
#: where a piece ends: after . ! ? or an ellipsis (closing quotes or brackets included) followed by whitespace,
#: a line ending in one included; or at a blank line.  A single line break inside a paragraph does not end
#: a piece: hard-wrapped text (the essays: a line of 60-70 characters) is read by the sentence, not the line
PIECE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f]+[\"'\u201d\u2019)\]]*(?=\s)|\n[ \t\r\f\v]*\n")

EmbedTexts = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class PassageQuery:
    """What a passage is chosen for: the query's text (BM25) and unit vector (dense; None for a
    lexical-only strategy)."""

    text: str
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class PassageRequest:
    """One result document: its text and the character spans of its best chunks (best first).

    ``pieces``: the document's pieces as an index saved them (:func:`document_pieces`, a (pieces, 2)
    array of spans; None: found here), and ``vectors``: their unit vectors, one row per piece, with the
    document prompt (None: embedded here, by :func:`choose_passages`'s ``embed``)."""

    text: str
    chunks: Sequence[Span]
    pieces: np.ndarray | None = None
    vectors: np.ndarray | None = None


def check_passages(passages: str) -> str:
    """``passages`` when it is one of :data:`PASSAGE_CHOICES`, else a :class:`UserError`."""
    if passages not in PASSAGE_CHOICES:
        raise UserError(f"passages must be one of {', '.join(PASSAGE_CHOICES)}, got {passages!r}")
    return passages


def piece_sentences(text: str) -> list[Span]:
    """The sentences of ``text`` by :data:`PIECE_END`, each without its surrounding whitespace: a line
    break ends one only after terminal punctuation or at a blank line (a hard-wrapped paragraph's lines
    are joined)."""
    return spans_between(text, PIECE_END)


def sentence_pieces(text: str, start: int, end: int, max_words: int = WINDOW_WORDS) -> list[Span]:
    """The sentences of ``text[start:end]`` (:func:`piece_sentences`) as absolute spans, a sentence of more
    than ``max_words`` words cut at whitespace into pieces of at most ``max_words`` words (never inside a word)."""
    pieces: list[Span] = []
    for s, e in piece_sentences(text[start:end]):
        pieces.extend(_word_pieces(text, start + s, start + e, max_words))
    return pieces


def _word_pieces(text: str, start: int, end: int, max_words: int) -> list[Span]:
    words = [(start + m.start(), start + m.end()) for m in _WORDS.finditer(text[start:end])]
    return [(words[i][0], words[min(i + max_words, len(words)) - 1][1]) for i in range(0, len(words), max_words)]


def document_pieces(text: str, max_words: int = WINDOW_WORDS) -> list[Span]:
    """Every piece of ``text``, in order: :func:`sentence_pieces` over the whole text (the pieces an index
    saves; those around any chunk are a slice of them)."""
    return sentence_pieces(text, 0, len(text), max_words)


def pieces_until(text: str, end: int, max_words: int = WINDOW_WORDS) -> list[Span]:
    """The pieces of :func:`document_pieces` that start before ``end``, found without reading the text
    past the first sentence end at or after ``end``, nor past ``max_words`` words after it (a truncating
    index reads the first window of a long document, and only its pieces can be shown: a 200 MB text is
    not split whole for them, even when it has no sentence end at all).  A piece is at most ``max_words``
    words, cut from its sentence's start, so one that starts before ``end`` ends within those words."""
    if end >= len(text):
        return document_pieces(text, max_words)
    bound = len(text)
    for count, word in enumerate(_WORDS.finditer(text, end), start=1):
        if count > max_words:
            bound = word.end()
            break
    stop = PIECE_END.search(text, end, bound)
    limit = bound if stop is None else stop.end()
    return [piece for piece in sentence_pieces(text, 0, limit, max_words) if piece[0] < end]


def covered_pieces(pieces: Sequence[Span] | np.ndarray, chunks: Sequence[Span]) -> list[list[int]]:
    """The indices of the document's ``pieces`` (:func:`document_pieces`, in order) that overlap
    ``chunks``, whole, each once, as runs of consecutive pieces (nothing but whitespace between them)."""
    spans = np.asarray(pieces, dtype=np.int64).reshape(-1, 2)
    found: set[int] = set()
    for lo, hi in _merged(chunks):
        first = int(np.searchsorted(spans[:, 1], lo, side="right"))  # the first piece ending after lo
        stop = int(np.searchsorted(spans[:, 0], hi, side="left"))  # past the last piece starting before hi
        found.update(range(first, stop))
    runs: list[list[int]] = []
    for i in sorted(found):
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def chunk_pieces(text: str, chunks: Sequence[Span], max_words: int = WINDOW_WORDS) -> list[list[Span]]:
    """The pieces of ``text`` that overlap ``chunks``, whole (a sentence cut by a chunk's edge is read to
    its end), each once, as runs of consecutive pieces (nothing but whitespace between them), in text order."""
    pieces = pieces_until(text, max((int(e) for _, e in chunks), default=0), max_words)
    return [[pieces[i] for i in run] for run in covered_pieces(pieces, chunks)]


def _merged(chunks: Sequence[Span]) -> list[Span]:
    merged: list[list[int]] = []
    for s, e in sorted((int(s), int(e)) for s, e in chunks):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def run_windows(text: str, run: Sequence[Span], max_sentences: int = WINDOW_SENTENCES,
                max_words: int = WINDOW_WORDS) -> list[tuple[int, int]]:
    """Windows over one run of pieces, as (first piece, last piece) index pairs: one starting at every
    piece, as many consecutive pieces as fit in ``max_sentences`` and ``max_words`` (at least one)."""
    if max_sentences < 1 or max_words < 1:
        raise UserError(f"a passage window needs at least one sentence and one word, got {max_sentences}, {max_words}")
    counts = [_words(text, s, e) for s, e in run]
    out = []
    for first in range(len(run)):
        last, words = first, counts[first]
        while last + 1 < len(run) and last + 2 - first <= max_sentences and words + counts[last + 1] <= max_words:
            last, words = last + 1, words + counts[last + 1]
        out.append((first, last))
    return out


def windows(text: str, chunks: Sequence[Span], max_sentences: int = WINDOW_SENTENCES,
            max_words: int = WINDOW_WORDS) -> list[Span]:
    """The character spans of the windows around ``chunks`` (see the module docstring), in text order."""
    return [(run[a][0], run[b][1]) for run in chunk_pieces(text, chunks, max_words)
            for a, b in run_windows(text, run, max_sentences, max_words)]


def _words(text: str, start: int, end: int) -> int:
    return len(text[start:end].split())


@dataclass(frozen=True)
class PassageRule:
    """How a passage is chosen: windows of at most ``sentences`` pieces and ``words`` words, over the
    pieces of a document's ``chunks`` best chunks (0: every chunk; :func:`best_chunk_rows` picks them, and
    :func:`choose_passages` searches the chunks its requests give), and for a dense-only strategy the weight
    of the windows' BM25 in a linear mix with their cosine (0: cosine alone)."""

    sentences: int = WINDOW_SENTENCES
    words: int = WINDOW_WORDS
    chunks: int = CHUNKS_PER_DOCUMENT
    lexical_weight: float = LEXICAL_WEIGHT

    def __post_init__(self) -> None:
        if self.sentences < 1 or self.words < 1 or self.chunks < 0 or not 0 <= self.lexical_weight <= 1:
            raise UserError(f"a passage rule needs at least one sentence and one word per window, chunks >= 0 "
                            f"and a lexical weight in [0, 1], got {self}")

    def chunk_count(self, chunks: int) -> int:
        """How many of a document's ``chunks`` (best first) its pieces are searched in."""
        return chunks if self.chunks == 0 else min(self.chunks, chunks)


#: the rule search, ``/search`` and eval's passage metric use
PASSAGE_RULE = PassageRule()


@dataclass(frozen=True)
class _Candidates:
    """One document's candidate pieces (spans, and their rows in the document's pieces) and windows
    (index pairs into ``pieces``)."""

    pieces: list[Span]
    rows: list[int]
    windows: list[tuple[int, int]]


def _candidates(document: PassageRequest, rule: PassageRule) -> _Candidates:
    every = _known_pieces(document.text) if document.pieces is None else document.pieces
    pieces: list[Span] = []
    rows: list[int] = []
    spans: list[tuple[int, int]] = []
    for run in covered_pieces(every, document.chunks):
        spans_of_run = [(int(every[i][0]), int(every[i][1])) for i in run]
        spans += [(len(pieces) + a, len(pieces) + b)
                  for a, b in run_windows(document.text, spans_of_run, rule.sentences, rule.words)]
        pieces += spans_of_run
        rows += run
    return _Candidates(pieces, rows, spans)


def choose_passages(query: PassageQuery, documents: Sequence[PassageRequest], embed: EmbedTexts | None,
                    lexical: bool, fusion: Fusion | None = None, rule: PassageRule = PASSAGE_RULE) -> list[Span]:
    """Per document, the span of its best window for ``query`` (see the module docstring).

    ``documents``' chunks are the ones searched, best first (:func:`best_chunk_rows`); ``rule`` says how
    large a window is and how much BM25 a dense-only strategy mixes in.  ``embed``: the pieces' vectors with the document prompt, called once with every piece
    of every document whose request holds no saved ``vectors`` (not called when all do; None: no dense
    side unless all do); ``lexical``: the strategy scores documents by BM25, so windows are too; with both,
    ``fusion`` says how to fuse them (as the strategy fuses documents).  A dense-only strategy mixes in
    the windows' BM25 by ``rule.lexical_weight``.  A document with no window (only whitespace in its
    chunks) gets its best chunk."""
    found = [_candidates(d, rule) for d in documents]
    to_embed = [d.text[s:e] for d, c in zip(documents, found, strict=True) if d.vectors is None for s, e in c.pieces]
    dense = query.vector is not None and (embed is not None or not to_embed)
    if not dense and not lexical:
        raise UserError("choosing a passage needs a query vector and a way to embed windows, BM25, or both")
    if dense and lexical and fusion is None:
        raise UserError("dense and lexical passage scores without a fusion rule: say how to fuse them")
    if dense and not lexical and rule.lexical_weight > 0:  # lexical evidence for a dense-only strategy
        fusion, lexical = Fusion(method="linear", weight=rule.lexical_weight), True
    piece_vectors = _piece_vectors(documents, found, embed, to_embed) if dense else None
    chosen = []
    for i, (document, candidates) in enumerate(zip(documents, found, strict=True)):
        if not candidates.windows:
            chosen.append(_fallback(document))
            continue
        spans = [(candidates.pieces[a][0], candidates.pieces[b][1]) for a, b in candidates.windows]
        dense_scores = None if piece_vectors is None else _dense_scores(document.text, candidates, piece_vectors[i],
                                                                        query.vector)
        lexical_scores = (window_bm25(query.text, document.text, candidates.pieces, candidates.windows)
                          if lexical else None)
        scores = _window_scores(dense_scores, lexical_scores, fusion)
        chosen.append(spans[int(np.argmax(scores))])  # the first of equals: the earliest window
    return chosen


def _dense_scores(text: str, candidates: _Candidates, piece_vectors: np.ndarray, query: np.ndarray | None) -> np.ndarray:
    """Each window's cosine with ``query`` (rounded: windows of the same text differ only by float noise from
    the prefix sums, and tied, the earliest is shown)."""
    weights = np.asarray([_words(text, s, e) for s, e in candidates.pieces], dtype=np.float64)
    window_vectors = _window_vectors(piece_vectors, weights, candidates.windows)
    return np.round(window_vectors @ np.asarray(query, dtype=np.float64), TIE_DECIMALS)


def window_bm25(query: str, text: str, pieces: Sequence[Span], windows: Sequence[tuple[int, int]]) -> np.ndarray:
    """Each window's BM25 among the given windows (eval's tokenizer, stopwords and stemmer; what
    ``BM25Model().score([query], windows' texts)`` gives), a window being (first piece, last piece) of
    ``pieces``, from the pieces' counts of the query's terms: each piece is tokenized once, a window's
    counts are prefix sums.  A search scores a document's windows among its own windows, so its choice does
    not depend on which other documents the search returned."""
    model = BM25Model()
    query_terms = Counter(model.terms([query])[0])
    terms = list(query_terms)
    column = {t: i for i, t in enumerate(terms)}
    piece_terms = _piece_terms(text, tuple(pieces))
    counts = np.zeros((len(piece_terms) + 1, len(terms) + 1))
    for i, found in enumerate(piece_terms, start=1):
        counts[i, -1] = len(found)
        for t in found:
            if t in column:
                counts[i, column[t]] += 1
    prefix = np.cumsum(counts, axis=0)
    first, last = (np.asarray(side, dtype=np.int64) for side in zip(*windows, strict=True))
    in_windows = prefix[last + 1] - prefix[first]
    return model.count_scores(in_windows[:, :-1], in_windows[:, -1], np.asarray([query_terms[t] for t in terms]))


@functools.lru_cache(maxsize=DOCUMENTS_KEPT)
def _known_pieces(text: str) -> tuple[Span, ...]:
    """:func:`document_pieces` of ``text``, kept for the next query that shows the same document (eval's
    passage metric asks it once per query: QMSum's 197 meetings for 1,527 queries)."""
    return tuple(document_pieces(text))


@functools.lru_cache(maxsize=DOCUMENTS_KEPT)
def _piece_terms(text: str, pieces: tuple[Span, ...]) -> list[list[str]]:
    """The BM25 terms of each of ``text``'s ``pieces``, kept as :func:`_known_pieces` is (read only)."""
    return BM25Model().terms([text[s:e] for s, e in pieces])


def _piece_vectors(documents: Sequence[PassageRequest], found: Sequence[_Candidates], embed: EmbedTexts | None,
                   to_embed: list[str]) -> list[np.ndarray]:
    """Per document, its candidate pieces' unit vectors (float64): read from its saved ``vectors``, else
    from one call of ``embed`` over every piece ``to_embed`` (the pieces of the documents without)."""
    embedded = np.zeros((0, 0))
    if to_embed:
        assert embed is not None
        embedded = np.asarray(embed(to_embed), dtype=np.float64)
    out, offset = [], 0
    for document, candidates in zip(documents, found, strict=True):
        if document.vectors is not None:
            out.append(_unit(np.asarray(document.vectors[candidates.rows], dtype=np.float64)))
        else:
            out.append(_unit(embedded[offset : offset + len(candidates.pieces)]))
            offset += len(candidates.pieces)
    return out


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _window_vectors(pieces: np.ndarray, weights: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Each window's vector: the word-weighted mean of its pieces' unit vectors, scaled to unit length."""
    weighted = np.concatenate([np.zeros((1, pieces.shape[1])), np.cumsum(pieces * weights[:, None], axis=0)])
    return _unit(np.stack([weighted[b + 1] - weighted[a] for a, b in spans]))


def _window_scores(dense: np.ndarray | None, lexical: np.ndarray | None, fusion: Fusion | None) -> np.ndarray:
    if dense is not None and lexical is not None:
        assert fusion is not None
        return fuse_scores(fusion, dense[None, :], lexical[None, :])[0]
    scores = dense if dense is not None else lexical
    assert scores is not None
    return scores


def _fallback(document: PassageRequest) -> Span:
    return tuple(document.chunks[0]) if document.chunks else (0, len(document.text))  # type: ignore[return-value]


def best_chunk_rows(chunk_scores: np.ndarray, first_row: int, n: int | None = None) -> list[int]:
    """The global rows of a document's ``n`` best chunks (None: as many as :data:`PASSAGE_RULE` searches),
    best first (the first of equals first), from its chunks' scores (``chunk_scores[i]`` is row ``first_row + i``)."""
    n = PASSAGE_RULE.chunk_count(len(chunk_scores)) if n is None else n
    order = np.argsort(-np.asarray(chunk_scores, dtype=np.float64), kind="stable")[:n]
    return [first_row + int(i) for i in order]


def overlaps(span: Span, answers: Sequence[Span]) -> bool:
    """Whether ``span`` shares a character with any of ``answers`` (half-open spans)."""
    return any(span[0] < e and s < span[1] for s, e in answers)
