"""The thread rule of a forward (longembed.threads): small inputs on one thread, larger ones on torch's
setting, the setting restored after, and the same vectors either way."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from conftest import LO, words

from longembed import load_encoder
from longembed.errors import UserError
from longembed.threads import SMALL_INPUT_TOKENS, forced_threads, threads_for


@pytest.fixture
def two_threads():
    """torch on two threads for the test (the rule has nothing to change on one), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def encoder(tiny_models):
    return load_encoder(tiny_models["bert"], method="pi", max_length=4 * LO)


def threads_seen(encoder) -> tuple[list[int], object]:
    """A hook recording torch's thread count inside every forward of the encoder's model."""
    seen: list[int] = []
    handle = encoder.model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    return seen, handle


def long_batch() -> list[str]:
    """Texts whose padded batch is larger than the one-thread threshold."""
    texts = [words(4 * LO - 10, seed=s) for s in range(4)]
    assert 4 * LO > SMALL_INPUT_TOKENS // 4
    return texts


def test_rule_picks_one_thread_up_to_the_threshold_and_the_default_above():
    assert threads_for(8, 2) == 1
    assert threads_for(SMALL_INPUT_TOKENS, 4) == 1
    assert threads_for(SMALL_INPUT_TOKENS + 1, 4) == 4


def test_a_short_query_runs_on_one_thread_and_a_large_batch_on_the_default(encoder, two_threads):
    seen, handle = threads_seen(encoder)
    try:
        encoder.encode(["a short query"], batch_size=1)
        assert seen == [1]
        assert torch.get_num_threads() == 2  # restored after
        seen.clear()
        encoder.encode(long_batch(), batch_size=4)
        assert seen == [2]
        assert torch.get_num_threads() == 2
    finally:
        handle.remove()


def test_token_states_follow_the_rule_too(encoder, two_threads):
    """The chunk and token routes (late chunking, the server's windows) run through the same forward."""
    seen, handle = threads_seen(encoder)
    try:
        encoder.encode_tokens(["a short text"], batch_size=1)
        assert seen == [1]
    finally:
        handle.remove()
    assert torch.get_num_threads() == 2


def test_the_setting_is_restored_when_the_forward_fails(encoder, two_threads):
    def fail(module, args):
        raise RuntimeError("boom")

    handle = encoder.model.register_forward_pre_hook(fail)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            encoder.encode(["a short query"], batch_size=1)
    finally:
        handle.remove()
    assert torch.get_num_threads() == 2


def test_vectors_are_the_same_on_one_thread_and_on_the_default(encoder, two_threads):
    texts = ["a short query", *long_batch()]
    with forced_threads(None):
        default = encoder.encode(texts, batch_size=8)
    with forced_threads(1):
        one = encoder.encode(texts, batch_size=8)
    ruled = np.concatenate([encoder.encode(texts[:1], batch_size=1), encoder.encode(texts[1:], batch_size=8)])
    np.testing.assert_array_equal(one, default)
    np.testing.assert_array_equal(ruled, default)


def test_forced_threads_overrides_the_rule_and_is_undone(encoder, two_threads):
    seen, handle = threads_seen(encoder)
    try:
        with forced_threads(None):
            encoder.encode(["a short query"], batch_size=1)
        encoder.encode(["a short query"], batch_size=1)
    finally:
        handle.remove()
    assert seen == [2, 1]
    with pytest.raises(UserError, match="at least 1"), forced_threads(0):
        pass


def test_a_small_forward_in_one_thread_never_shrinks_a_large_one_in_another(encoder, two_threads):
    """torch's thread count is process-wide: a server's batcher and a search share it, so the switch
    happens under the forward lock and a large forward always sees the default."""
    seen, handle = threads_seen(encoder)
    large = long_batch()
    errors: list[BaseException] = []

    def small_queries():
        try:
            for _ in range(20):
                encoder.encode(["a short query"], batch_size=1)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=small_queries)
    try:
        worker.start()
        for _ in range(10):
            encoder.encode(large, batch_size=4)
        worker.join()
    finally:
        handle.remove()
    assert not errors
    assert sorted(set(seen)) == [1, 2] and seen.count(2) == 10
    assert torch.get_num_threads() == 2
