"""Each extension method against its formula or a naive reference written here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import LO, build_tiny, words

from longembed import load_encoder
from longembed.batching import length_batches
from longembed.extension.alibi import alibi_slopes
from longembed.extension.ape import (
    InterpolatedPositionEmbedding,
    ape_position_ids,
    interpolated_position_matrix,
)
from longembed.extension.attention import AttentionPlan, longembed_attention
from longembed.extension.methods.ntk import dynamic_ntk_multiplier, ntk_lambda
from longembed.extension.methods.selfextend import selfextend_defaults
from longembed.extension.pcw import window_spans
from longembed.extension.rope import RotarySpec, apply_rotary, rotary_tables, selfextend_relative_positions
from longembed.extension.scaling import document_scales, logn_factor


# ----------------------------------------------------------------------------- APE position maps
def test_ape_position_maps_follow_the_formulas():
    lengths = torch.tensor([10, 4])
    s = torch.tensor([3, 1])
    gp = ape_position_ids("gp", lengths, 10, s, original_length=4)
    assert gp[0].tolist() == [p // 3 for p in range(10)]
    assert gp[1].tolist() == [0, 1, 2, 3, 0, 0, 0, 0, 0, 0]  # s = 1: original; padding -> 0
    rp = ape_position_ids("rp", lengths, 10, torch.tensor([3, 3]), original_length=4)
    assert rp[0].tolist() == [p % 4 for p in range(10)]
    pi = ape_position_ids("pi", lengths, 10, s, original_length=4, offset=2)
    assert pi.dtype == torch.float32
    np.testing.assert_allclose(pi[0].numpy(), [2 + p / 3 for p in range(10)], rtol=1e-6)
    assert pi[1, :4].tolist() == [2, 3, 4, 5]


def test_pi_matrix_keeps_original_rows_at_multiples_of_s():
    torch.manual_seed(0)
    e_o = torch.randn(8, 5)
    for s in (2, 3, 4):
        e_t = interpolated_position_matrix(e_o, s)
        assert e_t.shape == (8 * s, 5)
        torch.testing.assert_close(e_t[::s], e_o, rtol=0, atol=0)
        i, k = 2, 1  # row i*s + k lies k/s of the way from E_o[i] to E_o[i+1]
        torch.testing.assert_close(e_t[i * s + k], e_o[i] + (e_o[i + 1] - e_o[i]) * k / s)


def test_interpolated_embedding_is_exact_on_integer_ids():
    table = torch.nn.Embedding(10, 4)
    wrapped = InterpolatedPositionEmbedding(table)
    ids = torch.tensor([[0, 3, 9]])
    assert torch.equal(wrapped(ids), table(ids))
    half = wrapped(torch.tensor([[2.5]]))[0, 0]
    torch.testing.assert_close(half, (table.weight[2] + table.weight[3]) / 2)


# ----------------------------------------------------------------------------- scale factor, Table 6
def test_table6_defaults():
    assert [ntk_lambda(s) for s in (1, 2, 4, 8)] == [1.0, 3.0, 5.0, 10.0]
    assert 3.0 < ntk_lambda(3) < 5.0 and ntk_lambda(16) == 20.0
    assert selfextend_defaults(2, 512) == (3, 256)
    assert selfextend_defaults(4, 512) == (5, 128)
    assert selfextend_defaults(8, 512) == (9, 64)
    assert selfextend_defaults(8, 4096) == (9, 512)


def test_document_scales_fixed_and_per_document():
    lengths = torch.tensor([100, 512, 513, 1500, 4096])
    fixed = document_scales(lengths, 512, 4096, "fixed", "long")
    assert fixed.tolist() == [1, 1, 8, 8, 8]
    assert document_scales(lengths, 512, 4096, "fixed", "all").tolist() == [8] * 5
    assert document_scales(lengths, 512, 4096, "per_document", "long").tolist() == [1, 1, 2, 3, 8]


def test_logn_factor():
    f = logn_factor(torch.tensor([10, 512, 4096]), 512)
    np.testing.assert_allclose(f.numpy(), [1.0, 1.0, math.log(4096) / math.log(512)], rtol=1e-6)


def test_pcw_windows_end_aligned():
    assert window_spans(10, 4) == [(0, 4), (4, 8), (6, 10)]
    assert window_spans(8, 4) == [(0, 4), (4, 8)]
    assert window_spans(3, 4) == [(0, 3)]


def test_length_batches_respect_budget_and_cover_everything():
    lengths = [5, 100, 7, 60, 100, 3, 40]
    batches = length_batches(lengths, batch_size=3, max_tokens=200)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 3
        longest = max(lengths[i] for i in batch)
        assert longest * len(batch) <= 200 or len(batch) == 1
    assert batches[0] == [1, 4]  # longest first, budget 200 stops a third 100-token item
    for batch in batches:  # nothing padded to more than twice its length
        assert max(lengths[i] for i in batch) <= 2 * min(lengths[i] for i in batch)


def test_length_batches_do_not_pad_short_inputs_to_a_long_batch():
    """A 4k-token batch with room left must not take 50-token inputs (each would cost a 4k row)."""
    batches = length_batches([4096, 50, 60, 4000, 55], batch_size=8, max_tokens=16384)
    assert batches == [[0, 3], [2, 4, 1]]


# ----------------------------------------------------------------------------- SelfExtend
def test_selfextend_relative_positions_match_the_paper_example():
    rel = selfextend_relative_positions(10, group_size=2, window=4)
    assert (-rel[0]).tolist() == [0, 1, 2, 3, 4, 4, 5, 5, 6, 6]  # distances from x0
    assert (-rel[4]).tolist() == [-4, -3, -2, -1, 0, 1, 2, 3, 4, 4]


def _naive_selfextend(q, k, v, inv_freq, g, w, scaling):
    """Explicit n x n SelfExtend: score_ij = <R(rel_ij) q_i, k_j>, rel from the paper's rule."""
    n = q.shape[2]
    rel = selfextend_relative_positions(n, g, w).float()  # (n, n)
    angles = rel.unsqueeze(-1) * inv_freq  # (n, n, d/2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    x1, x2 = q.unsqueeze(3).chunk(2, dim=-1)  # q_i broadcast over j: (B, H, n, 1, d/2)
    rotated = q.unsqueeze(3) * cos + torch.cat((-x2, x1), -1) * sin  # (B, H, n, n, d)
    scores = (rotated * k.unsqueeze(2)).sum(-1) * scaling
    return torch.softmax(scores, -1) @ v


