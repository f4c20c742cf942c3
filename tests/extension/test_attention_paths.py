"""The fused attention paths (SelfExtend, ALiBi, local windows) against naive explicit softmax.

Each reference here builds the full n x n score matrix from the formulas, with no code from
longembed's attention: score_ij = <R(rel_ij) q_i, k_j> * scaling (RoPE rotating q by the relative
position, SelfExtend's rel from the paper's rule), minus m_h |i - j| for ALiBi, -inf for padding,
causality and keys outside a local window; softmax; 0 for a row with no allowed key.  Inputs are
random, in batches of two documents of different lengths (the second padded), and every row is
compared, padding rows included.  The fused tests fail if the explicit fallback is taken.
"""

from __future__ import annotations

import types

import pytest
import torch

from longembed.extension import attention, fused
from longembed.extension.alibi import alibi_slopes
from longembed.extension.attention import AttentionPlan, longembed_attention
from longembed.extension.fused import LseMerge, _Band, attend
from longembed.extension.rope import RotarySpec, rotary_tables, selfextend_relative_positions

HEAD_DIM, BASE, SCALING = 8, 500.0, 0.4


def _spec() -> RotarySpec:
    config = types.SimpleNamespace(
        rope_parameters={"rope_theta": BASE, "rope_type": "default"},
        hidden_size=2 * HEAD_DIM,
        num_attention_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=64,
    )
    return RotarySpec.from_config(config)


def _module(causal: bool = False, slopes: torch.Tensor | None = None, local: int | None = None):
    """An attention module as transformers passes it: is_causal, ALiBi slopes, sliding window."""
    module = torch.nn.Module()
    module.is_causal = causal
    if slopes is not None:
        module.register_buffer("alibi_slopes", slopes)
    if local is not None:  # transformers' convention: config half-window, causal layers' own size
        module.sliding_window = local
        module.config = types.SimpleNamespace(sliding_window=local)
    return module


def _inputs(seed: int, batch: int, heads: int, n: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, heads, n, HEAD_DIM, generator=g) * 1.5).to(dtype) for _ in range(3)]


def _padding(lengths: list[int], n: int) -> torch.Tensor:
    return torch.arange(n).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


def _rotate_by(x: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
    """R(rel_ij) x_i for every (i, j): (B, H, n, n, d), rotate-half layout, inv_freq of BASE."""
    inv_freq = 1.0 / BASE ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM)
    angles = rel.float().unsqueeze(-1) * inv_freq
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    x = x.unsqueeze(-2)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), -1) * sin


def naive(q, k, v, mask, *, rel=None, causal=False, slopes=None, local=None, multiplier=None):
    """softmax_j(score_ij) v_j from the full score matrix; rel (B, n, n) relative rotations or None."""
    q, k, v = q.double(), k.double(), v.double()
    n = q.shape[2]
    if multiplier is not None:
        q = q * multiplier.double().view(-1, 1, 1, 1)
    if rel is None:
        scores = q @ k.transpose(-1, -2) * SCALING
    else:
        scores = (_rotate_by(q, rel[:, None]) * k.unsqueeze(2)).sum(-1) * SCALING
    distance = torch.arange(n).view(-1, 1) - torch.arange(n).view(1, -1)  # i - j
    if slopes is not None:
        scores = scores - slopes.double().view(1, -1, 1, 1) * distance.abs()
    allowed = mask[:, None, None, :].expand(scores.shape).clone()
    if causal:
        allowed &= distance >= 0
    if local is not None:
        allowed &= ((distance >= 0) & (distance < local)) if causal else distance.abs() <= local
    probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)
    return probs @ v


def _selfextend_rel(n: int, scales: list[int], g: int, w: int) -> torch.Tensor:
    """Per document: the paper's SelfExtend relative positions, or plain i - j where it is off (s = 1)."""
    plain = torch.arange(n).view(-1, 1) - torch.arange(n).view(1, -1)
    return torch.stack([selfextend_relative_positions(n, g, w) if s > 1 else plain for s in scales])


@pytest.fixture
def fused_only(monkeypatch):
    """Fail the test if attention falls back to explicit scores."""

    def refuse(self, max_score_elements):
        raise AssertionError("the explicit fallback was used")

    monkeypatch.setattr(attention._ExplicitAttention, "attend", refuse)


@pytest.fixture(params=["default blocks", "3-row blocks"])
def small_blocks(request, monkeypatch):
    """Bands in their default row blocks, and in 3-row blocks (many blocks, a partial last one)."""
    if request.param == "3-row blocks":
        monkeypatch.setattr(fused, "band_rows", lambda w: 3)


def _run(module, q, k, v, mask, **plan):
    out, _ = longembed_attention(
        module, q, k, v, None, scaling=SCALING, longembed_plan=AttentionPlan(key_mask=mask, **plan)
    )
    return out.transpose(1, 2)


