"""Passage pieces are embedded in forwards filled to a token budget (issue 53, item 5: the build's speed), each
piece's vector the one it gets alone, in the pieces' order."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import build_tiny, words

from longembed import load_encoder
from longembed.encoder import LongContextEncoder
from longembed.search.piece_vectors import PIECE_BATCH_TOKENS, encode_pieces


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> LongContextEncoder:
    return load_encoder(str(build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")), method="pi",
                        max_length=128, device="cpu")


def pieces(count: int) -> list[str]:
    """Pieces of lengths 1..9 words, mixed so that sorting by length reorders them."""
    return [words(1 + (7 * i) % 9, i) for i in range(count)]


def forwards(encoder: LongContextEncoder, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of sequences of every forward the encoder runs from now on."""
    seen: list[int] = []
    real = encoder.runner._hidden

    def hidden(sequences, *args, **kwargs):
        seen.append(len(sequences))
        return real(sequences, *args, **kwargs)

    monkeypatch.setattr(encoder.runner, "_hidden", hidden)
    return seen


def test_pieces_batched_by_tokens_get_their_own_vectors_in_their_order(encoder, monkeypatch) -> None:
    texts = pieces(60)
    alone = np.concatenate([encoder.encode([t], normalize_embeddings=True) for t in texts])
    sizes = forwards(encoder, monkeypatch)
    budgeted = encode_pieces(encoder, texts, "", max_tokens=48)  # a tight budget: many batches of mixed lengths
    assert len(sizes) > 5 and sum(sizes) == len(texts)
    np.testing.assert_allclose(budgeted, alone, atol=1e-5)  # row i is piece i's vector (a shuffle fails here)
    assert not np.allclose(budgeted, alone[::-1], atol=1e-3)


def test_short_pieces_fill_one_forward_up_to_the_budget(encoder, monkeypatch) -> None:
    """200 pieces of 5 to 8 words are about 2,000 tokens: one forward (the old rule, 8 x the build's batch
    of 16 pieces per forward, ran two)."""
    texts = [words(5 + i % 4, i) for i in range(200)]  # lengths within 2x: one batch by the padding rule
    sizes = forwards(encoder, monkeypatch)
    vectors = encode_pieces(encoder, texts, "")
    assert sizes == [200] and vectors.shape == (200, encoder.embedding_dim) and PIECE_BATCH_TOKENS >= 200 * 12
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_budget_caps_the_padded_tokens_of_every_forward(encoder, monkeypatch) -> None:
    texts = pieces(120)
    lengths: list[int] = []
    real = encoder.runner._hidden

    def hidden(sequences, *args, **kwargs):
        lengths.append(len(sequences) * max(len(s) for s in sequences))
        return real(sequences, *args, **kwargs)

    monkeypatch.setattr(encoder.runner, "_hidden", hidden)
    encode_pieces(encoder, texts, "", max_tokens=256)
    assert len(lengths) > 1 and max(lengths) <= 256
