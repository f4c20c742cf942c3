"""Token embeddings, chunk boundaries, late and naive chunking, and long late chunking.

References: the Hugging Face model run directly on the same ids (token states), sentence-transformers'
mean pooling (a single chunk over the whole text is the document embedding), a naive per-token
choice of window (long late chunking), and the tokenizer's own offsets (spans).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import LO, words
from transformers import AutoModel, AutoTokenizer

from longembed import load_encoder
from longembed.chunking import (
    SentenceChunking,
    TokenChunking,
    check_spans,
    parse_chunking,
    plan_windows,
    sentence_chunk_spans,
    sentence_spans,
    token_chunk_spans,
)
from longembed.chunking.spans import chunk_overlap, overlapping
from longembed.errors import UserError
from longembed.extension.pcw import split_into_windows


# ----------------------------------------------------------------------------- boundaries
def test_parse_chunking_accepts_the_documented_forms_and_names_the_bad_ones() -> None:
    assert parse_chunking("tokens:256") == TokenChunking(256, 0)
    assert parse_chunking("tokens:256:32") == TokenChunking(256, 32)
    assert parse_chunking("sentences:4") == SentenceChunking(4)
    assert str(parse_chunking("tokens:256:32")) == "tokens:256:32"
    for bad in ("tokens", "tokens:0", "tokens:8:8", "tokens:8:-1", "sentences:0", "words:5", "tokens:a", ""):
        with pytest.raises(ValueError, match="chunking"):
            parse_chunking(bad)


def test_token_chunk_spans_match_a_naive_enumeration() -> None:
    offsets = [(3 * i, 3 * i + 2) for i in range(23)]  # 23 two-character tokens
    for size, overlap in [(5, 0), (5, 2), (23, 0), (30, 4), (1, 0)]:
        expected, start = [], 0
        while True:
            stop = min(start + size, 23)
            expected.append((offsets[start][0], offsets[stop - 1][1]))
            if stop == 23:
                break
            start += size - overlap
        assert token_chunk_spans(offsets, size, overlap) == expected


@pytest.mark.parametrize(("size", "overlap"), [(8, 1), (8, 3), (256, 32), (5, 4)])
def test_overlapping_chunks_share_exactly_the_overlap_cover_the_text_and_end_on_new_tokens(size, overlap) -> None:
    for n in range(1, 3 * size + 2):
        offsets = [(3 * i, 3 * i + 2) for i in range(n)]
        spans = token_chunk_spans(offsets, size, overlap)
        token_ranges = [(a // 3, (b + 1) // 3) for a, b in spans]  # back to token indices [start, stop)
        assert token_ranges[0][0] == 0 and token_ranges[-1][1] == n  # covers the text
        assert all(stop - start <= size for start, stop in token_ranges)
        for (_, stop), (start, next_stop) in zip(token_ranges, token_ranges[1:], strict=False):
            assert stop - start == overlap  # neighbours share exactly the overlap
            assert next_stop > stop  # no chunk is a remainder already inside the previous one
        assert all(stop - start == size for start, stop in token_ranges[:-1])  # only the last may be short


def test_an_overlapping_chunking_has_one_spelling_and_a_default_overlap() -> None:
    assert str(parse_chunking(" tokens:256:0 ")) == "tokens:256"
    assert chunk_overlap("tokens:256:32") == 32 and chunk_overlap("tokens:256") == chunk_overlap("sentences:3") == 0
    assert overlapping("tokens:256") == "tokens:256:32" and overlapping("tokens:256:10") == "tokens:256:10"
    for spec in ("sentences:4", "tokens:7"):
        with pytest.raises(UserError, match="cannot overlap"):
            overlapping(spec)


def test_sentence_spans_split_at_end_punctuation_and_line_breaks() -> None:
    text = '  First one. "Second!" Third?\nA: no period here\n\nLast one...  '
    got = [text[a:b] for a, b in sentence_spans(text)]
    assert got == ["First one.", '"Second!"', "Third?", "A: no period here", "Last one..."]
    assert [text[a:b] for a, b in sentence_chunk_spans(text, 2)] == [
        'First one. "Second!"',
        "Third?\nA: no period here",
        "Last one...",
    ]


def test_user_spans_are_checked_with_errors_that_name_the_span() -> None:
    text = "hello world"
    assert check_spans(text, [(0, 5), [6, 11]], "t") == [(0, 5), (6, 11)]
    with pytest.raises(ValueError, match=r"t, span 1 .* <= 11"):
        check_spans(text, [(0, 5), (6, 12)], "t")
    with pytest.raises(ValueError, match="only whitespace"):
        check_spans(text, [(5, 6)], "t")
    with pytest.raises(TypeError, match="pair of ints"):
        check_spans(text, [(0.0, 5)], "t")
    with pytest.raises(ValueError, match="no spans"):
        check_spans(text, [], "t")


@pytest.mark.parametrize(("n", "room", "overlap"), [(10, 4, 0), (10, 4, 1), (37, 8, 3), (8, 8, 2), (9, 8, 7), (5, 8, 0)])
def test_windows_own_every_token_once_and_as_far_from_an_edge_as_a_naive_choice(n: int, room: int, overlap: int) -> None:
    windows = plan_windows(n, room, overlap)
    owner = {}
    for k, w in enumerate(windows):
        assert 0 <= w.start <= w.own_start <= w.own_stop <= w.stop <= n and w.stop - w.start <= room
        for j in range(w.own_start, w.own_stop):
            assert j not in owner
            owner[j] = k
    assert sorted(owner) == list(range(n))
    for j, k in owner.items():  # naive: the best distance to an inner edge any window offers
        def margin(w, j=j):
            left = j - w.start if w.start > 0 else n
            right = w.stop - 1 - j if w.stop < n else n
            return min(left, right)

        best = max(margin(w) for w in windows if w.start <= j < w.stop)
        assert margin(windows[k]) >= best - 1  # the middle split is within one token of the best


def test_windows_without_overlap_are_pcws_windows() -> None:
    head, prompt, tail, content = [101], [7, 8], [102], list(range(200, 261))
    pcw = split_into_windows(head, prompt, content, tail, 16)
    ours = [head + prompt + content[w.start : w.stop] + tail for w in plan_windows(len(content), 12, 0)]
    assert ours == pcw


# ----------------------------------------------------------------------------- token embeddings
@pytest.fixture(scope="module")
def bert(tiny_models):
    return tiny_models["bert"]


def test_token_embeddings_are_the_models_last_hidden_state(bert) -> None:
    enc = load_encoder(bert, method="truncate")
    texts = [words(12, seed=1), words(20, seed=2)]
    got = enc.encode(texts, output_value="token_embeddings")
    tokenizer = AutoTokenizer.from_pretrained(bert)
    model = AutoModel.from_pretrained(bert).eval()
    for text, states in zip(texts, got, strict=True):
        ids = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            reference = model(**ids).last_hidden_state[0].numpy()
        assert states.dtype == np.float32 and states.shape == reference.shape
        np.testing.assert_allclose(states, reference, atol=1e-5)


def test_token_offsets_point_at_the_text_with_and_without_a_prompt(bert) -> None:
    enc = load_encoder(bert, method="truncate")
    text = "the cat, is on the mat."
    plain = enc.encode_tokens([text])[0]
    prompted = enc.encode_tokens([text], prompt="query: is it ")[0]
    tokenizer = AutoTokenizer.from_pretrained(bert)
    own = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    for tokens in (plain, prompted):
        assert [tuple(o) for o in tokens.offsets[tokens.text_tokens].tolist()] == own
        assert (tokens.offsets[~tokens.text_tokens] == -1).all()
    assert prompted.text_tokens.sum() == plain.text_tokens.sum()
    assert len(prompted.offsets) > len(plain.offsets)  # the prompt's tokens are there, marked (-1, -1)


# ----------------------------------------------------------------------------- late chunking
@pytest.mark.parametrize("prompt", [None, "query: is it "])
def test_one_chunk_over_the_whole_text_is_the_mean_pooled_document_embedding(bert, prompt) -> None:
    enc = load_encoder(bert, method="pi", max_length=4 * LO)
    text = words(90, seed=3)
    ((vectors, spans),) = enc.encode_chunks([text], [[(0, len(text))]], prompt=prompt)
    assert spans == [(0, len(text))]
    np.testing.assert_allclose(vectors[0], enc.encode([text], prompt=prompt)[0], atol=1e-6)


def test_chunk_spans_map_back_to_the_right_characters(bert) -> None:
    enc = load_encoder(bert, method="truncate")
    text = "the cat is on the mat. it was for his one, and the dog is at the door."
    tokenizer = AutoTokenizer.from_pretrained(bert)
    pieces = [p.removeprefix("##") for p in tokenizer.tokenize(text)]
    for prompt in (None, "query: "):
        ((_, spans),) = enc.encode_chunks([text], "tokens:5", prompt=prompt)
        # chunk k holds word pieces 5k..5k+4: its characters, spaces aside, are exactly theirs
        assert [text[a:b].replace(" ", "") for a, b in spans] == [
            "".join(pieces[i : i + 5]) for i in range(0, len(pieces), 5)
        ]
        ((_, with_overlap),) = enc.encode_chunks([text], "tokens:5:2", prompt=prompt)
        a, b = with_overlap[1]
        assert text[a:b].replace(" ", "") == "".join(pieces[3:8])


def test_late_chunks_pool_exactly_their_tokens(bert) -> None:
    enc = load_encoder(bert, method="pi", max_length=4 * LO)
    text = words(40, seed=4)
    tokens = enc.encode_tokens([text])[0]
    ((vectors, spans),) = enc.encode_chunks([text], "tokens:7", normalize_embeddings=False)
    inside = tokens.text_tokens
    n = int(inside.sum())
    for k, (vector, _) in enumerate(zip(vectors, spans, strict=True)):
        chosen = np.zeros(len(inside), dtype=bool)
        chosen[1 + 7 * k : 1 + min(7 * (k + 1), n)] = True  # after [CLS]
        if k == 0:
            chosen[0] = True  # [CLS] goes with the first chunk
        if k == len(spans) - 1:
            chosen[-1] = True  # [SEP] with the last
        np.testing.assert_allclose(vector, tokens.embeddings[chosen].mean(0), atol=1e-6)


def test_late_chunks_over_overlapping_spans_pool_each_span_whole(bert) -> None:
    """Overlapping spans are pooled each over all of its tokens: a token in the overlap counts in both."""
    enc = load_encoder(bert, method="pi", max_length=4 * LO)
    text = words(40, seed=4)
    tokens = enc.encode_tokens([text])[0]
    ((vectors, spans),) = enc.encode_chunks([text], "tokens:8:3", normalize_embeddings=False)
    n = int(tokens.text_tokens.sum())
    starts = list(range(0, n, 5))
    starts = starts[: next(i for i, s in enumerate(starts) if s + 8 >= n) + 1]
    assert len(spans) == len(starts) > 2
    for k, (vector, start) in enumerate(zip(vectors, starts, strict=True)):
        chosen = np.zeros(len(tokens.offsets), dtype=bool)
        chosen[1 + start : 1 + min(start + 8, n)] = True  # after [CLS]
        chosen[0] = k == 0
        chosen[-1] = k == len(spans) - 1
        np.testing.assert_allclose(vector, tokens.embeddings[chosen].mean(0), atol=1e-6)


def test_naive_chunks_are_each_chunk_embedded_alone_and_differ_from_late(bert) -> None:
    enc = load_encoder(bert, method="pi", max_length=4 * LO)
    text = words(60, seed=5)
    ((naive, spans),) = enc.encode_chunks([text], "tokens:10", late=False, prompt="query: ")
    alone = enc.encode([text[a:b] for a, b in spans], prompt="query: ")
    np.testing.assert_allclose(naive, alone, atol=1e-6)
    ((late, late_spans),) = enc.encode_chunks([text], "tokens:10", prompt="query: ")
    assert late_spans == spans
    assert np.abs(late - naive).max() > 1e-3


def test_long_late_chunking_with_one_window_is_plain_late_chunking(bert) -> None:
    enc = load_encoder(bert, method="pi", max_length=4 * LO)
    text = words(100, seed=6)  # fits in 4 Lo
    plain = enc.encode_tokens([text])[0]
    windowed = enc.encode_tokens([text], window_overlap=16)[0]
    np.testing.assert_array_equal(plain.embeddings, windowed.embeddings)
    a = enc.encode_chunks([text], "tokens:9", window_overlap=0)[0][0]
    b = enc.encode_chunks([text], "tokens:9", window_overlap=20)[0][0]
    np.testing.assert_array_equal(a, b)


def test_long_late_chunking_takes_each_token_from_its_best_window(bert) -> None:
    """Against a reference that runs the HF model on every window and picks, per token, the window
    where it is farthest from an inner edge."""
    enc = load_encoder(bert, method="truncate")  # max_length = Lo = 32: a 100-word text needs windows
    text = words(100, seed=7)
    overlap = 10
    tokens = enc.encode_tokens([text], window_overlap=overlap)[0]
    tokenizer = AutoTokenizer.from_pretrained(bert)
    model = AutoModel.from_pretrained(bert).eval()
    ids = tokenizer(text)["input_ids"]
    body, room = ids[1:-1], LO - 2
    starts = list(range(0, len(body) - room, room - overlap)) + [len(body) - room]
    states = []
    for a in starts:
        window = torch.tensor([[ids[0], *body[a : a + room], ids[-1]]])
        with torch.no_grad():
            states.append(model(input_ids=window).last_hidden_state[0].numpy())
    assert tokens.embeddings.shape[0] == len(ids)
    np.testing.assert_allclose(tokens.embeddings[0], states[0][0], atol=1e-5)
    np.testing.assert_allclose(tokens.embeddings[-1], states[-1][-1], atol=1e-5)
    for j in range(len(body)):
        def margin(k, j=j):
            a = starts[k]
            left = j - a if k > 0 else len(body)
            right = a + room - 1 - j if k < len(starts) - 1 else len(body)
            return min(left, right)

        candidates = [k for k, a in enumerate(starts) if a <= j < a + room]
        best = max(margin(k) for k in candidates)
        matches = [k for k in candidates if np.allclose(tokens.embeddings[1 + j], states[k][1 + j - starts[k]], atol=1e-5)]
        assert matches, f"token {j} matches no window"
        assert max(margin(k) for k in matches) >= best - 1
    with pytest.warns(UserWarning, match="truncated"):
        cut = enc.encode_tokens([text])[0]  # without window_overlap: cut at max_length, as encode() does
    assert cut.embeddings.shape[0] == LO


def test_pcw_token_states_come_from_their_windows(bert) -> None:
    enc = load_encoder(bert, method="pcw", max_length=4 * LO)
    text = words(70, seed=8)
    tokens = enc.encode_tokens([text])[0]
    reference = load_encoder(bert, method="truncate")
    tokenizer = AutoTokenizer.from_pretrained(bert)
    ids = tokenizer(text)["input_ids"]
    first_window = tokenizer.decode(ids[1 : LO - 1])
    first = reference.encode_tokens([first_window])[0]
    np.testing.assert_allclose(tokens.embeddings[: LO - 1], first.embeddings[: LO - 1], atol=1e-5)
    assert tokens.embeddings.shape[0] == len(ids)


def test_late_chunking_refuses_cls_pooling_and_naive_chunking_works(bert) -> None:
    enc = load_encoder(bert, method="truncate", pooling="cls")
    with pytest.raises(ValueError, match="late chunking mean-pools .* 'cls'"):
        enc.encode_chunks([words(10)], "tokens:4")
    ((vectors, spans),) = enc.encode_chunks([words(10)], "tokens:4", late=False)
    assert vectors.shape == (len(spans), enc.embedding_dim)


def test_chunk_arguments_are_checked(bert) -> None:
    enc = load_encoder(bert, method="truncate")
    with pytest.raises(ValueError, match="unknown chunking"):
        enc.encode_chunks(["the cat"], "paragraphs:2")
    with pytest.raises(ValueError, match="spans for 1 texts, but there are 2"):
        enc.encode_chunks(["the cat", "the dog"], [[(0, 3)]])
    with pytest.raises(ValueError, match=r"chunking\[0\], span 0"):
        enc.encode_chunks(["the cat"], [[(0, 30)]])
    with pytest.raises(ValueError, match="output_value"):
        enc.encode(["the cat"], output_value="cls_token")
    # a single text with its own spans
    vectors, spans = enc.encode_chunks("the cat is on the mat", [(0, 7), (8, 21)])[0]
    assert spans == [(0, 7), (8, 21)] and vectors.shape[0] == 2
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6) if enc.normalize else None
