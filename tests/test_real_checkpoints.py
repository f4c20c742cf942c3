"""Every extension method on real checkpoints, against references built from plain transformers.

multilingual-e5-small (a BertModel: learned positions from 0, Lo = 512, prompts "query: " /
"passage: "): truncate, pcw, gp, rp, pi at Lt = 1024 (s = 2).  nomic-embed-text-v1.5 (RoPE, theta
1000): truncate, pcw, gp, pi, ntk, yarn, selfextend with original_length=128 and Lt = 512 (s = 4),
so that "long" stays cheap on a CPU.

For every method: (a) inputs of at most Lo tokens embed exactly as the unmodified model (plain
transformers, mean pooling, the model's prompt; and as sentence-transformers), log-n scaling on;
(b) a text's vector does not depend on its batch neighbours, for fixed and per-document scale;
(c) a long input equals an independent reference: position ids given to the plain model, a
rebuilt position table, a Hugging Face rope type, end-aligned windows each embedded by the plain
model, or a naive n x n SelfExtend attention registered with transformers.AttentionInterface.

The models are built by ../shared/models/materialize.py (see conftest.real_model_folder).
"""

from __future__ import annotations

import inspect
import json
import random
import warnings

import numpy as np
import pytest
import torch
from conftest import real_model_folder
from transformers import AttentionInterface, AutoConfig, AutoModel, AutoTokenizer

from longembed import load_encoder
from longembed.extension.methods.ntk import ntk_lambda
from longembed.extension.methods.selfextend import selfextend_defaults
from longembed.extension.rope import selfextend_relative_positions

pytestmark = pytest.mark.slow

ATOL = 1e-5  # fp32 throughout
E5, NOMIC = "multilingual-e5-small", "nomic-embed-text-v1.5"
E5_LO, E5_LT, E5_S = 512, 1024, 2
NOMIC_LO, NOMIC_LT, NOMIC_S = 128, 512, 4  # nomic's Lo overridden with original_length=128
LO = {E5: E5_LO, NOMIC: NOMIC_LO}
LT = {E5: E5_LT, NOMIC: NOMIC_LT}
EXTRA_OPTIONS = {E5: {}, NOMIC: {"original_length": NOMIC_LO}}
PROMPT_NAME = {E5: "passage", NOMIC: "document"}
SHORT_NAME = {E5: "e5", NOMIC: "nomic"}
METHODS = {
    E5: ("truncate", "pcw", "gp", "rp", "pi"),
    NOMIC: ("truncate", "pcw", "gp", "pi", "ntk", "yarn", "selfextend"),
}
SCALED = ("gp", "rp", "pi", "ntk", "yarn", "selfextend")  # methods whose s matters

SENTENCES = [
    "The committee met on Tuesday to review the budget for the coming year.",
    "Rainfall in the northern valleys was twice the seasonal average.",
    "She repaired the old bicycle with parts from three different shops.",
    "A new species of beetle was described from samples collected in the canopy.",
    "The train to the coast leaves every hour from the second platform.",
    "Engineers measured the vibration of the bridge under heavy traffic.",
    "His grandmother kept a diary of every harvest for forty years.",
    "The museum opened a wing dedicated to early navigation instruments.",
    "Prices of wheat and barley rose sharply after the dry summer.",
    "The software update fixed a rare bug in the synchronisation of calendars.",
    "Volunteers planted two thousand oak saplings along the river bank.",
    "The orchestra rehearsed the second movement until well after midnight.",
    "A quiet library on the hill holds maps drawn by hand in the last century.",
    "The chef recommends roasting the vegetables before adding the spices.",
    "Students compared the growth of bacteria at three temperatures.",
    "The lighthouse keeper logged each passing ship and the state of the sea.",
    "Negotiations over the fishing quota ended without an agreement.",
    "The telescope recorded a faint flash from a galaxy far beyond our own.",
    "Local bakers formed a cooperative to buy flour at lower prices.",
    "The hikers crossed the ridge before the storm reached the pass.",
    "A long report described how the city manages its water supply.",
    "The referee stopped the match twice because of the fog.",
    "Children in the village learn to swim in the cold mountain lake.",
    "The archive lists every ship that entered the harbour since 1850.",
]


