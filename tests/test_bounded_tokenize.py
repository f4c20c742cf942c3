"""A truncating encode tokenizes a long text only as far as it runs it (issue 51): same ids, bounded work.

The reference is the tokenizer run over the whole text, then cut (what encode did before); the bounded
scan must give the same first tokens for every family's tokenizer, and never hand the whole text to it.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LO, words

from longembed import load_encoder
from longembed.inputs import CHARS_PER_TOKEN, cut, tokenize, tokenize_bounded
from longembed.model_runner import RunOptions

LT = 4 * LO


class Recording:
    """A tokenizer that records the length of every text it is given."""

    def __init__(self, real, lengths: list[int]):
        self.real, self.lengths = real, lengths

    def __call__(self, texts, *args, **kwargs):
        self.lengths.extend([len(texts)] if isinstance(texts, str) else [len(t) for t in texts])
        return self.real(texts, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("family", ["bert", "xlmr", "llama"])
def test_the_first_tokens_are_those_of_the_whole_text(tiny_models, family: str) -> None:
    encoder = load_encoder(tiny_models[family], method="pi", max_length=LT)
    layout = encoder.runner.special_tokens
    for seed in range(4):
        text = words(3000 + 97 * seed, seed=seed)  # far longer than the first scan
        for prompt in ("", "query: "):
            (whole,) = tokenize([text], encoder.tokenizer, prompt, layout)
            (bounded,) = tokenize_bounded([text], encoder.tokenizer, prompt, layout, LT)
            assert not bounded.complete and bounded.n_tokens < whole.n_tokens
            assert cut(bounded, LT).ids == cut(whole, LT).ids
            assert cut(bounded, LT).offsets == cut(whole, LT).offsets


def test_short_texts_are_tokenized_whole_and_once(tiny_models) -> None:
    encoder = load_encoder(tiny_models["bert"], method="pi", max_length=LT)
    texts = [words(20, seed=1), words(60, seed=2)]
    assert tokenize_bounded(texts, encoder.tokenizer, "", encoder.runner.special_tokens, LT) == \
        tokenize(texts, encoder.tokenizer, "", encoder.runner.special_tokens)


def test_encode_never_tokenizes_a_long_text_whole_and_gives_the_same_vector(tiny_models) -> None:
    encoder = load_encoder(tiny_models["bert"], method="pi", max_length=LT)
    text = words(20_000, seed=5)
    reference = encoder.runner.tokenize([text, "short words"])  # the whole text, as encode did before
    expected, _ = encoder.runner.encode_tokenized(reference, RunOptions())
    lengths: list[int] = []
    encoder.runner.tokenizer = Recording(encoder.runner.tokenizer, lengths)
    with pytest.warns(UserWarning, match="at least"):
        vectors, stats = encoder.encode([text, "short words"], return_stats=True)
    assert max(lengths) <= 4 * CHARS_PER_TOKEN * (LT + 16) < len(text) / 10
    assert stats.n_truncated == 1 and stats.longest_input_at_least
    np.testing.assert_array_equal(vectors, expected)