def _spec(head_dim=8, base=1000.0):
    config = type("C", (), {})()
    config.rope_parameters = {"rope_theta": base, "rope_type": "default"}
    config.hidden_size, config.num_attention_heads, config.head_dim = head_dim * 2, 2, head_dim
    config.max_position_embeddings = 64
    return RotarySpec.from_config(config)


@pytest.fixture(params=["fused", "explicit"])
def kernel(request, monkeypatch):
    """Run a test through the fused CPU kernel and through the explicit-scores fallback."""
    from longembed.extension import attention

    if request.param == "explicit":
        monkeypatch.setattr(attention, "_FLASH_CPU", None)
    elif attention._FLASH_CPU is None:
        pytest.skip("this torch build has no fused CPU attention kernel")
    return request.param


@pytest.mark.parametrize(("n", "g", "w"), [(40, 3, 8), (33, 2, 5), (64, 5, 16)])
def test_selfextend_matches_naive_reference(n, g, w, kernel):
    torch.manual_seed(n)
    spec = _spec()
    q, k, v = (torch.randn(1, 2, n, 8) * 2 for _ in range(3))
    tables = rotary_tables("selfextend", spec, n, torch.tensor([4]), 8, group_size=g, window=w)
    module = torch.nn.Module()
    for block in (1 << 30, 100):  # whole matrix, and blocks of a few rows
        plan = AttentionPlan(rotary=tables, max_score_elements=block)
        got, _ = longembed_attention(module, q, k, v, None, scaling=0.3, longembed_plan=plan)
        expected = _naive_selfextend(q, k, v, spec.inv_freq()[0], g, w, 0.3)
        torch.testing.assert_close(got.transpose(1, 2), expected, atol=1e-5, rtol=1e-5)


