"""The passage a result shows: sentence windows around the best chunks, scored for the query."""

from __future__ import annotations

import re

import numpy as np
import pytest

from longembed.errors import UserError
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.passages import (
    PassageQuery,
    PassageRequest,
    best_chunk_rows,
    choose_passages,
    overlaps,
    sentence_pieces,
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


def test_every_window_of_a_search_is_embedded_in_one_batch() -> None:
    calls: list[int] = []

    def counted(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return bag_of_words(texts)

    docs = [PassageRequest(document(i), [(0, 80)]) for i in range(4)]
    choose_passages(query("valve"), docs, counted, lexical=False)
    assert len(calls) == 1 and calls[0] > 4


def test_a_document_without_words_in_its_chunks_keeps_its_chunk() -> None:
    assert choose_passages(query("valve"), [PassageRequest("   \n  ", [(0, 6)])], bag_of_words, lexical=False) == [(0, 6)]


def test_nothing_to_score_with_is_an_error() -> None:
    with pytest.raises(UserError, match="needs a query vector"):
        choose_passages(PassageQuery("valve"), [PassageRequest("a.", [(0, 2)])], bag_of_words, lexical=False)


def test_best_chunk_rows_and_overlap() -> None:
    assert best_chunk_rows(np.array([0.1, 0.9, 0.5, 0.9]), 10, n=3) == [11, 13, 12]
    assert overlaps((5, 10), [(9, 12)]) and not overlaps((5, 10), [(10, 12), (0, 5)])
