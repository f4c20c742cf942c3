"""Tests of the ALiBi slopes/bias and the JinaBERT model, with tiny models built here.

The references in this file are written independently of the code under test: the slope rule
as in Press et al.'s ``get_slopes``, and a naive JinaBERT forward pass that reads the weights by
their checkpoint names and loops over heads with an explicit softmax.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import save_file
from transformers import AutoModel
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from longembed.extension.alibi import alibi_bias, alibi_slopes
from longembed.models.jina_bert import JinaBertConfig, JinaBertModel

VOCAB = 50


# ---------------------------------------------------------------- references


def press_slopes(n: int) -> list[float]:
    """Press et al.'s get_slopes (ofirpress/attention_with_linear_biases), restated."""

    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + press_slopes(2 * closest)[0::2][: n - closest]


def eq1_literal(n: int, heads: range) -> list[float]:
    """Jina eq. (1) exactly as printed, for the given head indices."""
    a = 2 ** math.floor(math.log2(n))
    b = 2 ** (-8 / 2 ** math.ceil(math.log2(n)))
    return [b ** (2 * i) if i < a else b ** (1 + 2 * (i - a)) for i in heads]


def eq1_consistent(n: int) -> list[float]:
    """Eq. (1) read so that it matches the released code: b = 2^(-4/a), i = 1..n,
    b^(2i) for i <= a and b^(2(i - a) - 1) for i > a."""
    a = 2 ** math.floor(math.log2(n))
    b = 2 ** (-4 / a)
    return [b ** (2 * i) if i <= a else b ** (2 * (i - a) - 1) for i in range(1, n + 1)]


def naive_attention(q, k, v, slopes, key_mask, scale):
    """softmax(Q K^T * scale - m_h |i - j| + mask) V, one head at a time. q, k, v: (B, H, n, d)."""
    batch, heads, n, _ = q.shape
    out = torch.zeros_like(q)
    pos = torch.arange(n, dtype=torch.float64)
    distance = (pos[:, None] - pos[None, :]).abs()
    for b in range(batch):
        pad = torch.zeros(n, dtype=torch.float64)
        if key_mask is not None:
            pad[key_mask[b] == 0] = float("-inf")
        for h in range(heads):
            logits = q[b, h] @ k[b, h].T * scale - float(slopes[h]) * distance + pad[None, :]
            out[b, h] = torch.softmax(logits, dim=-1) @ v[b, h]
    return out


