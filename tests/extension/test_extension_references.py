"""Extension methods end to end on tiny models, each against an independent reference model.

Every reference is an ordinary transformers model run with ordinary positions 0..n-1 (or with
position ids written here), never longembed's own code path: APE methods against a copy of the
model whose position table was rebuilt row by row (GP, RP, PI), RoPE methods against the model
rebuilt with Hugging Face's own rope types (YaRN, linear = PI, a larger rope_theta = NTK) or fed
grouped position ids (GP).
"""

from __future__ import annotations

import copy
import math
import shutil

import numpy as np
import pytest
import torch
from conftest import LO, words
from rope_references import ATOL, LT, S, naive_selfextend, rope_theta, rope_variant, selfextend_relative
from transformers import AutoConfig, AutoModel, AutoTokenizer

from longembed import load_encoder
from longembed.extension.ape import interpolated_position_matrix
from longembed.extension.methods.ntk import ntk_lambda

# 110 words -> 112 tokens with [CLS]/[SEP]: longer than Lo = 32 and below (Lo - 1) * s + 1 = 125,
# the last PI row that has a right neighbour to interpolate towards.
LONG = words(110, seed=11)
SHORT = words(20, seed=12)
TEXTS = [LONG, SHORT]


def mean_pool(hidden: torch.Tensor) -> np.ndarray:
    """Mean over the tokens of one unpadded sequence (1, n, d) -> (d,)."""
    return hidden[0].mean(dim=0).numpy()


def embed(model, tokenizer, text: str, **forward_kwargs) -> np.ndarray:
    """One text through a plain transformers model, alone (no padding), mean pooled."""
    return embed_ids(model, tokenizer(text)["input_ids"], **forward_kwargs)


def embed_ids(model, token_ids: list[int], **forward_kwargs) -> np.ndarray:
    """One token-id sequence through a plain transformers model, alone (no padding), mean pooled."""
    ids = torch.tensor([token_ids])
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids), **forward_kwargs).last_hidden_state
    return mean_pool(hidden)


def token_count(tokenizer, text: str) -> int:
    return len(tokenizer(text)["input_ids"])