def prose(n_sentences: int, seed: int) -> str:
    """A deterministic English text of n sentences."""
    rng = random.Random(seed)
    return " ".join(rng.choice(SENTENCES) for _ in range(n_sentences))


# ----------------------------------------------------------------------------- plain references
class Plain:
    """A real model loaded with plain transformers, its tokenizer and its document prompt."""

    def __init__(self, name: str):
        self.name = name
        self.folder = real_model_folder(name)
        self.lo = LO[name]
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        self.model = AutoModel.from_pretrained(self.folder, dtype=torch.float32).eval()
        prompts = json.loads((self.folder / "config_sentence_transformers.json").read_text())["prompts"]
        self.prompt = prompts[PROMPT_NAME[name]]

    def ids(self, text: str) -> list[int]:
        """Token ids of prompt + text with the special tokens, as the model's tokenizer makes them."""
        return self.tokenizer(self.prompt + text)["input_ids"]

    def count(self, text: str) -> int:
        return len(self.ids(text))

    def run(self, ids: list[int], model=None, **forward_kwargs) -> np.ndarray:
        """Mean-pooled last hidden state of one unpadded sequence (not normalized)."""
        model = model or self.model
        x = torch.tensor([ids])
        if "token_type_ids" in inspect.signature(model.forward).parameters:
            # explicit zeros: the model's token-type buffer is only max_position_embeddings long
            forward_kwargs.setdefault("token_type_ids", torch.zeros_like(x))
        with torch.no_grad():
            hidden = model(input_ids=x, attention_mask=torch.ones_like(x), **forward_kwargs).last_hidden_state
        return hidden[0].mean(dim=0).numpy()

    def fit(self, max_tokens: int, seed: int) -> str:
        """The longest word prefix of a prose text whose prompt + text has at most max_tokens tokens."""
        words = prose(4 * max_tokens // 10 + 10, seed).split()
        lo, hi = 1, len(words)  # binary search on the prefix length (token count grows with it)
        assert self.count(" ".join(words)) > max_tokens
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count(" ".join(words[:mid])) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return " ".join(words[:lo])


def normalized(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def make_encoder(name: str, method: str, **options):
    """longembed's encoder for ``name``; truncate keeps Lo tokens (the paper's baseline)."""
    max_length = LO[name] if method == "truncate" else LT[name]
    return load_encoder(
        real_model_folder(name), method=method, max_length=max_length, **EXTRA_OPTIONS[name], **options
    )


def encode(encoder, name: str, texts: list[str], **kwargs) -> np.ndarray:
    return encoder.encode(texts, prompt_name=PROMPT_NAME[name], **kwargs)


def assert_reference_is_not_a_no_op(reference: np.ndarray, plain_vector: np.ndarray) -> None:
    """The reference differs from the unmodified model on the same tokens, so a no-op cannot pass."""
    assert np.abs(reference - plain_vector).max() > 1e-3


class Models(dict):
    """Plain models by name, each loaded on first use."""

    def __missing__(self, name: str) -> Plain:
        self[name] = Plain(name)
        return self[name]


class Texts(dict):
    """Per model, made on first use: short texts (the last exactly Lo tokens with its prompt), a long
    and a medium text beyond Lo."""

    def __init__(self, models: Models):
        super().__init__()
        self.models = models

    def __missing__(self, name: str) -> dict:
        p = self.models[name]
        exact = next(t for seed in range(20) if p.count(t := p.fit(p.lo, seed)) == p.lo)
        if name == E5:  # long: s = 2 either way and <= (Lo - 1) * 2 + 1 (PI's rows with two neighbours)
            long_, medium = p.fit(600, 31), p.fit(250, 32)
        else:  # long: s = 4 fixed, ceil(n / Lo) = 3 per document; medium: 2 per document
            long_, medium = p.fit(280, 31), p.fit(160, 32)
        shorts = [prose(1, 1), p.fit(p.lo // 2, 2), exact]
        plain_shorts = normalized(np.stack([p.run(p.ids(t)) for t in shorts]))  # the unmodified model
        self[name] = {"short": shorts, "plain_short": plain_shorts, "long": long_, "medium": medium}
        return self[name]


@pytest.fixture(scope="module")
def plain() -> Models:
    return Models()


@pytest.fixture(scope="module")
def texts(plain) -> Texts:
    return Texts(plain)


CASES = [pytest.param(name, m, id=f"{SHORT_NAME[name]}-{m}") for name in (E5, NOMIC) for m in METHODS[name]]


# ----------------------------------------------------------------------------- (a) short inputs
@pytest.mark.parametrize(("name", "method"), CASES)
def test_short_inputs_embed_as_the_unmodified_model(plain, texts, name, method):
    """Inputs of at most Lo tokens (one exactly Lo) embed as the plain model + prompt + mean pooling, log-n on."""
    p, shorts, expected = plain[name], texts[name]["short"], texts[name]["plain_short"]
    assert [p.count(t) <= p.lo for t in shorts] == [True] * 3 and p.count(shorts[-1]) == p.lo
    encoder = make_encoder(name, method, attention_scale="logn")
    assert encoder.original_length == p.lo
    got = encode(encoder, name, shorts, batch_size=3)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", [E5, NOMIC])
def test_short_inputs_equal_sentence_transformers(plain, texts, name):
    """On short inputs longembed's encode equals SentenceTransformer(folder).encode with the same prompt."""
    from sentence_transformers import SentenceTransformer  # a test dependency

    shorts = texts[name]["short"]
    st = SentenceTransformer(str(plain[name].folder), device="cpu")
    expected = st.encode(shorts, prompt_name=PROMPT_NAME[name], batch_size=3)
    got = encode(make_encoder(name, "truncate"), name, shorts, batch_size=3)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)
    np.testing.assert_allclose(texts[name]["plain_short"], expected, atol=ATOL, rtol=0)


# ----------------------------------------------------------------------------- (b) batch neighbours
#: every method once, a scaled one with s per document (each text's own s, the case a batch could leak into);
#: tests/test_encoder.py runs every (method, scale) pair on tiny models
BATCH_CASES = [
    pytest.param(name, m, scale, id=f"{SHORT_NAME[name]}-{m}-{scale}")
    for name in (E5, NOMIC)
    for m in METHODS[name]
    for scale in (("per_document",) if m in SCALED else ("fixed",))
]


@pytest.mark.parametrize(("name", "method", "scale"), BATCH_CASES)
def test_vector_does_not_depend_on_batch_neighbours(plain, texts, name, method, scale):
    """A text embedded alone equals the same text in one padded batch with longer and shorter texts."""
    t = texts[name]
    mixed = [t["long"], t["short"][0], t["medium"]]
    encoder = make_encoder(name, method, scale=scale, attention_scale="logn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncate cuts the long texts at Lo, with a warning
        together = encode(
            encoder, name, mixed, batch_size=3, max_tokens_per_batch=1 << 20, normalize_embeddings=False
        )
        alone = np.stack([encode(encoder, name, [x], normalize_embeddings=False)[0] for x in mixed])
    np.testing.assert_allclose(together, alone, atol=ATOL, rtol=0)


# ----------------------------------------------------------------------------- (c) long inputs
@pytest.mark.parametrize("name", [E5, NOMIC])
def test_truncate_keeps_the_first_lo_tokens(plain, texts, name):
    """truncate on a long input equals the plain model on its first Lo - 1 tokens plus the closing token."""
    p, text = plain[name], texts[name]["long"]
    ids = p.ids(text)
    assert len(ids) > p.lo
    expected = p.run(ids[: p.lo - 1] + ids[-1:])
    encoder = make_encoder(name, "truncate")
    with pytest.warns(UserWarning, match="truncated"):
        got, stats = encode(encoder, name, [text], normalize_embeddings=False, return_stats=True)
    assert stats.n_truncated == 1
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)


def test_e5_positions_start_at_zero(plain, texts):
    """The e5 folder is a BertModel: its own positions are 0..n-1 (no XLM-R offset), the convention below."""
    p = plain[E5]
    ids = p.ids(texts[E5]["short"][1])
    n = len(ids)
    assert p.model.config.model_type == "bert"
    default = p.run(ids)
    np.testing.assert_array_equal(p.run(ids, position_ids=torch.arange(n)[None]), default)
    assert np.abs(p.run(ids, position_ids=torch.arange(1, n + 1)[None]) - default).max() > 1e-3


@pytest.mark.parametrize("method", ["gp", "rp"])
def test_e5_gp_rp_equal_position_ids_given_to_the_plain_model(plain, texts, method):
    """e5 GP (floor(p/2)) and RP (p mod 512) on a long input equal the plain BertModel fed those position ids."""
    p, text = plain[E5], texts[E5]["long"]
    ids = p.ids(text)
    n = len(ids)
    assert n > E5_LO
    pos = torch.arange(n)
    pos = pos // E5_S if method == "gp" else pos % E5_LO
    expected = p.run(ids, position_ids=pos[None])
    got = encode(make_encoder(E5, method), E5, [text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)


def test_e5_pi_equals_the_model_with_a_rebuilt_interpolated_table(plain, texts):
    """e5 PI equals the plain model whose position table is E_t[2i] = E_o[i], E_t[2i+1] = (E_o[i] + E_o[i+1]) / 2."""
    p, text = plain[E5], texts[E5]["long"]
    ids = p.ids(text)
    n = len(ids)
    assert E5_LO < n <= (E5_LO - 1) * E5_S + 1  # only rows with both neighbours are used
    rebuilt = AutoModel.from_pretrained(p.folder, dtype=torch.float32).eval()
    e_o = rebuilt.embeddings.position_embeddings.weight.detach().clone()
    e_t = torch.full((E5_LO * E5_S, e_o.shape[1]), float("nan"))  # a row used by mistake shows as NaN
    e_t[0::E5_S] = e_o  # E_t[2i] = E_o[i]
    e_t[1 : (E5_LO - 1) * E5_S : E5_S] = (e_o[:-1] + e_o[1:]) / 2  # E_t[2i+1], i < Lo - 1; E_t[1023] unused
    rebuilt.embeddings.position_embeddings = torch.nn.Embedding.from_pretrained(e_t)
    expected = p.run(ids, model=rebuilt, position_ids=torch.arange(n)[None])  # ordinary positions 0..n-1
    assert np.isfinite(expected).all()
    got = encode(make_encoder(E5, "pi"), E5, [text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)
    gp = p.run(ids, position_ids=(torch.arange(n) // E5_S)[None])
    assert np.abs(gp - expected).max() > 1e-3  # PI's interpolated rows differ from GP's repeated rows


def pcw_windows(p: Plain, text: str) -> list[list[int]]:
    """PCW windows written from the rule: content windows of Lo - specials - prompt tokens, no overlap
    except the last, which is end-aligned; every window is [head] + prompt + content + [tail].

    The prompt's tokens are those the prompt contributes to prompt + text (the common prefix of
    its own tokenization and the text's): SentencePiece folds the prompt's trailing space into
    the next word, so "passage: " alone ends with a lone "▁" that prompt + text does not have.
    """
    ids = p.ids(text)
    head, tail = ids[:1], ids[-1:]
    assert head == [p.tokenizer.cls_token_id] and tail == [p.tokenizer.sep_token_id]
    alone = p.tokenizer(p.prompt, add_special_tokens=False)["input_ids"]
    k = 0
    while k < len(alone) and ids[1 + k] == alone[k]:
        k += 1
    assert k >= 2, "the prompt's tokens must start the input"
    prompt, content = ids[1 : 1 + k], ids[1 + k : -1]
    room = p.lo - 2 - len(prompt)
    starts, start = [], 0
    while start + room < len(content):
        starts.append(start)
        start += room
    starts.append(len(content) - room)
    windows = [head + prompt + content[a : a + room] + tail for a in starts]
    assert all(len(w) == p.lo for w in windows) and len(windows) >= 2
    return windows


@pytest.mark.parametrize("name", [E5, NOMIC])
def test_pcw_equals_the_mean_of_end_aligned_windows(plain, texts, name):
    """PCW equals the mean of the plain model's vectors of Lo-token windows, the prompt in every window."""
    p, text = plain[name], texts[name]["long"]
    windows = pcw_windows(p, text)
    vectors = np.stack([p.run(w) for w in windows])
    encoder = make_encoder(name, "pcw")
    raw, stats = encode(encoder, name, [text], normalize_embeddings=False, return_stats=True)
    raw = raw[0]
    assert stats.n_sequences == len(windows)
    np.testing.assert_allclose(
        raw,
        vectors.mean(axis=0),
        atol=ATOL,
        rtol=0,
        err_msg="windows differ from [CLS] + prompt + content + [SEP]",
    )
    # normalized: each window vector normalized (as the model's own encode gives it), averaged, normalized
    unit = encode(encoder, name, [text])[0]
    np.testing.assert_allclose(unit, normalized(normalized(vectors).mean(axis=0)), atol=ATOL, rtol=0)


# ----------------------------------------------------------------------------- (c) nomic, RoPE methods
def nomic_long(plain, texts) -> tuple[Plain, str, list[int]]:
    p, text = plain[NOMIC], texts[NOMIC]["long"]
    ids = p.ids(text)
    assert NOMIC_LO < len(ids) <= NOMIC_LT
    return p, text, ids


def nomic_with_rope(p: Plain, **rope_parameters) -> torch.nn.Module:
    """The real nomic rebuilt with Hugging Face's own rope parameters (rope_type, factor, theta...)."""
    config = AutoConfig.from_pretrained(p.folder)
    config.rope_parameters = {**config.rope_parameters, **rope_parameters}
    model = AutoModel.from_pretrained(p.folder, config=config, dtype=torch.float32).eval()
    assert model.config.rope_parameters["rope_type"] == rope_parameters.get("rope_type", "default")
    return model


@pytest.mark.parametrize(("scale", "s"), [("fixed", NOMIC_S), ("per_document", 3)])
def test_nomic_gp_equals_grouped_position_ids(plain, texts, scale, s):
    """nomic GP equals the plain NomicBertModel fed position_ids floor(p/s) (s = 4 fixed, ceil(n/Lo) = 3 per document)."""
    p, text, ids = nomic_long(plain, texts)
    n = len(ids)
    assert -(-n // NOMIC_LO) == 3  # the per-document scale of this text
    expected = p.run(ids, position_ids=(torch.arange(n) // s)[None])
    assert_reference_is_not_a_no_op(expected, p.run(ids))
    got = encode(make_encoder(NOMIC, "gp", scale=scale), NOMIC, [text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)


def test_nomic_pi_equals_hugging_face_linear_rope(plain, texts):
    """nomic PI equals the model rebuilt with HF rope_type "linear", factor s = 4."""
    p, text, ids = nomic_long(plain, texts)
    expected = p.run(ids, model=nomic_with_rope(p, rope_type="linear", factor=float(NOMIC_S)))
    assert_reference_is_not_a_no_op(expected, p.run(ids))
    got = encode(make_encoder(NOMIC, "pi"), NOMIC, [text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize(("ntk_factor", "multiplier"), [(None, 5.0), (2.0, 2.0)])
def test_nomic_ntk_equals_a_larger_rope_theta(plain, texts, ntk_factor, multiplier):
    """nomic NTK equals the model rebuilt with rope_theta x lambda (Table 6: s = 4 -> 5, or ntk_factor)."""
    assert ntk_lambda(NOMIC_S) == 5.0
    p, text, ids = nomic_long(plain, texts)
    theta = float(p.model.config.rope_parameters["rope_theta"])
    assert theta == 1000.0
    expected = p.run(ids, model=nomic_with_rope(p, rope_theta=theta * multiplier))
    assert_reference_is_not_a_no_op(expected, p.run(ids))
    options = {} if ntk_factor is None else {"ntk_factor": ntk_factor}
    got = encode(make_encoder(NOMIC, "ntk", **options), NOMIC, [text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)


def test_nomic_yarn_equals_hugging_face_yarn_rope(plain, texts):
    """nomic YaRN equals the model rebuilt with HF rope_type "yarn" (factor 4, original length Lo = 128)."""
    p, text, ids = nomic_long(plain, texts)
    reference = nomic_with_rope(
        p,
        rope_type="yarn",
        factor=float(NOMIC_S),
        original_max_position_embeddings=NOMIC_LO,
        rope_theta=1000.0,
    )
    expected = p.run(ids, model=reference)
    assert_reference_is_not_a_no_op(expected, p.run(ids))
    got = encode(make_encoder(NOMIC, "yarn"), NOMIC, [text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)


def selfextend_relative(n: int, g: int, w: int) -> torch.Tensor:
    """SelfExtend's relative position of query i to key j (Jin et al. 2024), both directions:
    i - j inside the neighbour window |i - j| < w; beyond it the grouped distance
    floor(i/g) - floor(j/g) shifted by w - floor(w/g) away from zero (the query's grouped position
    is floor(i/g) + w - floor(w/g) for keys on its left, floor(i/g) - (w - floor(w/g)) on its right)."""
    rel = torch.empty(n, n, dtype=torch.long)
    shift = w - w // g
    for i in range(n):
        for j in range(n):
            if abs(i - j) < w:
                rel[i, j] = i - j
            elif j < i:
                rel[i, j] = (i // g + shift) - j // g
            else:
                rel[i, j] = (i // g - shift) - j // g
    return rel


def naive_selfextend_attention(rel: torch.Tensor, inv_freq: torch.Tensor):
    """An attention function: scores_ij = <R(rel_ij) q_i, k_j> * scaling, softmax over j, per head.

    q and k arrive unrotated (the model runs with position_ids = 0); the rotation by rel_ij * theta
    is applied here, rotate-half layout as nomic-bert's own RoPE.
    """
    angles = rel.unsqueeze(-1).to(torch.float32) * inv_freq  # (n, n, d/2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        assert query.shape[0] == 1, "one unpadded sequence: no mask to apply"
        out = torch.empty_like(query)
        for h in range(query.shape[1]):
            q, k = query[0, h], key[0, h]  # (n, d)
            half = q.shape[-1] // 2
            q_half = torch.cat((-q[:, half:], q[:, :half]), -1)
            rotated = q.unsqueeze(1) * cos + q_half.unsqueeze(1) * sin  # R(rel_ij) q_i: (n, n, d)
            scores = (rotated * k.unsqueeze(0)).sum(-1) * scaling
            out[0, h] = torch.softmax(scores, dim=-1) @ value[0, h]
        return out.transpose(1, 2).contiguous(), None

    return attention


def test_nomic_selfextend_equals_naive_selfextend_attention(plain, texts):
    """nomic SelfExtend (Table 6 defaults g = s + 1 = 5, w = Lo / s = 32) equals a naive n x n SelfExtend attention."""
    p, text, ids = nomic_long(plain, texts)
    n = len(ids)
    g, w = selfextend_defaults(NOMIC_S, NOMIC_LO)
    assert (g, w) == (NOMIC_S + 1, NOMIC_LO // NOMIC_S)
    rel = selfextend_relative(n, g, w)
    assert torch.equal(rel, selfextend_relative_positions(n, g, w))
    head_dim = p.model.config.head_dim
    theta = float(p.model.config.rope_parameters["rope_theta"])
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    AttentionInterface.register("naive-selfextend-real-nomic", naive_selfextend_attention(rel, inv_freq))
    reference = AutoModel.from_pretrained(p.folder, dtype=torch.float32).eval()
    reference.set_attn_implementation("naive-selfextend-real-nomic")
    expected = p.run(ids, model=reference, position_ids=torch.zeros(1, n, dtype=torch.long))
    assert_reference_is_not_a_no_op(expected, p.run(ids))
    got = encode(make_encoder(NOMIC, "selfextend"), NOMIC, [text], normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)