def test_selfextend_equals_plain_attention_when_window_covers_the_input(tiny_models):
    text = [words(100, seed=1)]
    n = len(load_encoder(tiny_models["nomic"]).tokenizer(text[0])["input_ids"])
    plain = load_encoder(tiny_models["nomic"], max_length=4 * LO, original_length=4 * LO).encode(text)
    se = load_encoder(tiny_models["nomic"], method="selfextend", max_length=4 * LO, window=n, group_size=3)
    np.testing.assert_allclose(se.encode(text), plain, atol=1e-5)


# ----------------------------------------------------------------------------- NTK, PI on RoPE
def test_ntk_equals_the_model_rebuilt_with_a_larger_base(tiny_models, tmp_path):
    folder = tiny_models["nomic"]
    config = json.loads((folder / "config.json").read_text())
    base = config["rope_parameters"]["rope_theta"]
    rebuilt = build_tiny(
        "nomic", tmp_path / "rebuilt", rope_parameters={"rope_theta": base * 5.0, "rope_type": "default"}
    )
    texts = [words(100, seed=2), words(10, seed=3)]
    # s = ceil(128 / 32) = 4 -> lambda = 5 (Table 6), applied to every input
    ntk = load_encoder(folder, method="ntk", max_length=4 * LO, apply_to="all").encode(texts)
    reference = load_encoder(rebuilt, max_length=4 * LO, original_length=4 * LO).encode(texts)
    np.testing.assert_allclose(ntk, reference, atol=1e-5)
    explicit = load_encoder(folder, method="ntk", max_length=4 * LO, apply_to="all", ntk_factor=5.0).encode(
        texts
    )
    np.testing.assert_allclose(explicit, ntk, atol=1e-6)


def test_rope_pi_is_positions_over_s():
    spec = _spec()
    tables = rotary_tables("pi", spec, 12, torch.tensor([4]), 3)
    expected = rotary_tables("none", spec, 12, torch.tensor([1]), 3)
    inv = spec.inv_freq()[0]
    angles = (torch.arange(12).float() / 4).unsqueeze(-1) * inv
    torch.testing.assert_close(tables.cos[0], torch.cat([angles.cos()] * 2, -1))
    assert not torch.allclose(tables.cos, expected.cos)
    gp = rotary_tables("gp", spec, 12, torch.tensor([4]), 3)
    angles = torch.div(torch.arange(12), 4, rounding_mode="floor").float().unsqueeze(-1) * inv
    torch.testing.assert_close(gp.sin[0], torch.cat([angles.sin()] * 2, -1))


def test_rotation_at_position_zero_is_identity():
    spec = _spec()
    x = torch.randn(1, 2, 5, 8)
    zero = rotary_tables("none", spec, 1, torch.tensor([1]), 3)
    torch.testing.assert_close(
        apply_rotary(x, zero.cos[:, :1].expand(1, 5, 8), zero.sin[:, :1].expand(1, 5, 8)), x
    )


# ----------------------------------------------------------------------------- ALiBi
def test_alibi_attention_matches_naive_reference(kernel):
    torch.manual_seed(0)
    heads, n = 6, 20
    q, k, v = (torch.randn(2, heads, n, 4) for _ in range(3))
    mask = torch.ones(2, n, dtype=torch.bool)
    mask[1, 13:] = False
    module = torch.nn.Module()
    module.register_buffer("alibi_slopes", alibi_slopes(heads))
    for block in (1 << 30, 50):
        plan = AttentionPlan(key_mask=mask, max_score_elements=block)
        got, _ = longembed_attention(module, q, k, v, None, scaling=0.5, longembed_plan=plan)
        i = torch.arange(n)
        bias = -alibi_slopes(heads).view(1, heads, 1, 1) * (i.view(-1, 1) - i.view(1, -1)).abs()
        scores = q @ k.transpose(-1, -2) * 0.5 + bias
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        expected = torch.softmax(scores, -1) @ v
        torch.testing.assert_close(got.transpose(1, 2), expected, atol=1e-5, rtol=1e-5)


