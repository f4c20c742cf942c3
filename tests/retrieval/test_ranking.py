"""The one ranking rule of eval and search (longembed.retrieval): ties, the fused tie-break, run-file scores."""

from __future__ import annotations

import numpy as np
import pytest

from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import fuse_with_tie_break, tie_break_scores
from longembed.retrieval.ranking import RUN_SCORE_STEP, rank, rank_order, strictly_decreasing


def test_ties_go_to_the_tie_break_key_then_to_the_id() -> None:
    scores = np.array([[1.0, 2.0, 1.0, 1.0]])
    tie_break = np.array([[0.1, 0.0, 0.5, 0.1]])
    assert rank(scores, ["q"], ["c", "z", "a", "b"], tie_break=tie_break) == {"q": ["z", "a", "b", "c"]}
    assert rank(scores, ["q"], ["c", "z", "a", "b"]) == {"q": ["z", "a", "b", "c"]}  # id order alone
    assert rank(scores, ["q"], ["c", "z", "a", "b"], top_k=2, tie_break=tie_break) == {"q": ["z", "a"]}


def test_ranking_equals_a_sort_written_out_on_random_ties() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, size=(6, 40)).astype(float)
    tie_break = rng.integers(0, 3, size=(6, 40)).astype(float)
    ids = [f"d{rng.integers(1000):03d}-{i}" for i in range(40)]
    got = rank(scores, [f"q{i}" for i in range(6)], ids, top_k=None, tie_break=tie_break)
    for q in range(6):
        expected = sorted(range(40), key=lambda j: (-scores[q, j], -tie_break[q, j], ids[j]))
        assert got[f"q{q}"] == [ids[j] for j in expected]


def test_rrf_ties_are_broken_by_the_normalised_score_sum_not_the_name() -> None:
    """d0 is dense's 1st and BM25's 3rd, d1 the other way round: the same RRF score.  d1 leads BM25 by
    far and trails dense by little, so its normalised sum is higher: it ranks first whatever it is called."""
    dense = np.array([[0.90, 0.80, 0.85, 0.0]])
    lexical = np.array([[1.0, 9.0, 5.0, 0.5]])
    fused, key = fuse_with_tie_break(Fusion(), dense, lexical)
    assert fused[0, 0] == fused[0, 1] > fused[0, 2]
    for names in (["a", "b", "c", "d"], ["b", "a", "c", "d"]):
        assert rank(fused, ["q"], names, tie_break=key)["q"][0] == names[1]
    np.testing.assert_allclose(key, [[1.0 + 0.5 / 8.5, 0.8 / 0.9 + 1.0, 0.85 / 0.9 + 4.5 / 8.5, 0.0]])


def test_the_tie_break_key_keeps_documents_outside_the_candidates_out() -> None:
    key = tie_break_scores(np.array([[0.5, -np.inf]]), np.array([[1.0, -np.inf]]))
    assert np.isneginf(key[0, 1]) and np.isfinite(key[0, 0])


def test_run_scores_strictly_decrease_by_a_step_float32_readers_see() -> None:
    shown = strictly_decreasing([2.5, 2.5, 2.5, 1.0, 1.0 - 1e-12, 0.0, 0.0])
    assert all(a > b for a, b in zip(shown, shown[1:], strict=False))
    as_float32 = np.asarray(shown, dtype=np.float32)
    assert all(a > b for a, b in zip(as_float32, as_float32[1:], strict=False))
    assert shown[0] == 2.5 and shown[3] == 1.0  # a score already below its predecessor is kept
    assert shown[1] == pytest.approx(2.5 * (1 - RUN_SCORE_STEP))
    with pytest.raises(ValueError, match="finite"):
        strictly_decreasing([1.0, -np.inf])



@pytest.mark.parametrize("with_tie_break", [False, True])
def test_the_first_k_equal_a_sort_written_out_for_every_k_with_ties_at_the_kth_nan_and_inf(with_tie_break: bool) -> None:
    # rank_order sorts only the documents that can be in the first k; ties at the k-th score, NaN and
    # -inf (not a candidate) must come out as a sort of them all would put them
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 3, size=(8, 30)).astype(float)
    scores[rng.random(scores.shape) < 0.1] = np.nan
    scores[rng.random(scores.shape) < 0.1] = -np.inf
    tie_break = rng.integers(0, 2, size=scores.shape).astype(float) if with_tie_break else None
    ids = [f"d{j:02d}" for j in rng.permutation(30)]

    def key(value: float) -> float:
        return np.inf if np.isnan(value) or value == -np.inf else -value

    for k in range(1, 31):
        got = rank_order(scores, [f"q{i}" for i in range(8)], ids, top_k=k, tie_break=tie_break)
        for q in range(8):
            expected = sorted(range(30), key=lambda j, q=q: (key(scores[q, j]),
                                                           0.0 if tie_break is None else key(tie_break[q, j]), ids[j]))
            assert got[q].tolist() == expected[:k], (k, q)
