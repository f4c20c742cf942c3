"""Qwen3 (the architecture of Qwen3-Embedding) through longembed, against independent references.

The tiny folder (``conftest.build_tiny("qwen3")``) is laid out as Qwen3-Embedding's: transformers' own
``Qwen3Model`` (causal attention, grouped-query heads, q/k RMSNorm, RoPE), a tokenizer that appends
<|endoftext|> and pads on the left, last-token pooling, a Normalize module and the query prompt
``Instruct: ...\\nQuery:``.  Within the window every reference is the unmodified transformers model
(batched with the tokenizer's own padding, pooled as Qwen3-Embedding's model card pools) or
sentence-transformers reading the folder; beyond it, the references of
``rope_references`` for RoPE models (the model rebuilt with Hugging Face's rope types,
a naive SelfExtend attention, hand-built PCW windows), pooled at the last token.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from conftest import LO, QWEN3_EOS, QWEN3_QUERY_PROMPT, qwen3_tokenizer, require_package, words
from fastapi.testclient import TestClient
from rope_references import (
    ATOL,
    LT,
    S,
    naive_selfextend,
    rope_theta,
    rope_variant,
    selfextend_relative,
)
from transformers import AttentionInterface, AutoConfig, AutoModel, AutoTokenizer

from longembed import load_encoder
from longembed.export import export_model
from longembed.extension.scaling import ntk_lambda, selfextend_defaults
from longembed.pooling import last_real_index
from longembed.serving import ServerSettings, create_app

# 110 words -> 111 tokens with <|endoftext|>: beyond Lo = 32, within Lt = 128
LONG = words(110, seed=31)
SHORT = words(20, seed=32)
TEXTS = [LONG, SHORT]
WITHIN = [words(25, seed=33), words(9, seed=34), words(30, seed=35)]  # at most Lo tokens each
QUERY = words(8, seed=36)


@pytest.fixture(scope="module")
def qwen3(tiny_models):
    return tiny_models["qwen3"]


def last_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Qwen3-Embedding's model card pooling: the last column under left padding, else each row's
    last real token."""
    if bool(attention_mask[:, -1].all()):
        return hidden[:, -1]
    lengths = attention_mask.sum(dim=1) - 1
    return hidden[torch.arange(hidden.shape[0]), lengths]


def transformers_vectors(folder, texts: list[str], padding_side: str = "left") -> np.ndarray:
    """``texts`` as one padded batch through the unmodified transformers model, last-token pooled."""
    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side=padding_side)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    return last_token_pool(hidden, batch["attention_mask"]).numpy()


def last_state(model, token_ids: list[int], **forward_kwargs) -> np.ndarray:
    """One token-id sequence alone (no padding) through a plain transformers model: its last state."""
    ids = torch.tensor([token_ids])
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids), **forward_kwargs).last_hidden_state
    return hidden[0, -1].numpy()


def raw(folder, method: str = "truncate", texts=TEXTS, **options) -> np.ndarray:
    """longembed's pooled vectors of ``texts``, not normalized (the references are not either)."""
    return load_encoder(folder, method=method, **options).encode(
        texts, batch_size=3, normalize_embeddings=False
    )


# ----------------------------------------------------------------------------- the folder
def test_the_folder_reads_as_qwen3_embedding(qwen3):
    """Last-token pooling, unit vectors, the query prompt, RoPE, and <|endoftext|> as the one closing token."""
    encoder = load_encoder(qwen3, method="truncate")
    assert (encoder.pooling, encoder.normalize, encoder.position_scheme) == ("last", True, "rope")
    assert encoder.prompts == {"query": QWEN3_QUERY_PROMPT, "document": ""}
    assert encoder.runner.special_tokens == (0, 1)
    assert encoder.tokenizer("the of")["input_ids"][-1] == encoder.tokenizer.convert_tokens_to_ids(QWEN3_EOS)
    assert encoder.tokenizer.padding_side == "left" and encoder.original_length == LO


def test_last_real_index_under_left_right_and_no_padding():
    mask = torch.tensor(
        [[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 1, 0, 0, 0]], dtype=torch.bool
    )
    assert last_real_index(mask).tolist() == [2, 4, 4, 1]


# ----------------------------------------------------------------------------- within the window
@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_within_the_window_equals_transformers_qwen3(qwen3, padding_side):
    """truncate equals the unmodified Qwen3Model batched with either padding, pooled at the last token."""
    assert max(len(AutoTokenizer.from_pretrained(qwen3)(t)["input_ids"]) for t in WITHIN) <= LO
    expected = transformers_vectors(qwen3, WITHIN, padding_side)
    got = raw(qwen3, texts=WITHIN)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)
    unit = load_encoder(qwen3, method="truncate").encode(WITHIN)
    np.testing.assert_allclose(
        unit, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=ATOL, rtol=0
    )


