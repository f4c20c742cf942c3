"""The passage a result shows: sentence windows around the best chunks, scored for the query from
sentence vectors embedded once, against a naive reference."""

from __future__ import annotations

import re
import textwrap
from dataclasses import replace

import numpy as np
import pytest

from longembed.errors import UserError
from longembed.retrieval import passages
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.passages import (
    PASSAGE_RULE,
    PassageQuery,
    PassageRequest,
    PassageRule,
    best_chunk_rows,
    check_passages,
    choose_passages,
    chunk_pieces,
    document_pieces,
    overlaps,
    pieces_until,
    sentence_pieces,
    window_bm25,
    windows,
)

VOCABULARY = ["river", "boat", "engine", "valve", "pressure", "harvest", "apple", "orchard", "winter", "snow",
              "tax", "form", "meeting", "budget", "remote", "control", "button", "battery"]


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A toy embedding: counts of the vocabulary's words (cosine = shared words)."""
    out = np.zeros((len(texts), len(VOCABULARY)), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in VOCABULARY:
                out[i, VOCABULARY.index(word)] += 1
    return out


def query(text: str) -> PassageQuery:
    vector = bag_of_words([text])[0]
    return PassageQuery(text, vector / np.linalg.norm(vector))


FILLER = "The committee met again on Tuesday."
ANSWER = "The valve releases pressure when the engine stops."


def document(answer_at: int, sentences: int = 12) -> str:
    parts = [f"{FILLER[:-1]} number {i}." for i in range(sentences)]
    parts[answer_at] = ANSWER
    return " ".join(parts)


def test_the_answer_in_the_last_sentence_of_the_best_chunk_is_shown() -> None:
    text = document(answer_at=5)
    chunk = (0, text.index(ANSWER) + len(ANSWER))  # the answer is the chunk's last sentence
    (span,) = choose_passages(query("engine valve pressure"), [PassageRequest(text, [chunk])], bag_of_words,
                              lexical=False)
    assert ANSWER in text[span[0] : span[1]]
    assert span[0] > 0  # not the chunk's start


def test_the_answer_in_the_second_best_chunk_is_shown() -> None:
    text = document(answer_at=9)
    cut = text.index(ANSWER) - 1
    chunks = [(0, cut), (cut + 1, len(text))]  # the first is "best"; the answer is in the second
    (span,) = choose_passages(query("valve pressure engine"), [PassageRequest(text, chunks)], bag_of_words,
                              lexical=False)
    assert ANSWER in text[span[0] : span[1]] and len(text[span[0] : span[1]].split()) <= 100


def test_an_answer_cut_by_a_chunk_boundary_is_shown_whole() -> None:
    text = document(answer_at=4)
    middle = text.index(ANSWER) + 12  # the chunk ends mid-answer, mid-word
    (span,) = choose_passages(query("engine pressure"), [PassageRequest(text, [(0, middle)])], bag_of_words,
                              lexical=False)
    assert ANSWER in text[span[0] : span[1]]


def test_windows_start_and_end_on_sentence_and_word_boundaries() -> None:
    text = document(answer_at=3, sentences=20)
    starts = {m.start() for m in re.finditer(r"The ", text)}
    chunk = (text.index("number 5") + 3, text.index("number 11") + 2)  # mid-word at both ends
    spans = windows(text, [chunk], max_sentences=3, max_words=100)
    assert spans and all(s in starts for s, _ in spans)
    assert all(text[e - 1] == "." and (e == len(text) or text[e] == " ") for _, e in spans)
    assert all(len(text[s:e].split()) <= 100 and text[s:e].count(".") <= 3 for s, e in spans)
    assert sorted({s for s, _ in spans}) == [s for s, _ in spans]  # stride: one sentence


def test_a_sentence_longer_than_the_window_is_cut_between_words() -> None:
    text = "intro. " + " ".join(f"w{i}" for i in range(250)) + " end."
    pieces = sentence_pieces(text, 0, len(text), max_words=100)
    assert [len(text[s:e].split()) for s, e in pieces] == [1, 100, 100, 51]
    assert all(text[s - 1] == " " and (e == len(text) or text[e] == " ") for s, e in pieces[1:])


def test_lexical_choice_uses_bm25_terms() -> None:
    text = document(answer_at=7)
    (span,) = choose_passages(PassageQuery("Why does the valve release pressure?"),
                              [PassageRequest(text, [(0, len(text))])], None, lexical=True)
    assert ANSWER in text[span[0] : span[1]]


def test_a_hybrid_fuses_dense_and_bm25_window_scores() -> None:
    text = document(answer_at=2) + " The engine is red."
    chosen = choose_passages(query("valve pressure engine"), [PassageRequest(text, [(0, len(text))])],
                             bag_of_words, lexical=True, fusion=Fusion())
    assert ANSWER in text[chosen[0][0] : chosen[0][1]]
    with pytest.raises(UserError, match="fusion"):
        choose_passages(query("valve"), [PassageRequest(text, [(0, 10)])], bag_of_words, lexical=True)


def test_each_sentence_of_the_best_chunks_is_embedded_once_in_one_batch() -> None:
    calls: list[list[str]] = []

    def counted(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return bag_of_words(texts)

    docs = [PassageRequest(document(i), [(0, 80), (40, 120)]) for i in range(4)]  # overlapping chunks
    choose_passages(query("valve"), docs, counted, lexical=False)
    assert len(calls) == 1
    # the sentences the chunks touch (chars 0-120: sentences 0-3, 37 characters each), each once per document
    expected = [d.text[m.start() : m.end()] for d in docs for m in re.finditer(r"[^ ][^.]*\.", d.text) if m.start() < 120]
    assert calls[0] == expected


def naive_choice(text: str, chunks: list[tuple[int, int]], q: PassageQuery,
                 weight: float = PASSAGE_RULE.lexical_weight) -> tuple[int, int]:
    """The definition, written out: sentences ("... ." here) touching a chunk, each embedded alone; a
    window of up to 3 consecutive ones within 100 words starts at each; its vector is the word-weighted
    sum of its sentences' unit vectors; its score ``(1 - weight)`` times its cosine plus ``weight`` times
    its BM25 (bm25s over the windows' texts), each min-max scaled over the windows; the best wins, the
    earliest of equals."""
    sentences = [(m.start(), m.end()) for m in re.finditer(r"[^ ][^.]*\.", text)]
    touched = [i for i, (s, e) in enumerate(sentences) if any(s < ce and e > cs for cs, ce in chunks)]
    unit = {i: v / (np.linalg.norm(v) or 1.0) for i, v in zip(touched, bag_of_words([text[slice(*sentences[i])]
                                                                                      for i in touched]), strict=True)}
    spans, cosines = [], []
    for i in touched:
        window = [i]
        while (len(window) < 3 and window[-1] + 1 in unit
               and sum(len(text[slice(*sentences[j])].split()) for j in [*window, window[-1] + 1]) <= 100):
            window.append(window[-1] + 1)
        total = sum(len(text[slice(*sentences[j])].split()) * unit[j] for j in window)
        cosines.append(float(total @ q.vector / (np.linalg.norm(total) or 1.0)))
        spans.append((sentences[window[0]][0], sentences[window[-1]][1]))
    bm25 = BM25Model().score([q.text], [text[s:e] for s, e in spans])[0].astype(np.float64)
    scaled = [(x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros(len(x))
              for x in (np.asarray(cosines), bm25)]
    scores = (1 - weight) * scaled[0] + weight * scaled[1]
    return spans[next(i for i, x in enumerate(scores) if x > scores.max() - 1e-9)]


@pytest.mark.parametrize("weight", [None, 0.0])
@pytest.mark.parametrize("seed", range(6))
def test_the_choice_matches_the_naive_definition(seed: int, weight: float | None) -> None:
    rng = np.random.default_rng(seed)
    sentences = [" ".join(rng.choice(VOCABULARY, size=rng.integers(3, 40))).capitalize() + "." for _ in range(30)]
    text = " ".join(sentences)
    cuts = sorted(rng.choice(len(text), size=4, replace=False).tolist())
    chunks = [(cuts[0], cuts[1]), (cuts[2], cuts[3])]
    q = query(" ".join(rng.choice(VOCABULARY, size=3)))
    rule = PASSAGE_RULE if weight is None else PassageRule(lexical_weight=weight)
    (span,) = choose_passages(q, [PassageRequest(text, chunks)], bag_of_words, lexical=False, rule=rule)
    assert span == naive_choice(text, chunks, q, rule.lexical_weight)


def test_pieces_are_whole_sentences_touching_the_chunks_grouped_when_adjacent() -> None:
    text = document(answer_at=0, sentences=12)
    starts = [m.start() for m in re.finditer(r"The ", text)]
    runs = chunk_pieces(text, [(starts[1] + 5, starts[2] + 3), (starts[6] + 1, starts[6] + 2)])
    assert [[text[s:e].split()[-1] for s, e in run] for run in runs] == [["1.", "2."], ["6."]]


def test_passages_is_query_or_chunk() -> None:
    assert check_passages("chunk") == "chunk"
    with pytest.raises(UserError, match="passages must be one of query, chunk"):
        check_passages("window")


def test_a_document_without_words_in_its_chunks_keeps_its_chunk() -> None:
    assert choose_passages(query("valve"), [PassageRequest("   \n  ", [(0, 6)])], bag_of_words, lexical=False) == [(0, 6)]


def test_nothing_to_score_with_is_an_error() -> None:
    with pytest.raises(UserError, match="needs a query vector"):
        choose_passages(PassageQuery("valve"), [PassageRequest("a.", [(0, 2)])], bag_of_words, lexical=False)


def test_best_chunk_rows_and_overlap() -> None:
    assert best_chunk_rows(np.array([0.1, 0.9, 0.5, 0.9]), 10, n=3) == [11, 13, 12]
    assert overlaps((5, 10), [(9, 12)]) and not overlaps((5, 10), [(10, 12), (0, 5)])


def test_the_pieces_around_any_chunk_are_a_slice_of_the_documents_pieces() -> None:
    """Pieces are defined once over the whole text, so an index can save them: a sentence of 1,000 words
    (no period for 4,900 characters) is cut from its own start, whichever chunk reads part of it."""
    long_sentence = " ".join(f"w{i}" for i in range(1000)) + "."
    text = f"{FILLER} {long_sentence} {ANSWER} {FILLER}"
    every = document_pieces(text)
    middle = text.index("w850 ")  # more than 2,000 characters into the sentence
    for chunk in [(middle, middle + 40), (0, 30), (text.index(ANSWER), len(text)), (middle, len(text) - 5)]:
        runs = chunk_pieces(text, [chunk])
        flat = [p for run in runs for p in run]
        first = every.index(flat[0])
        assert flat == every[first : first + len(flat)]
        assert all(p[0] < chunk[1] and p[1] > chunk[0] for p in flat)
    assert [len(text[s:e].split()) for s, e in every] == [6, *[100] * 10, 8, 6]


def test_saved_piece_vectors_are_used_without_embedding_and_choose_the_same_window() -> None:
    texts = [document(i) for i in range(4)]
    chunks = [[(0, 80), (150, 260)] for _ in texts]
    on_the_fly = choose_passages(query("valve pressure"), [PassageRequest(t, c) for t, c in zip(texts, chunks, strict=True)],
                                 bag_of_words, lexical=False)

    def refuse(_: list[str]) -> np.ndarray:
        raise AssertionError("a saved piece was embedded again")

    saved = []
    for t, c in zip(texts, chunks, strict=True):
        pieces = np.asarray(document_pieces(t), dtype=np.int64)
        vectors = bag_of_words([t[s:e] for s, e in pieces]).astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        saved.append(PassageRequest(t, c, pieces, vectors / np.where(norms > 0, norms, 1.0)))
    assert choose_passages(query("valve pressure"), saved, refuse, lexical=False) == on_the_fly
    assert choose_passages(query("valve pressure"), saved, None, lexical=False) == on_the_fly
    mixed = [saved[0], PassageRequest(texts[1], chunks[1]), saved[2], PassageRequest(texts[3], chunks[3])]
    calls: list[list[str]] = []
    assert choose_passages(query("valve pressure"), mixed, lambda ts: calls.append(ts) or bag_of_words(ts),
                           lexical=False) == on_the_fly
    assert len(calls) == 1 and all(text in texts[1] or text in texts[3] for text in calls[0])


def test_the_pieces_until_a_point_are_the_whole_documents_pieces_that_start_before_it() -> None:
    """A truncating index reads a document's first window: its pieces are those of the whole text that
    start before the window's end, found without splitting the rest (naive reference: split it all)."""
    rng = np.random.default_rng(7)
    vocabulary = ["word", "Dr.", "end.", "why?", "so!", "...", "\n", "\n\n", "said,", "\u201cquoted.\u201d", "x"]
    wrapped = ["word", "x", "\n", "said,"]  # no sentence end: sentences longer than a piece
    for i in range(300):
        words = vocabulary if i % 3 else wrapped
        text = " ".join(rng.choice(words, size=int(rng.integers(1, 400))))
        for end in {0, 1, len(text) // 3, len(text) // 2, len(text) - 1, len(text), int(rng.integers(0, len(text) + 1))}:
            whole = [p for p in document_pieces(text, 20) if p[0] < end]
            assert pieces_until(text, end, 20) == whole, (text, end)


def test_pieces_until_reads_a_bounded_prefix_of_a_text_with_no_sentence_end(monkeypatch) -> None:
    """A hard-wrapped text without one sentence end (issue 51's 200 MB test file): the pieces before the
    window's end are found from the text up to a piece's words past it, not from the whole text."""
    text = "\n".join(" ".join(["word"] * 12) for _ in range(50_000))
    end, seen, real = 330, [], passages.sentence_pieces
    monkeypatch.setattr(passages, "sentence_pieces", lambda t, s, e, m: seen.append(e) or real(t, s, e, m))
    got = pieces_until(text, end, 20)
    assert len(seen) == 1 and seen[0] <= end + 21 * len("word ")
    assert got == [p for p in real(text[:20_000], 0, 20_000, 20) if p[0] < end] and got[-1][0] < end < got[-1][1]


def test_a_hard_wrapped_paragraph_is_read_by_the_sentence_not_the_line() -> None:
    """The essays wrap lines at about 65 characters: a single line break inside a sentence does not end a
    piece; a line ending in terminal punctuation does, and so does a blank line (a heading without a period)."""
    text = ("Notes on valves\n\nThe valve releases pressure\nwhen the engine stops, and\nthe boat drifts.  "
            "Then the crew\nwaits.\nA new line after a period\nstarts a piece.\n \nLast words")
    assert [text[s:e] for s, e in document_pieces(text)] == [
        "Notes on valves", "The valve releases pressure\nwhen the engine stops, and\nthe boat drifts.",
        "Then the crew\nwaits.", "A new line after a period\nstarts a piece.", "Last words"]
    wrapped = "\n".join(textwrap.wrap(" ".join([ANSWER, *[FILLER] * 8]), 40))  # a paragraph of 9 sentences
    assert len(document_pieces(wrapped)) == 9 and len(wrapped.splitlines()) > 9
    (span,) = choose_passages(query("valve pressure engine"), [PassageRequest(wrapped, [(0, len(wrapped))])],
                              bag_of_words, lexical=False)
    assert " ".join(wrapped[span[0] : span[1]].split()).startswith(ANSWER)


@pytest.mark.parametrize("seed", range(4))
def test_window_bm25_from_piece_counts_is_bm25_over_the_windows_texts(seed: int) -> None:
    """The windows' BM25 from their pieces' term counts against the reference: BM25Model (bm25s) indexing the
    windows' texts (stopwords, stems, repeated query terms, windows with no query term, a stopword-only piece)."""
    rng = np.random.default_rng(seed)
    words_ = ["valves", "valve", "the", "and", "pressure", "pressures", "engine", "is", "boat", "of", "Running",
              "runs", "a", "x"]
    text = " ".join(" ".join(rng.choice(words_, size=int(rng.integers(1, 12)))) + "." for _ in range(30))
    pieces = document_pieces(text)
    spans = [w for w in windows(text, [(0, len(text))], max_sentences=3, max_words=20)]
    pairs = [(next(i for i, p in enumerate(pieces) if p[0] == s), next(i for i, p in enumerate(pieces) if p[1] == e))
             for s, e in spans]
    q = "the valve pressure valves running of boat"
    reference = BM25Model().score([q], [text[s:e] for s, e in spans])[0]
    np.testing.assert_allclose(window_bm25(q, text, pieces, pairs), reference, rtol=1e-5, atol=1e-6)
    assert not np.allclose(reference, reference[0])  # the windows differ


def distinct_embedder(vectors: dict[str, np.ndarray]):
    """A fake embedder: the given vector for a text, else a direction of its own (orthogonal to the others
    and to the first three axes), the same for the same text."""
    dimensions = 64
    own: dict[str, int] = {}

    def embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), dimensions))
        for i, text in enumerate(texts):
            out[i] = vectors[text] if text in vectors else np.eye(dimensions)[3 + own.setdefault(text, len(own))]
        return out

    return embed


def test_the_windows_bm25_picks_the_answer_where_cosine_alone_prefers_a_neighbour() -> None:
    """A dense-only strategy mixes in its windows' BM25 (PASSAGE_RULE.lexical_weight): the query's words are in
    the answer's sentence, and the model puts another sentence (as long, in the same surroundings) a little
    closer to the query; cosine alone shows that one."""
    near = "A different engine story entirely, told here now."
    assert len(near.split()) == len(ANSWER.split())
    parts = [f"{FILLER[:-1]} number {i}." for i in range(6)]
    text = " ".join([*parts[:2], near, FILLER, *parts[2:5], ANSWER, FILLER, parts[5]])
    axes = np.eye(64)
    embed = distinct_embedder({near: 0.82 * axes[0] + np.sqrt(1 - 0.82**2) * axes[1],
                               ANSWER: 0.80 * axes[0] + 0.60 * axes[2]})
    request = PassageRequest(text, [(0, len(text))])
    q = PassageQuery("when does the valve release pressure", axes[0])
    assert PASSAGE_RULE.lexical_weight > 0
    (span,) = choose_passages(q, [request], embed, lexical=False, rule=replace(PASSAGE_RULE, chunks=0))
    assert ANSWER in text[span[0] : span[1]] and near not in text[span[0] : span[1]]
    (cosine_only,) = choose_passages(q, [request], embed, lexical=False, rule=PassageRule(lexical_weight=0.0))
    assert near in text[cosine_only[0] : cosine_only[1]] and ANSWER not in text[cosine_only[0] : cosine_only[1]]


def test_the_answer_in_a_lower_chunk_among_those_the_rule_searches_is_shown() -> None:
    """Eval and search ask for a document's PASSAGE_RULE.chunks best chunks (best_chunk_rows): the answer in the
    last of them is shown, not when fewer are searched."""
    n = PASSAGE_RULE.chunks
    assert n >= 3
    parts = [f"{FILLER[:-1]} number {i}." for i in range(2 * n)]
    parts[2 * n - 1] = ANSWER
    text = " ".join(parts)
    starts = [text.index(p) for p in parts]
    chunks = [(starts[2 * i], starts[2 * i + 1] + len(parts[2 * i + 1])) for i in range(n)]  # 2 sentences each
    q = query("valve pressure engine")
    (span,) = choose_passages(q, [PassageRequest(text, chunks)], bag_of_words, lexical=False)
    assert ANSWER in text[span[0] : span[1]]
    (fewer,) = choose_passages(q, [PassageRequest(text, chunks[: n - 1])], bag_of_words, lexical=False)
    assert ANSWER not in text[fewer[0] : fewer[1]]
    assert best_chunk_rows(np.arange(10.0), 0) == list(range(9, 9 - n, -1))  # eval and search ask for as many