def naive_jina_forward(state: dict, config: JinaBertConfig, input_ids, attention_mask=None):
    """A JinaBERT forward pass from a state dict with the checkpoint's parameter names."""
    sd = {k: t.double() for k, t in state.items()}
    hidden, heads, eps = config.hidden_size, config.num_attention_heads, config.layer_norm_eps
    d = hidden // heads
    slopes = press_slopes(heads)

    def linear(x, name, bias=True):
        y = x @ sd[name + ".weight"].T
        return y + sd[name + ".bias"] if bias else y

    def layer_norm(x, name):
        return torch.nn.functional.layer_norm(x, (hidden,), sd[name + ".weight"], sd[name + ".bias"], eps)

    x = sd["embeddings.word_embeddings.weight"][input_ids] + sd["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, "embeddings.LayerNorm")
    batch, n = input_ids.shape
    for i in range(config.num_hidden_layers):
        p = f"encoder.layer.{i}."

        def heads_of(t):
            return t.view(batch, n, heads, d).transpose(1, 2)

        q, k, v = (heads_of(linear(x, p + "attention.self." + w)) for w in ("query", "key", "value"))
        a = (
            naive_attention(q, k, v, slopes, attention_mask, d**-0.5)
            .transpose(1, 2)
            .reshape(batch, n, hidden)
        )
        x = layer_norm(linear(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        if config.feed_forward_type == "original":  # BERT's: dense -> GELU (erf) -> dense, post-LN
            h = torch.nn.functional.gelu(linear(x, p + "intermediate.dense"))
            x = layer_norm(linear(h, p + "output.dense") + x, p + "output.LayerNorm")
            continue
        h = linear(x, p + "mlp.gated_layers", bias=False)
        gate, up = h[..., : config.intermediate_size], h[..., config.intermediate_size :]
        h = torch.nn.functional.gelu(gate) * up  # GEGLU: the first half is activated
        x = layer_norm(linear(h, p + "mlp.wo") + x, p + "mlp.layernorm")
    return x


# ---------------------------------------------------------------- fixtures


def tiny_config(heads: int = 4, hidden: int = 32, **kwargs) -> JinaBertConfig:
    if hidden % heads:
        hidden = heads * 8
    return JinaBertConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        intermediate_size=40,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=64,
        **kwargs,
    )


def tiny_model(heads: int = 4, attn: str = "eager", seed: int = 0) -> JinaBertModel:
    torch.manual_seed(seed)
    model = JinaBertModel(tiny_config(heads, attn_implementation=attn)).eval()
    # Make the LayerNorm affine parameters and biases non-trivial, so that a test would notice
    # one applied in the wrong place.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "LayerNorm.weight" in name or "layernorm.weight" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    ids = torch.randint(1, VOCAB, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 3:] = 0
    ids[mask == 0] = 0
    return ids, mask


def jina_config_json(config: JinaBertConfig) -> dict:
    """A config.json as the released checkpoints ship it (remote-code format)."""
    return {
        "_name_or_path": "jinaai/jina-bert-implementation",
        "architectures": ["JinaBertForMaskedLM"],
        "attention_probs_dropout_prob": 0.0,
        "attn_implementation": "torch",
        "auto_map": {
            "AutoConfig": "jinaai/jina-bert-implementation--configuration_bert.JinaBertConfig",
            "AutoModel": "jinaai/jina-bert-implementation--modeling_bert.JinaBertModel",
        },
        "classifier_dropout": None,
        "emb_pooler": "mean",
        "feed_forward_type": "geglu",
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": config.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": config.intermediate_size,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 8192,
        "model_max_length": 8192,
        "model_type": "bert",
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_layers": config.num_hidden_layers,
        "pad_token_id": 0,
        "position_embedding_type": "alibi",
        "torch_dtype": "float32",
        "transformers_version": "4.26.0",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": config.vocab_size,
    }


def jina_state_dict(config: JinaBertConfig, seed: int = 3) -> dict[str, torch.Tensor]:
    """Random weights under the released checkpoints' names (jina-bert-implementation)."""
    g = torch.Generator().manual_seed(seed)
    h, inter = config.hidden_size, config.intermediate_size

    def r(*shape):
        return 0.1 * torch.randn(*shape, generator=g)

    sd = {
        "embeddings.word_embeddings.weight": r(config.vocab_size, h),
        "embeddings.token_type_embeddings.weight": r(config.type_vocab_size, h),
        "embeddings.LayerNorm.weight": 1 + r(h),
        "embeddings.LayerNorm.bias": r(h),
    }
    for i in range(config.num_hidden_layers):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            sd[p + f"attention.self.{name}.weight"] = r(h, h)
            sd[p + f"attention.self.{name}.bias"] = r(h)
        sd[p + "attention.output.dense.weight"] = r(h, h)
        sd[p + "attention.output.dense.bias"] = r(h)
        sd[p + "attention.output.LayerNorm.weight"] = 1 + r(h)
        sd[p + "attention.output.LayerNorm.bias"] = r(h)
        if config.feed_forward_type == "original":  # BERT's names, as Jina's remote code keeps them
            sd[p + "intermediate.dense.weight"] = r(inter, h)
            sd[p + "intermediate.dense.bias"] = r(inter)
            sd[p + "output.dense.weight"] = r(h, inter)
            sd[p + "output.dense.bias"] = r(h)
            sd[p + "output.LayerNorm.weight"] = 1 + r(h)
            sd[p + "output.LayerNorm.bias"] = r(h)
            continue
        sd[p + "mlp.gated_layers.weight"] = r(2 * inter, h)
        sd[p + "mlp.wo.weight"] = r(h, inter)
        sd[p + "mlp.wo.bias"] = r(h)
        sd[p + "mlp.layernorm.weight"] = 1 + r(h)
        sd[p + "mlp.layernorm.bias"] = r(h)
    return sd


# ---------------------------------------------------------------- slopes and bias


@pytest.mark.parametrize("n", range(1, 17))
def test_slopes_equal_reference_formula(n):
    got = alibi_slopes(n)
    assert got.dtype == torch.float32 and got.shape == (n,)
    torch.testing.assert_close(got, torch.tensor(press_slopes(n), dtype=torch.float32), rtol=1e-6, atol=0)


def test_slopes_hand_checked():
    assert alibi_slopes(8).tolist() == [1 / 2**i for i in range(1, 9)]
    assert alibi_slopes(1).tolist() == [2**-8]
    expected_12 = [2.0**-i for i in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected_12), rtol=1e-6, atol=0)
    expected_6 = [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]
    assert alibi_slopes(6).tolist() == expected_6


def test_paper_eq1_reading():
    """What the alibi_slopes docstring says about Jina's eq. (1)."""
    for n in range(1, 17):
        torch.testing.assert_close(alibi_slopes(n), torch.tensor(eq1_consistent(n)), rtol=1e-6, atol=0)
    # Literal, 1-indexed, 12 heads: 2^-1..2^-7 then 2^-0.5..2^-4.5 (loses 2^-8, adds 2^-4.5).
    literal = torch.tensor(eq1_literal(12, range(1, 13)), dtype=torch.float64)
    torch.testing.assert_close(
        -torch.log2(literal),
        torch.tensor([1, 2, 3, 4, 5, 6, 7, 0.5, 1.5, 2.5, 3.5, 4.5], dtype=torch.float64),
    )
    assert not torch.allclose(literal.float(), alibi_slopes(12))
    # Literal, 0-indexed: head 0 gets slope 1.
    assert eq1_literal(12, range(12))[0] == 1.0
    # Powers of two: eq. (1) gives the squares of the code's slopes.
    torch.testing.assert_close(torch.tensor(eq1_literal(8, range(1, 8))), alibi_slopes(8)[:7] ** 2)


def test_alibi_bias_values():
    slopes = torch.tensor([0.5, 0.25])
    pos = torch.arange(3)
    bias = alibi_bias(slopes, pos, pos)
    distance = torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]])
    torch.testing.assert_close(bias, torch.stack([-0.5 * distance, -0.25 * distance]))
    assert bias.dtype == torch.float32 and bias.shape == (2, 3, 3)
    # A block of a long matrix equals the same slice of the full bias (blockwise use).
    full = alibi_bias(slopes, torch.arange(10), torch.arange(10))
    block = alibi_bias(slopes, torch.arange(6, 9), torch.arange(2, 6))
    torch.testing.assert_close(block, full[:, 6:9, 2:6])
    assert block[0, 0, 0].item() == -0.5 * 4  # |6 - 2| = 4
    torch.testing.assert_close(full, full.transpose(1, 2))  # symmetric: bidirectional