def test_within_the_window_equals_sentence_transformers(qwen3):
    """sentence-transformers reads the same folder (its lasttoken pooling, Normalize, left padding)."""
    sentence_transformers = require_package("sentence_transformers")
    reference = sentence_transformers.SentenceTransformer(str(qwen3), device="cpu")
    assert reference.tokenizer.padding_side == "left"
    expected = reference.encode(WITHIN + [QUERY], batch_size=4)
    got = load_encoder(qwen3, method="truncate").encode(WITHIN + [QUERY])
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)
    queries = reference.encode([QUERY], prompt_name="query")
    np.testing.assert_allclose(
        load_encoder(qwen3).encode([QUERY], prompt_name="query"), queries, atol=ATOL, rtol=0
    )


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("pi", {}),
        ("gp", {}),
        ("ntk", {}),
        ("ntk", {"ntk_variant": "dynamic"}),
        ("yarn", {}),
        ("selfextend", {}),
        ("pcw", {}),
    ],
)
def test_methods_at_scale_one_on_every_input_are_the_model_itself(qwen3, method, options):
    """apply_to="all" with Lt = Lo (s = 1): each method reduces to the identity, so equals transformers."""
    expected = transformers_vectors(qwen3, WITHIN)
    got = raw(qwen3, method, texts=WITHIN, max_length=LO, apply_to="all", **options)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


def test_the_query_prompt_is_applied_and_documents_get_none(qwen3):
    """prompt_name="query" equals transformers on "Instruct: ...\\nQuery:" + query; "document" adds nothing."""
    encoder = load_encoder(qwen3, method="truncate")
    expected = transformers_vectors(qwen3, [QWEN3_QUERY_PROMPT + QUERY, QUERY])
    assert len(encoder.tokenizer(QWEN3_QUERY_PROMPT + QUERY)["input_ids"]) <= LO
    got = encoder.encode([QUERY], prompt_name="query", normalize_embeddings=False)
    np.testing.assert_allclose(got[0], expected[0], atol=ATOL, rtol=0)
    assert np.abs(expected[0] - expected[1]).max() > 1e-3  # the prompt changes the vector
    documents = encoder.encode([QUERY], prompt_name="document", normalize_embeddings=False)
    np.testing.assert_allclose(documents[0], expected[1], atol=ATOL, rtol=0)


def test_a_cut_input_keeps_its_eos_as_the_pooled_token(qwen3):
    """Cut at Lt = Lo: the first Lo - 1 tokens and <|endoftext|>, whose state is the vector."""
    tokenizer = AutoTokenizer.from_pretrained(qwen3)
    model = AutoModel.from_pretrained(qwen3).eval()
    ids = tokenizer(LONG)["input_ids"]
    eos = tokenizer.convert_tokens_to_ids(QWEN3_EOS)
    assert len(ids) > LO and ids[-1] == eos
    expected = last_state(model, ids[: LO - 1] + [eos])
    without_eos = last_state(model, ids[:LO])
    assert np.abs(expected - without_eos).max() > 1e-3
    encoder = load_encoder(qwen3, method="truncate")
    with pytest.warns(UserWarning, match="truncated"):
        got, stats = encoder.encode([LONG], normalize_embeddings=False, return_stats=True)
    np.testing.assert_allclose(got[0], expected, atol=ATOL, rtol=0)
    assert stats.truncated_indices == [0]


# ----------------------------------------------------------------------------- beyond the window
SHARPEN = 4.0


@pytest.fixture(scope="module")
def sharp_qwen3(tiny_models, tmp_path_factory):
    """A copy with q/k RMSNorm weights x4 (Qwen3 normalizes q and k after projecting them, so the
    projections cannot sharpen it): positions then move the pooled vector well above the tolerance."""
    folder = tmp_path_factory.mktemp("sharp-qwen3") / "qwen3"
    shutil.copytree(tiny_models["qwen3"], folder)
    model = AutoModel.from_pretrained(folder)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.mul_(SHARPEN)
    model.save_pretrained(folder)
    return folder


def reference_vectors(folder, model, **forward_kwargs) -> np.ndarray:
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return np.stack([last_state(model, tokenizer(t)["input_ids"], **forward_kwargs) for t in TEXTS])