# ----------------------------------------------------------------------------- the pieces
@pytest.mark.parametrize("kind", ["lower", "upper"])
@pytest.mark.parametrize(("rows", "keys"), [(7, 7), (9, 4), (4, 9), (1, 5)])
def test_triangles_equal_masked_softmax(kind, rows, keys):
    """attend() with "j <= i - o" / "j >= i + o" equals a masked softmax, for every offset o."""
    if attention._FLASH_CPU is None:
        pytest.skip("no log-sum-exp kernel in this torch build")
    kernel = attention._lse_kernel(torch.device("cpu"))
    q, k, v = (torch.randn(2, 3, m, HEAD_DIM) for m in (rows, keys, keys))
    i, j = torch.arange(rows).view(-1, 1), torch.arange(keys).view(1, -1)
    for offset in range(-keys - 1, rows + 2):
        allowed = (j <= i - offset) if kind == "lower" else (j >= i + offset)
        scores = (q @ k.transpose(-1, -2) * SCALING).masked_fill(~allowed, float("-inf"))
        expected = torch.softmax(scores, -1).nan_to_num(0.0) @ v
        merged = LseMerge(q)
        merged.add_pieces(attend(q, k, v, (kind, offset), SCALING, kernel))
        torch.testing.assert_close(merged.result(), expected, atol=1e-6, rtol=1e-5, msg=f"offset {offset}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("n", "length", "w"), [(20, 20, 4), (23, 17, 5), (70, 70, 33), (16, 9, 7), (12, 12, 1), (10, 6, 30)]
)
def test_band_blocks_hold_exactly_the_band(causal, n, length, w):
    """Every row of the band sees exactly the keys |i - j| < w (causal: 0 <= i - j < w) below L.

    With q = 0 attention is uniform over the allowed keys, and v_j = one-hot(j) shows which they are.
    """
    q = torch.zeros(2, 1, n, 4)
    v = torch.eye(length).expand(2, 1, length, length)
    band = _Band(q, torch.randn(2, 1, length, 4), v, length, w, causal)
    seen = (
        band.unblock(
            torch.nn.functional.scaled_dot_product_attention(
                band.query, band.key, band.value, attn_mask=band.allowed
            )
        )
        > 0
    )
    rel = torch.arange(n).view(-1, 1) - torch.arange(length).view(1, -1)
    expected = (rel < w) & (rel >= 0 if causal else rel > -w)
    assert band.rows == int(expected.any(-1).sum())  # the rows with at least one key, all first
    assert torch.equal(seen, expected[: band.rows].expand_as(seen))


# ----------------------------------------------------------------------------- SelfExtend
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("n", "g", "w", "lengths"), [(40, 3, 8, [40, 29]), (37, 2, 5, [21, 37]), (64, 5, 16, [64, 50])]
)
def test_selfextend_fused_equals_naive(causal, n, g, w, lengths, fused_only, small_blocks):
    if attention._FLASH_CPU is None:
        pytest.skip("no log-sum-exp kernel in this torch build")
    q, k, v = _inputs(n + g, 2, 3, n)
    mask = _padding(lengths, n)
    tables = rotary_tables("selfextend", _spec(), n, torch.tensor([4, 4]), 8, group_size=g, window=w)
    multiplier = torch.tensor([1.3, 0.8])
    got = _run(_module(causal), q, k, v, mask, rotary=tables, logit_scale=multiplier)
    expected = naive(
        q, k, v, mask, rel=_selfextend_rel(n, [4, 4], g, w), causal=causal, multiplier=multiplier
    )
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_selfextend_per_document_window_and_off(fused_only):
    """One document with SelfExtend (s = 4), its neighbour without (s = 1: w = 0, plain RoPE)."""
    if attention._FLASH_CPU is None:
        pytest.skip("no log-sum-exp kernel in this torch build")
    n, lengths = 45, [45, 30]
    q, k, v = _inputs(7, 2, 2, n)
    mask = _padding(lengths, n)
    tables = rotary_tables("selfextend", _spec(), n, torch.tensor([4, 1]), 8, group_size=3, window=6)
    assert tables.window.tolist() == [6, 0]
    got = _run(_module(), q, k, v, mask, rotary=tables)
    expected = naive(q, k, v, mask, rel=_selfextend_rel(n, [4, 1], 3, 6))
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_selfextend_explicit_fallback_equals_naive(causal, monkeypatch):
    """Where no kernel returns the log-sum-exp (other devices), explicit scores give the same."""
    monkeypatch.setattr(attention, "_FLASH_CPU", None)
    n, lengths = 33, [33, 20]
    q, k, v = _inputs(3, 2, 2, n)
    mask = _padding(lengths, n)
    tables = rotary_tables("selfextend", _spec(), n, torch.tensor([4, 4]), 8, group_size=4, window=6)
    for block in (1 << 30, 100):
        got = _run(_module(causal), q, k, v, mask, rotary=tables, max_score_elements=block)
        expected = naive(q, k, v, mask, rel=_selfextend_rel(n, [4, 4], 4, 6), causal=causal)
        torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- ALiBi