def test_alibi_bias_rejects_non_vectors():
    with pytest.raises(ValueError):
        alibi_bias(torch.ones(2), torch.zeros(2, 2), torch.arange(2))


# ---------------------------------------------------------------- attention


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("heads", [4, 6])
def test_self_attention_matches_naive_reference(attn, heads):
    """One attention module, padded batch: output equals the explicit formula."""
    model = tiny_model(heads, attn)
    ids, mask = padded_batch()
    module = model.encoder.layer[0].attention.self
    x = model.embeddings(ids)
    with torch.no_grad():
        out, _ = module(x, model._padding_mask(mask, x))
        b, n, _ = x.shape
        d = module.attention_head_size

        def split(t):
            return t.view(b, n, heads, d).transpose(1, 2).double()

        q, k, v = split(module.query(x)), split(module.key(x)), split(module.value(x))
    expected = naive_attention(q, k, v, press_slopes(heads), mask, d**-0.5).transpose(1, 2).reshape(b, n, -1)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("feed_forward", ["geglu", "original"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_model_matches_naive_forward_from_jina_weights(attn, feed_forward):
    """The whole model (embeddings, ALiBi attention, GEGLU or BERT's feed-forward, post-LN) against a
    naive forward, with the weights under the checkpoints' names (strict load)."""
    config = tiny_config(6, attn_implementation=attn, feed_forward_type=feed_forward)
    state = jina_state_dict(config)
    model = JinaBertModel(config).eval()
    model.load_state_dict(state)  # strict: exactly Jina's parameter names
    ids, mask = padded_batch()
    with torch.no_grad():
        got = model(ids, attention_mask=mask).last_hidden_state
    expected = naive_jina_forward(state, config, ids, mask)
    real = mask.bool()
    torch.testing.assert_close(got[real].double(), expected[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("heads", [4, 6])
def test_eager_and_sdpa_agree(heads):
    ids, mask = padded_batch()
    eager, sdpa = tiny_model(heads, "eager"), tiny_model(heads, "sdpa")
    sdpa.load_state_dict(eager.state_dict())
    with torch.no_grad():
        a = eager(ids, attention_mask=mask).last_hidden_state
        b = sdpa(ids, attention_mask=mask).last_hidden_state
        c = eager(ids).last_hidden_state
        e = sdpa(ids).last_hidden_state
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_padding_does_not_change_a_sequence(attn):
    model = tiny_model(6, attn)
    ids, mask = padded_batch()
    with torch.no_grad():
        batch_out = model(ids, attention_mask=mask).last_hidden_state
        for row in (1, 2):
            n = int(mask[row].sum())
            alone = model(ids[row : row + 1, :n]).last_hidden_state[0]
            torch.testing.assert_close(batch_out[row, :n], alone, rtol=1e-5, atol=1e-5)


def test_alibi_is_used():
    """Zeroing the slopes changes the output: position information comes only from ALiBi."""
    model = tiny_model(4, "eager")
    ids, _ = padded_batch()
    with torch.no_grad():
        before = model(ids).last_hidden_state
        for layer in model.encoder.layer:
            layer.attention.self.alibi_slopes.zero_()
        after = model(ids).last_hidden_state
        # Without ALiBi the model is permutation-equivariant: reversing the input reverses the output.
        reversed_out = model(ids.flip(1)).last_hidden_state.flip(1)
    assert not torch.allclose(before, after, atol=1e-4)
    torch.testing.assert_close(after, reversed_out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_runs_far_beyond_any_training_length(attn):
    """No position table: n = 300 runs on a model 'trained' at 64 (ALiBi extrapolates)."""
    model = tiny_model(4, attn)
    torch.manual_seed(2)
    ids = torch.randint(1, VOCAB, (2, 300))
    mask = torch.ones_like(ids)
    mask[1, 250:] = 0
    with torch.no_grad():
        out = model(ids, attention_mask=mask).last_hidden_state
        alone = model(ids[1:, :250]).last_hidden_state[0]
    assert out.shape == (2, 300, 32) and torch.isfinite(out).all()
    torch.testing.assert_close(out[1, :250], alone, rtol=1e-5, atol=1e-5)


def test_custom_attention_function_gets_slopes_mask_and_kwargs():
    """A registered implementation receives the module (with alibi_slopes), a padding mask and
    the caller's kwargs, and is trusted to add the bias itself."""
    calls = []

    def reference_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        calls.append({"mask": attention_mask, "kwargs": kwargs, "slopes": module.alibi_slopes})
        n = query.shape[-2]
        bias = alibi_bias(module.alibi_slopes, torch.arange(n), torch.arange(n))
        scores = query @ key.transpose(-1, -2) * scaling + bias
        if attention_mask is not None:
            scores = scores.masked_fill(~attention_mask, float("-inf"))
        return (scores.softmax(-1) @ value).transpose(1, 2), None

    ALL_ATTENTION_FUNCTIONS.register("jina_bert_test_reference", reference_attention)
    eager = tiny_model(6, "eager")
    custom = tiny_model(6, "jina_bert_test_reference")
    custom.load_state_dict(eager.state_dict())
    ids, mask = padded_batch()
    plan = object()
    with torch.no_grad():
        expected = eager(ids, attention_mask=mask).last_hidden_state
        got = custom(ids, attention_mask=mask, longembed_plan=plan).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert len(calls) == 2  # one per layer
    for call in calls:
        assert call["kwargs"] == {"longembed_plan": plan}
        assert call["mask"].dtype == torch.bool and call["mask"].shape == (3, 1, 11, 11)
        torch.testing.assert_close(call["slopes"], alibi_slopes(6))


def test_output_hidden_states_and_attentions():
    model = tiny_model(4, "eager")
    ids, mask = padded_batch()
    with torch.no_grad():
        out = model(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2
    torch.testing.assert_close(out.hidden_states[-1], out.last_hidden_state)
    assert out.attentions[0].shape == (3, 4, 11, 11)
    assert float(out.attentions[0][1, :, :, 7:].abs().max()) == 0.0  # padding keys get no weight
    torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(3, 4, 11))


# ---------------------------------------------------------------- config, saving, loading


def test_config_validation():
    assert isinstance(
        JinaBertModel(tiny_config(feed_forward_type="reglu")).encoder.layer[0].mlp.act, torch.nn.ReLU
    )
    with pytest.raises(ValueError):
        tiny_config(feed_forward_type="swiglu")
    original = JinaBertModel(tiny_config(feed_forward_type="original")).encoder.layer[0]
    assert not hasattr(original, "mlp") and original.intermediate.dense.out_features == 40
    with pytest.raises(ValueError, match="hidden_act"):
        JinaBertModel(tiny_config(feed_forward_type="original", hidden_act="no-such-activation"))
    with pytest.raises(ValueError):
        JinaBertConfig(hidden_size=30, num_attention_heads=4)


def test_save_pretrained_round_trip_through_automodel(tmp_path):
    model = tiny_model(6, "sdpa")
    ids, mask = padded_batch()
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "jina_bert"
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, JinaBertModel)
    # The slopes are a non-persistent buffer: they must be rebuilt, not left uninitialised.
    torch.testing.assert_close(loaded.encoder.layer[1].attention.self.alibi_slopes, alibi_slopes(6))
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(ids, attention_mask=mask).last_hidden_state,
            model(ids, attention_mask=mask).last_hidden_state,
        )


def test_from_jina_config():
    config = JinaBertConfig.from_jina_config(jina_config_json(tiny_config(6)))
    assert (config.hidden_size, config.num_attention_heads, config.intermediate_size) == (48, 6, 40)
    assert config.feed_forward_type == "geglu" and config.model_type == "jina_bert"
    assert config.dtype == torch.float32
    assert not hasattr(config, "auto_map") and config.architectures is None
    assert config._attn_implementation != "torch"
    with pytest.raises(ValueError):
        JinaBertConfig.from_jina_config(
            {**jina_config_json(tiny_config()), "position_embedding_type": "absolute"}
        )


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_released_folder_loads_with_no_missing_or_unexpected_keys(tmp_path, prefix):
    """A folder laid out like jinaai/jina-embeddings-v2-*: remote-code config.json and weights
    named as by jina-bert-implementation (also the 'bert.'-prefixed MLM layout, with the pooler
    and MLM head that the embedding model does not use)."""
    config = tiny_config(6)
    state = jina_state_dict(config)
    extra = {
        "pooler.dense.weight": torch.zeros(config.hidden_size, config.hidden_size),
        "pooler.dense.bias": torch.zeros(config.hidden_size),
    }
    weights = {prefix + k: v.contiguous() for k, v in {**state, **extra}.items()}
    if prefix:  # saved from the MLM model: its head sits outside the "bert." prefix
        weights["cls.predictions.bias"] = torch.zeros(config.vocab_size)
    save_file(weights, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(jina_config_json(config)))

    model, info = JinaBertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() or info["missing_keys"] == []
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    model.eval()
    for name, tensor in state.items():
        torch.testing.assert_close(model.state_dict()[name], tensor)
    ids, mask = padded_batch()
    with torch.no_grad():
        got = model(ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(
        got[real].double(), naive_jina_forward(state, config, ids, mask)[real], rtol=1e-5, atol=1e-5
    )