def check_rope_method(folder, method: str, reference: torch.nn.Module, **options) -> None:
    """longembed's ``method`` (s = 4 on every input) equals ``reference`` run with positions 0..n-1,
    and the reference differs from the unmodified model."""
    expected = reference_vectors(folder, reference)
    unmodified = reference_vectors(folder, AutoModel.from_pretrained(folder).eval())
    assert np.abs(expected - unmodified).max() > 1e-3, "the reference is the unmodified model"
    got = raw(folder, method, max_length=LT, apply_to="all", **options)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


def test_pi_equals_hugging_face_linear_rope(sharp_qwen3):
    check_rope_method(sharp_qwen3, "pi", rope_variant(sharp_qwen3, rope_type="linear", factor=float(S)))


def test_ntk_equals_a_larger_rope_theta(sharp_qwen3):
    """Static NTK: rope_theta x lambda(s) (Table 6: s = 4 -> 5)."""
    reference = rope_variant(sharp_qwen3, rope_theta=rope_theta(sharp_qwen3) * ntk_lambda(S))
    check_rope_method(sharp_qwen3, "ntk", reference)


def test_yarn_equals_hugging_face_yarn_rope(sharp_qwen3):
    reference = rope_variant(
        sharp_qwen3,
        rope_type="yarn",
        factor=float(S),
        original_max_position_embeddings=LO,
        rope_theta=rope_theta(sharp_qwen3),
    )
    check_rope_method(sharp_qwen3, "yarn", reference)


def test_dynamic_ntk_equals_hugging_face_dynamic_rope(sharp_qwen3):
    """Dynamic NTK equals transformers' `dynamic` rope type run on one text at a time (a fresh model
    per text: HF's base follows the longest input seen) with the same factor F; the short input is the
    unmodified model."""
    factor = 3.0
    tokenizer = AutoTokenizer.from_pretrained(sharp_qwen3)
    expected = []
    for text in TEXTS:
        reference = rope_variant(sharp_qwen3, rope_type="dynamic", factor=factor)
        expected.append(last_state(reference, tokenizer(text)["input_ids"]))
    unmodified = reference_vectors(sharp_qwen3, AutoModel.from_pretrained(sharp_qwen3).eval())
    assert np.abs(expected[0] - unmodified[0]).max() > 1e-3
    got = raw(sharp_qwen3, "ntk", max_length=LT, ntk_variant="dynamic", ntk_factor=factor)
    np.testing.assert_allclose(got, np.stack(expected), atol=ATOL, rtol=0)
    np.testing.assert_allclose(got[1], unmodified[1], atol=ATOL, rtol=0)


def test_selfextend_equals_naive_causal_attention_on_relative_positions(sharp_qwen3):
    """SelfExtend (Table 6 at s = 4: g = 5, w = Lo / 4) equals a naive causal SelfExtend attention."""
    g, w = selfextend_defaults(S, LO)
    tokenizer = AutoTokenizer.from_pretrained(sharp_qwen3)
    config = AutoConfig.from_pretrained(sharp_qwen3)
    inv_freq = 1.0 / rope_theta(sharp_qwen3) ** (
        torch.arange(0, config.head_dim, 2).float() / config.head_dim
    )
    expected = []
    for text in TEXTS:
        ids = tokenizer(text)["input_ids"]
        name = f"naive-selfextend-qwen3-{len(ids)}-{g}-{w}"
        AttentionInterface.register(
            name, naive_selfextend(selfextend_relative(len(ids), g, w), inv_freq, causal=True)
        )
        model = AutoModel.from_pretrained(sharp_qwen3).eval()
        model.set_attn_implementation(name)
        expected.append(last_state(model, ids, position_ids=torch.zeros(1, len(ids), dtype=torch.long)))
    unmodified = reference_vectors(sharp_qwen3, AutoModel.from_pretrained(sharp_qwen3).eval())
    assert np.abs(expected[0] - unmodified[0]).max() > 1e-3
    got = raw(sharp_qwen3, "selfextend", max_length=LT, apply_to="all")
    np.testing.assert_allclose(got, np.stack(expected), atol=ATOL, rtol=0)