@pytest.mark.parametrize(("heads", "n", "lengths"), [(4, 30, [30, 18]), (6, 41, [12, 41]), (3, 20, [20, 20])])
def test_alibi_fused_equals_naive(heads, n, lengths, fused_only):
    q, k, v = _inputs(heads, 2, heads, n)
    mask = _padding(lengths, n)
    slopes = alibi_slopes(heads)
    multiplier = torch.tensor([0.7, 1.2])
    got = _run(_module(slopes=slopes), q, k, v, mask, logit_scale=multiplier)
    expected = naive(q, k, v, mask, slopes=slopes, multiplier=multiplier)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_alibi_in_row_blocks_equals_one_block(monkeypatch, fused_only):
    """Bias views of several row blocks (offset into the same vector) give the same result."""
    heads, n, lengths = 4, 50, [50, 33]
    q, k, v = _inputs(11, 2, heads, n)
    mask = _padding(lengths, n)
    slopes = alibi_slopes(heads)
    monkeypatch.setattr(fused, "MIN_BIAS_ROWS", 7)
    got = _run(_module(slopes=slopes), q, k, v, mask, max_score_elements=1)
    torch.testing.assert_close(got.double(), naive(q, k, v, mask, slopes=slopes), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- local windows
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("window", "n", "lengths"), [(4, 40, [40, 23]), (9, 33, [15, 33]), (50, 30, [30, 12])]
)
def test_local_window_equals_naive(causal, window, n, lengths, fused_only, small_blocks):
    q, k, v = _inputs(window, 2, 2, n)
    mask = _padding(lengths, n)
    got = _run(_module(causal, local=window), q, k, v, mask)
    expected = naive(q, k, v, mask, causal=causal, local=window)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("local", "path"), [(3, "fused"), (12, "explicit")])
def test_local_window_with_selfextend(local, path, monkeypatch):
    """SelfExtend on a local layer: inside w the local path (exact positions), wider: explicit."""
    n, lengths = 40, [40, 26]
    q, k, v = _inputs(local, 2, 2, n)
    mask = _padding(lengths, n)
    tables = rotary_tables("selfextend", _spec(), n, torch.tensor([4, 4]), 8, group_size=3, window=6)
    if path == "fused":

        def refuse(self, max_score_elements):
            raise AssertionError("the explicit fallback was used")

        monkeypatch.setattr(attention._ExplicitAttention, "attend", refuse)
    got = _run(_module(local=local), q, k, v, mask, rotary=tables)
    expected = naive(q, k, v, mask, rel=_selfextend_rel(n, [4, 4], 3, 6), local=local)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- fallbacks, observers
def test_left_padding_goes_to_explicit_scores_and_stays_exact():
    n = 30
    q, k, v = _inputs(5, 2, 3, n)
    mask = _padding([30, 21], n).flip(-1)  # the second document padded at the start
    slopes = alibi_slopes(3)
    got = _run(_module(slopes=slopes), q, k, v, mask)
    torch.testing.assert_close(got.double(), naive(q, k, v, mask, slopes=slopes), atol=1e-5, rtol=1e-5)


def test_observer_sees_the_naive_probabilities():
    n, lengths = 36, [36, 22]
    q, k, v = _inputs(9, 2, 2, n)
    mask = _padding(lengths, n)
    tables = rotary_tables("selfextend", _spec(), n, torch.tensor([4, 4]), 8, group_size=3, window=5)
    seen = {}
    _run(
        _module(),
        q,
        k,
        v,
        mask,
        rotary=tables,
        observer=lambda layer, rows: seen.update(p=rows(4, 20)),
        observe_layer=0,
    )
    rel = _selfextend_rel(n, [4, 4], 3, 5)
    scores = (_rotate_by(q.double(), rel[:, None]) * k.double().unsqueeze(2)).sum(-1) * SCALING
    expected = torch.softmax(scores.masked_fill(~mask[:, None, None, :], float("-inf")), -1)[:, :, 4:20]
    torch.testing.assert_close(seen["p"].double(), expected, atol=1e-6, rtol=1e-5)


# ----------------------------------------------------------------------------- reduced precision
@pytest.mark.parametrize("path", ["selfextend", "alibi", "local"])
def test_paths_run_in_bfloat16(path, fused_only):
    """Every fused path takes bfloat16 inputs and stays within bfloat16 rounding of the reference."""
    if path == "selfextend" and attention._FLASH_CPU is None:
        pytest.skip("no log-sum-exp kernel in this torch build")
    n, lengths, heads = 40, [40, 27], 4
    q, k, v = _inputs(2, 2, heads, n, dtype=torch.bfloat16)
    mask = _padding(lengths, n)
    module, plan, reference = _module(), {}, {}
    if path == "selfextend":
        plan["rotary"] = rotary_tables(
            "selfextend", _spec(), n, torch.tensor([4, 4]), 8, group_size=3, window=6
        )
        reference["rel"] = _selfextend_rel(n, [4, 4], 3, 6)
    elif path == "alibi":
        module = _module(slopes=alibi_slopes(heads).to(torch.bfloat16))
        reference["slopes"] = alibi_slopes(heads)
    else:
        module = _module(local=5)
        reference["local"] = 5
    got = _run(module, q, k, v, mask, **plan)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), naive(q, k, v, mask, **reference), atol=5e-2, rtol=5e-2)