def test_alibi_model_through_longembed_equals_its_own_attention(tiny_models):
    from transformers import AutoTokenizer

    from longembed.loading import load_transformer
    from longembed.pooling import pool

    folder = tiny_models["jina"]
    text = words(150, seed=5)  # far beyond any training length: ALiBi extrapolates
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = load_transformer(folder).eval()  # the model's own (eager/sdpa) ALiBi attention
    batch = tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        expected = pool(model(**batch).last_hidden_state, batch["attention_mask"].bool(), "mean").numpy()
    got = load_encoder(folder, method="native", max_length=1024).encode([text])
    np.testing.assert_allclose(got, expected, atol=1e-5)


# ----------------------------------------------------------------------------- causal decoders
def test_decoder_attention_stays_causal(tiny_models):
    """Changing the last word of a decoder input must not change the earlier tokens' states, and must
    change its own: through the model with a SelfExtend plan, and through the encoder's own path."""
    encoder = load_encoder(tiny_models["llama"], method="selfextend", max_length=4 * LO)
    text = words(80, seed=6)
    ids = encoder.tokenizer(text)["input_ids"]  # [CLS] ... last word [SEP]
    other = ids[:-2] + [ids[-2] % 50 + 5] + ids[-1:]
    n, changed = len(ids), len(ids) - 2
    assert n > LO and other != ids and other[:changed] == ids[:changed]  # long: SelfExtend groups
    with torch.no_grad():
        hidden = {}
        for name, seq in (("a", ids), ("b", other)):
            plan_inputs = torch.tensor([seq])
            hidden[name] = encoder.model(
                input_ids=plan_inputs,
                attention_mask=torch.ones_like(plan_inputs),
                position_ids=torch.zeros_like(plan_inputs),
                longembed_plan=AttentionPlan(
                    rotary=rotary_tables("selfextend", encoder.runner.positions.rotary, n, torch.tensor([4]), LO)
                ),
            ).last_hidden_state[0]
    torch.testing.assert_close(hidden["a"][:changed], hidden["b"][:changed])
    assert not torch.allclose(hidden["a"][changed:], hidden["b"][changed:], atol=1e-3)  # the change got in

    head, last = text.rsplit(" ", 1)
    edited = head + " " + next(w for w in ("the", "of") if w != last)  # one token each
    a, b = encoder.encode([text, edited], output_value="token_embeddings")
    cut = len(encoder.tokenizer(head)["input_ids"]) - 1  # [CLS] and the shared words
    assert len(a) == len(b) == n and cut == changed
    np.testing.assert_allclose(a[:cut], b[:cut], atol=1e-5)
    assert not np.allclose(a[cut:], b[cut:], atol=1e-3)


def test_selfextend_on_a_tiny_rope_model_matches_naive_attention(tiny_models):
    """Whole model: longembed's SelfExtend vs a naive n x n SelfExtend attention plugged in here."""
    from transformers import AttentionInterface

    from longembed.loading import load_transformer
    from longembed.pooling import pool

    folder = tiny_models["nomic"]
    g, w = 3, 8
    encoder = load_encoder(folder, method="selfextend", max_length=4 * LO, group_size=g, window=w)
    spec = encoder.runner.positions.rotary

    def naive(module, q, k, v, attention_mask, scaling=None, **kwargs):
        out = _naive_selfextend(q, k, v, spec.inv_freq()[0], g, w, scaling)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register("naive-selfextend-test", naive)
    model = load_transformer(folder).eval()
    model.set_attn_implementation("naive-selfextend-test")
    text = words(90, seed=7)
    ids = torch.tensor([encoder.tokenizer(text)["input_ids"]])
    assert ids.shape[1] > w and ids.shape[1] > LO
    with torch.no_grad():  # position 0: q and k reach the attention function unrotated
        hidden = model(input_ids=ids, position_ids=torch.zeros_like(ids)).last_hidden_state
    expected = torch.nn.functional.normalize(pool(hidden, torch.ones_like(ids).bool(), "mean"), dim=-1)
    got = encoder.encode([text], normalize_embeddings=True)
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-5)