# ----------------------------------------------------------------------------- APE: rebuilt tables
def rebuilt_table(method: str, e_o: torch.Tensor, s: int) -> torch.Tensor:
    """E_t (Lo * s, d) written from the paper's definitions, row by row.

    GP: E_t[p] = E_o[floor(p / s)].  RP: E_t[p] = E_o[p mod Lo].  PI: E_t[i*s + k] = E_o[i] +
    k/s (E_o[i+1] - E_o[i]); the rows after E_t[(Lo-1) s] have no right neighbour and are NaN,
    so any input that reached them would fail loudly.
    """
    lo, d = e_o.shape
    e_t = torch.full((lo * s, d), float("nan"))
    for p in range(lo * s):
        if method == "gp":
            e_t[p] = e_o[p // s]
        elif method == "rp":
            e_t[p] = e_o[p % lo]
        elif method == "pi":
            i, k = divmod(p, s)
            if i < lo - 1:
                e_t[p] = e_o[i] + (k / s) * (e_o[i + 1] - e_o[i])
            elif k == 0:
                e_t[p] = e_o[i]
        else:
            raise ValueError(method)
    return e_t


def position_offset(model) -> int:
    """Index of position 0 in the table: XLM-R/RoBERTa start at padding_idx + 1, BERT at 0."""
    return model.config.pad_token_id + 1 if model.config.model_type in ("roberta", "xlm-roberta") else 0


def save_with_position_table(model, table: torch.Tensor, folder) -> torch.nn.Module:
    """A copy of ``model`` with position table ``table`` (all its rows), saved and reloaded plainly."""
    new = copy.deepcopy(model)
    old = new.embeddings.position_embeddings
    new.embeddings.position_embeddings = torch.nn.Embedding(
        table.shape[0], table.shape[1], padding_idx=old.padding_idx, _weight=table.clone()
    )
    rows = table.shape[0]
    new.embeddings.register_buffer("position_ids", torch.arange(rows).expand(1, -1), persistent=False)
    new.embeddings.register_buffer("token_type_ids", torch.zeros(1, rows, dtype=torch.long), persistent=False)
    new.config.max_position_embeddings = rows
    new.save_pretrained(folder)
    reloaded = AutoModel.from_pretrained(folder).eval()
    assert reloaded.config.max_position_embeddings == rows
    loaded = reloaded.embeddings.position_embeddings.weight.detach()
    torch.testing.assert_close(loaded, table, rtol=0, atol=0, equal_nan=True)  # really that table
    return reloaded


def ape_reference(folder, method: str, out_folder) -> list[np.ndarray]:
    """TEXTS embedded by the model rebuilt with ``method``'s table, with ordinary positions."""
    model = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    offset = position_offset(model)
    table = model.embeddings.position_embeddings.weight.detach()
    assert table.shape[0] == LO + offset
    e_t = rebuilt_table(method, table[offset : offset + LO], S)
    rebuilt = save_with_position_table(model, torch.cat([table[:offset], e_t]), out_folder)
    assert token_count(tokenizer, LONG) <= (LO - 1) * S + 1
    return [embed(rebuilt, tokenizer, t) for t in TEXTS]


@pytest.mark.parametrize("family", ["bert", "xlmr"])
@pytest.mark.parametrize("method", ["gp", "rp", "pi"])
def test_ape_method_equals_the_model_with_its_rebuilt_position_table(tiny_models, tmp_path, family, method):
    """GP/RP/PI (s = 4, applied to all inputs) equal the model whose position table was rebuilt to E_t."""
    folder = tiny_models[family]
    expected = np.stack(ape_reference(folder, method, tmp_path / "rebuilt"))
    encoder = load_encoder(folder, method=method, max_length=LT, apply_to="all")
    assert encoder.original_length == LO
    got = encoder.encode(TEXTS, batch_size=2, normalize_embeddings=False)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("family", ["bert", "xlmr"])
def test_ape_long_input_in_default_mode_equals_the_rebuilt_table(tiny_models, tmp_path, family):
    """With apply_to="long" a long input still uses E_t, while a short one keeps the original table."""
    folder = tiny_models[family]
    gp_long, _ = ape_reference(folder, "gp", tmp_path / "rebuilt")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    plain_short = embed(AutoModel.from_pretrained(folder).eval(), tokenizer, SHORT)
    got = load_encoder(folder, method="gp", max_length=LT).encode(TEXTS, normalize_embeddings=False)
    np.testing.assert_allclose(got[0], gp_long, atol=ATOL, rtol=0)
    np.testing.assert_allclose(got[1], plain_short, atol=ATOL, rtol=0)


def test_rebuilt_pi_table_agrees_with_interpolated_position_matrix():
    """The row-by-row PI table written here equals interpolated_position_matrix on every defined row."""
    torch.manual_seed(0)
    e_o = torch.randn(LO, 6)
    mine = rebuilt_table("pi", e_o, S)
    defined = (LO - 1) * S + 1
    torch.testing.assert_close(mine[:defined], interpolated_position_matrix(e_o, S)[:defined])


def test_ape_references_tell_the_methods_apart(tiny_models, tmp_path):
    """The rebuilt-table references differ between GP, RP and PI, so a swapped mapping cannot pass."""
    folder = tiny_models["bert"]
    refs = {m: ape_reference(folder, m, tmp_path / m)[0] for m in ("gp", "rp", "pi")}
    for a, b in (("gp", "rp"), ("gp", "pi"), ("rp", "pi")):
        assert np.abs(refs[a] - refs[b]).max() > 1e-3, (a, b)


# ----------------------------------------------------------------------------- RoPE: HF rope types
SHARPEN = 8.0


@pytest.fixture(scope="module")
def sharp_models(tiny_models, tmp_path_factory) -> dict:
    """Copies of the tiny models with q and k projections x8: with larger attention logits the
    positions matter enough (> 1e-3 on the pooled vector) that a wrong position scheme shows."""
    root = tmp_path_factory.mktemp("sharp-models")
    folders = {}
    for family in ("nomic", "llama", "modernbert"):
        folder = root / family
        shutil.copytree(tiny_models[family], folder)
        model = AutoModel.from_pretrained(folder)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if any(k in name for k in ("query", "key", "q_proj", "k_proj", "Wqkv")) and p.dim() == 2:
                    p.mul_(SHARPEN)
        model.save_pretrained(folder)
        folders[family] = folder
    return folders


def check_rope_method(folder, method: str, reference: torch.nn.Module, **options) -> None:
    """longembed's ``method`` (s = 4 on every input) equals ``reference`` run with positions 0..n-1,
    and the reference really differs from the unmodified model."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert token_count(tokenizer, LONG) > LO
    expected = np.stack([embed(reference, tokenizer, t) for t in TEXTS])
    plain = AutoModel.from_pretrained(folder).eval()
    unmodified = np.stack([embed(plain, tokenizer, t) for t in TEXTS])
    assert np.abs(expected - unmodified).max() > 1e-3, "the reference is the unmodified model"
    encoder = load_encoder(folder, method=method, max_length=LT, apply_to="all", **options)
    assert encoder.original_length == LO
    got = encoder.encode(TEXTS, batch_size=2, normalize_embeddings=False)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("family", ["nomic", "llama"])
def test_yarn_equals_hugging_face_yarn_rope(sharp_models, family):
    """YaRN equals the model rebuilt with HF rope_type "yarn" (factor s, original length Lo)."""
    folder = sharp_models[family]
    reference = rope_variant(
        folder,
        rope_type="yarn",
        factor=float(S),
        original_max_position_embeddings=LO,
        rope_theta=rope_theta(folder),
    )
    check_rope_method(folder, "yarn", reference)


@pytest.mark.parametrize("family", ["nomic", "llama"])
def test_rope_pi_equals_hugging_face_linear_rope(sharp_models, family):
    """PI on RoPE equals the model rebuilt with HF rope_type "linear" and factor s."""
    folder = sharp_models[family]
    check_rope_method(folder, "pi", rope_variant(folder, rope_type="linear", factor=float(S)))


def test_ntk_on_llama_equals_a_larger_rope_theta(sharp_models):
    """NTK on a causal decoder equals the model rebuilt with rope_theta x lambda(s) (Table 6: s=4 -> 5)."""
    folder = sharp_models["llama"]
    assert ntk_lambda(S) == 5.0
    check_rope_method(folder, "ntk", rope_variant(folder, rope_theta=rope_theta(folder) * 5.0))


def test_ntk_explicit_factor_equals_that_rope_theta(sharp_models):
    """An explicit ntk_factor replaces Table 6's lambda: base x 2.5 on the tiny nomic."""
    folder = sharp_models["nomic"]
    check_rope_method(
        folder, "ntk", rope_variant(folder, rope_theta=rope_theta(folder) * 2.5), ntk_factor=2.5
    )


@pytest.mark.parametrize("family", ["nomic", "llama"])
def test_rope_gp_equals_grouped_position_ids(sharp_models, family):
    """GP on RoPE equals the plain model fed position_ids floor(p / s)."""
    folder = sharp_models[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    expected, unmodified = [], []
    for text in TEXTS:
        n = token_count(tokenizer, text)
        grouped = torch.div(torch.arange(n), S, rounding_mode="floor").unsqueeze(0)
        expected.append(embed(model, tokenizer, text, position_ids=grouped))
        unmodified.append(embed(model, tokenizer, text))
    assert np.abs(np.stack(expected) - np.stack(unmodified)).max() > 1e-3
    got = load_encoder(folder, method="gp", max_length=LT, apply_to="all").encode(
        TEXTS, normalize_embeddings=False
    )
    np.testing.assert_allclose(got, np.stack(expected), atol=ATOL, rtol=0)


def test_ntk_on_modernbert_equals_larger_rope_thetas(sharp_models):
    """NTK on ModernBERT equals the model rebuilt with both layer types' rope_theta x lambda(s)."""
    folder = sharp_models["modernbert"]
    config = AutoConfig.from_pretrained(folder)
    params = {kind: dict(p) for kind, p in config.rope_parameters.items()}
    assert len(params) == 2 and all("rope_theta" in p for p in params.values())
    for p in params.values():
        p["rope_theta"] = float(p["rope_theta"]) * ntk_lambda(S)
    config.rope_parameters = params
    reference = AutoModel.from_pretrained(folder, config=config).eval()
    check_rope_method(folder, "ntk", reference)


def test_logn_scaling_equals_scaled_attention_logits(sharp_models):
    """attention_scale="logn" with GP equals the plain model fed floor(p/s) whose logits are x log n / log Lo."""
    from transformers import AttentionInterface

    folder = sharp_models["nomic"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = words(28, seed=13)  # the log-n factor only acts beyond Lo, so: GP on a long input
    long_text = LONG
    n = token_count(tokenizer, long_text)
    factor = math.log(n) / math.log(LO)
    assert factor > 1.2 and token_count(tokenizer, text) <= LO

    def scaled_eager(module, q, k, v, attention_mask, scaling=None, dropout=0.0, **kwargs):
        scores = (q @ k.transpose(-1, -2)) * scaling * factor
        if attention_mask is not None:  # boolean (keep) or additive, depending on the mask interface
            scores = (
                scores.masked_fill(~attention_mask, float("-inf"))
                if attention_mask.dtype == torch.bool
                else scores + attention_mask
            )
        return (torch.softmax(scores, -1) @ v).transpose(1, 2).contiguous(), None

    AttentionInterface.register("logn-reference-test", scaled_eager)  # a name of this test only
    model = AutoModel.from_pretrained(folder).eval()
    model.set_attn_implementation("logn-reference-test")
    grouped = torch.div(torch.arange(n), S, rounding_mode="floor").unsqueeze(0)
    expected = embed(model, tokenizer, long_text, position_ids=grouped)
    model.set_attn_implementation("eager")
    unscaled = embed(model, tokenizer, long_text, position_ids=grouped)
    assert np.abs(expected - unscaled).max() > 10 * ATOL  # the scaling is visible well above the tolerance
    encoder = load_encoder(folder, method="gp", max_length=LT, attention_scale="logn")
    got = encoder.encode([long_text, text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)
    np.testing.assert_allclose(got[1], embed(model, tokenizer, text), atol=ATOL, rtol=0)


# ----------------------------------------------------------------------------- SelfExtend, PCW
@pytest.mark.parametrize(("family", "g", "w"), [("nomic", 5, 8), ("nomic", 3, 5), ("llama", 5, 8)])
def test_selfextend_equals_naive_attention_on_relative_positions(sharp_models, family, g, w):
    """SelfExtend (s = 4: Table 6's g = 5, w = Lo/4 = 8, or explicit g, w) equals a naive n x n SelfExtend attention."""
    from transformers import AttentionInterface

    from longembed.extension.methods.selfextend import selfextend_defaults
    from longembed.extension.rope import selfextend_relative_positions

    folder = sharp_models[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = AutoConfig.from_pretrained(folder)
    head_dim = config.head_dim or config.hidden_size // config.num_attention_heads
    inv_freq = 1.0 / rope_theta(folder) ** (torch.arange(0, head_dim, 2).float() / head_dim)
    defaults = selfextend_defaults(S, LO) == (g, w)
    options = {} if defaults else {"group_size": g, "window": w}
    encoder = load_encoder(folder, method="selfextend", max_length=LT, apply_to="all", **options)
    expected, unmodified = [], []
    for text in TEXTS:
        n = token_count(tokenizer, text)
        rel = selfextend_relative(n, g, w)
        assert torch.equal(rel, selfextend_relative_positions(n, g, w))
        name = f"naive-selfextend-{family}-{n}-{g}-{w}"
        AttentionInterface.register(name, naive_selfextend(rel, inv_freq, causal=family == "llama"))
        model = AutoModel.from_pretrained(folder).eval()
        model.set_attn_implementation(name)
        expected.append(embed(model, tokenizer, text, position_ids=torch.zeros(1, n, dtype=torch.long)))
        unmodified.append(embed(AutoModel.from_pretrained(folder).eval(), tokenizer, text))
    assert np.abs(expected[0] - unmodified[0]).max() > 1e-3
    got = encoder.encode(TEXTS, batch_size=2, normalize_embeddings=False)
    np.testing.assert_allclose(got, np.stack(expected), atol=ATOL, rtol=0)


def test_pcw_equals_the_mean_of_end_aligned_windows_with_the_prompt(tiny_models):
    """PCW equals the mean of Lo-token windows ([CLS] prompt content [SEP], last end-aligned) run by the plain model."""
    folder = tiny_models["bert"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    prompt = "this is "
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    expected = []
    for text in TEXTS:
        ids = tokenizer(prompt + text)["input_ids"]
        assert ids[1 : 1 + len(prompt_ids)] == prompt_ids
        content = ids[1 + len(prompt_ids) : -1]
        room = LO - 2 - len(prompt_ids)
        starts = list(range(0, max(len(content) - room, 0), room)) + [max(len(content) - room, 0)]
        windows = [ids[:1] + prompt_ids + content[a : a + room] + ids[-1:] for a in starts]
        assert all(len(x) <= LO for x in windows)
        expected.append(np.mean([embed_ids(model, x) for x in windows], axis=0))
    assert len(starts) == 1 and len(TEXTS[0].split()) > 3 * room  # SHORT: one window; LONG: several
    got = load_encoder(folder, method="pcw", max_length=LT).encode(
        TEXTS, prompt=prompt, normalize_embeddings=False
    )
    np.testing.assert_allclose(got, np.stack(expected), atol=ATOL, rtol=0)