def test_pcw_equals_the_mean_of_end_aligned_windows_each_closed_by_eos(sharp_qwen3):
    """PCW equals the mean over Lo-token windows (prompt, content, <|endoftext|>; the last end-aligned)
    of the plain model's last state: every window is pooled at its own EOS."""
    tokenizer = AutoTokenizer.from_pretrained(sharp_qwen3)
    model = AutoModel.from_pretrained(sharp_qwen3).eval()
    prompt_ids = tokenizer(QWEN3_QUERY_PROMPT, add_special_tokens=False)["input_ids"]
    expected = []
    for text in TEXTS:
        ids = tokenizer(QWEN3_QUERY_PROMPT + text)["input_ids"]
        assert ids[: len(prompt_ids)] == prompt_ids
        content = ids[len(prompt_ids) : -1]
        room = LO - 1 - len(prompt_ids)
        starts = list(range(0, max(len(content) - room, 0), room)) + [max(len(content) - room, 0)]
        windows = [prompt_ids + content[a : a + room] + ids[-1:] for a in starts]
        assert all(len(x) <= LO for x in windows) and len(windows) > 1
        expected.append(np.mean([last_state(model, x) for x in windows], axis=0))
    got = load_encoder(sharp_qwen3, method="pcw", max_length=LT).encode(
        TEXTS, prompt_name="query", normalize_embeddings=False
    )
    np.testing.assert_allclose(got, np.stack(expected), atol=ATOL, rtol=0)


# ----------------------------------------------------------------------------- export
@pytest.mark.parametrize(("method", "options"), [("pi", {}), ("ntk", {}), ("yarn", {})])
def test_export_gives_longembeds_vectors_in_sentence_transformers(sharp_qwen3, tmp_path, method, options):
    """An exported PI / NTK / YaRN folder read by sentence-transformers (left padding, lasttoken pooling)
    gives longembed's vectors for inputs beyond Lo, the query prompt included, and cuts a too-long
    input as longembed does (its EOS kept)."""
    sentence_transformers = require_package("sentence_transformers")

    folder = export_model(sharp_qwen3, method, LT, tmp_path / method, **options)
    plain = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    assert plain.tokenizer.padding_side == "left" and plain.max_seq_length == LT
    texts = [words(90, seed=37), words(120, seed=38)]
    encoder = load_encoder(sharp_qwen3, method=method, max_length=LT, **options)
    np.testing.assert_allclose(plain.encode(texts), encoder.encode(texts), atol=ATOL, rtol=0)
    with pytest.warns(UserWarning, match="truncated"):  # prompt + 120 words > Lt: both cut, keeping EOS
        queries = encoder.encode(texts, prompt_name="query")
    np.testing.assert_allclose(plain.encode(texts, prompt_name="query"), queries, atol=ATOL, rtol=0)


def test_a_right_padding_tokenizer_gives_the_same_vectors(qwen3, tmp_path):
    """The encoder pads batches itself, so the tokenizer's padding_side does not change a vector."""
    folder = tmp_path / "right"
    shutil.copytree(qwen3, folder)
    qwen3_tokenizer(padding_side="right").save_pretrained(folder)
    assert AutoTokenizer.from_pretrained(folder).padding_side == "right"
    texts = WITHIN + TEXTS
    options = dict(method="yarn", max_length=LT)
    np.testing.assert_array_equal(raw(folder, texts=texts, **options), raw(qwen3, texts=texts, **options))


# ----------------------------------------------------------------------------- serving
def test_the_server_embeds_queries_and_cuts_to_the_window_keeping_eos(qwen3):
    """The OpenAI route: prompt_name="query" as encode's; overflow "truncate" cuts at Lo as the plain
    model's tokenizer does (the first Lo - 1 tokens and <|endoftext|>)."""
    encoder = load_encoder(qwen3, method="yarn", max_length=LT)
    tokenizer = AutoTokenizer.from_pretrained(qwen3)
    ids = tokenizer(LONG)["input_ids"]
    cut = last_state(AutoModel.from_pretrained(qwen3).eval(), ids[: LO - 1] + ids[-1:])
    with TestClient(create_app(encoder, ServerSettings(allowed_hosts=("testserver",)))) as http:
        queries = http.post(
            "/v1/embeddings", json={"model": "m", "input": [QUERY, LONG], "prompt_name": "query"}
        )
        truncated = http.post("/v1/embeddings", json={"model": "m", "input": LONG, "overflow": "truncate"})
    assert queries.status_code == 200 and truncated.status_code == 200, (queries.text, truncated.text)
    got = np.array([d["embedding"] for d in queries.json()["data"]], dtype=np.float32)
    np.testing.assert_allclose(got, encoder.encode([QUERY, LONG], prompt_name="query"), atol=1e-6, rtol=0)
    vector = np.array(truncated.json()["data"][0]["embedding"], dtype=np.float32)
    np.testing.assert_allclose(vector, cut / np.linalg.norm(cut), atol=ATOL, rtol=0)