# ----------------------------------------------------------------------------- dynamic NTK, presets
def test_dynamic_ntk_equals_huggingface_dynamic_rope(tmp_path):
    """ntk_variant="dynamic" equals transformers' own `dynamic` rope type (nomic's rotary_scaling_factor),
    run on one document at a time; inputs up to Lo are untouched; in a batch, each document gets its own base."""
    base, factor = 20.0, 8.0  # a small base: positions matter, so the dynamic base visibly changes vectors
    folder = build_tiny("nomic", tmp_path / "plain", rope_parameters={"rope_theta": base, "rope_type": "default"})
    hf_dynamic = build_tiny(
        "nomic", tmp_path / "dynamic", rope_parameters={"rope_theta": base, "rope_type": "dynamic", "factor": factor}
    )
    from longembed.loading import load_transformer
    from longembed.pooling import pool

    encoder = load_encoder(folder, method="ntk", ntk_variant="dynamic", ntk_factor=factor, max_length=4 * LO)
    plain = load_encoder(folder, max_length=4 * LO, original_length=4 * LO)
    texts = [words(120, seed=21), words(70, seed=22), words(20, seed=23)]
    expected = []
    for text in texts:
        # HF's dynamic base follows the longest input the model has seen so far (it only grows, and resets
        # below Lo), so its vectors depend on the calls before: a fresh model per text is the reference
        reference_model = load_transformer(hf_dynamic).eval()
        batch = encoder.tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            hidden = reference_model(**batch).last_hidden_state
        expected.append(pool(hidden, batch["attention_mask"].bool(), "mean")[0].numpy())
    got = encoder.encode(texts, batch_size=3, normalize_embeddings=False)
    np.testing.assert_allclose(got, np.stack(expected), atol=2e-6)  # float32 rounding of the base: ~2e-7
    untouched = plain.encode(texts, normalize_embeddings=False)
    np.testing.assert_array_equal(got[2], untouched[2])  # 22 tokens <= Lo: the original model exactly
    assert np.abs(got[0] - untouched[0]).max() > 1e-5  # the long input really changed (5x the tolerance)


def test_dynamic_ntk_base_formula():
    """The dynamic base multiplier: 1 up to Lo, then ((F n / Lo) - (F - 1)) ** (d / (d - 2))."""
    assert dynamic_ntk_multiplier(512, 512, 2.0, 64) == 1.0
    assert dynamic_ntk_multiplier(1024, 512, 2.0, 64) == pytest.approx(3.0 ** (64 / 62))
    assert dynamic_ntk_multiplier(2048, 512, 16.0, 64) == pytest.approx((16 * 4 - 15) ** (64 / 62))


def test_longembed_paper_preset_sets_the_papers_options_and_explicit_options_win(tiny_models):
    """preset="longembed-paper": log-n everywhere, per-document s for GP, NTK on every input; options given
    explicitly override it; the vectors equal the same options spelled out."""
    from longembed import EncoderConfig

    gp = EncoderConfig.from_options("m", "gp", 128, preset="longembed-paper")
    assert (gp.attention_scale, gp.scale, gp.apply_to) == ("logn", "per_document", "long")
    ntk = EncoderConfig.from_options("m", "ntk", 128, preset="longembed-paper")
    assert (ntk.attention_scale, ntk.scale, ntk.apply_to) == ("logn", "fixed", "all")
    pi = EncoderConfig.from_options("m", "pi", 128, preset="longembed-paper", attention_scale=None)
    assert (pi.attention_scale, pi.scale, pi.apply_to, pi.preset) == (None, "fixed", "long", "longembed-paper")
    with pytest.raises(ValueError, match="unknown preset 'nope'; presets: longembed-paper"):
        EncoderConfig.from_options("m", "pi", 128, preset="nope")
    text = [words(100, seed=24), words(10, seed=25)]
    preset = load_encoder(tiny_models["nomic"], method="ntk", max_length=4 * LO, preset="longembed-paper")
    spelled = load_encoder(tiny_models["nomic"], method="ntk", max_length=4 * LO, attention_scale="logn",
                           apply_to="all")
    np.testing.assert_array_equal(preset.encode(text), spelled.encode(text))
    default = load_encoder(tiny_models["nomic"], method="ntk", max_length=4 * LO)
    assert np.abs(default.encode(text) - preset.encode(text)).max() > 1e-4
