"""encode_query / encode_document on the real checkpoints: the model's own query / document prompt,
as sentence-transformers' methods of the same names choose it.

References: ``encode`` with the prompt text given literally (e5 "query: " / "passage: ", nomic
"search_query: " / "search_document: ", MiniLM none), and sentence-transformers' own
``encode_query`` / ``encode_document`` on the same folder (e5, MiniLM; nomic needs remote code).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import real_model_folder, require_package

from longembed import load_encoder
from longembed.encoder_protocol import retrieval_prompts, role_prompt_name

pytestmark = pytest.mark.slow

TEXTS = ["How do tides form?", "Tides are caused by the gravity of the moon and the sun acting on the oceans."]
PROMPTS = {
    "multilingual-e5-small": ("query: ", "passage: "),
    "nomic-embed-text-v1.5": ("search_query: ", "search_document: "),
    "all-MiniLM-L6-v2": ("", ""),
}


@pytest.fixture(scope="module", params=sorted(PROMPTS))
def model(request):
    folder = real_model_folder(request.param)
    options = {"original_length": 128} if request.param.startswith("nomic") else {}
    return request.param, folder, load_encoder(folder, method="truncate", **options)


def test_roles_take_the_models_prompts(model):
    name, _, encoder = model
    query_prompt, document_prompt = PROMPTS[name]
    np.testing.assert_array_equal(encoder.encode_query(TEXTS), encoder.encode(TEXTS, prompt=query_prompt))
    np.testing.assert_array_equal(encoder.encode_document(TEXTS), encoder.encode(TEXTS, prompt=document_prompt))
    single = encoder.encode_query(TEXTS[0])
    assert single.shape == (encoder.embedding_dim,)
    np.testing.assert_array_equal(single, encoder.encode(TEXTS[0], prompt=query_prompt))
    if query_prompt:  # the prompt changes the vector: the test above would catch a missing prompt
        assert not np.allclose(encoder.encode_query(TEXTS), encoder.encode(TEXTS), atol=1e-4)


def test_explicit_prompt_wins(model):
    _, _, encoder = model
    np.testing.assert_array_equal(encoder.encode_query(TEXTS, prompt="x: "), encoder.encode(TEXTS, prompt="x: "))
    np.testing.assert_array_equal(encoder.encode_document(TEXTS, prompt=""), encoder.encode(TEXTS))
    if encoder.prompts:
        name = next(iter(encoder.prompts))
        np.testing.assert_array_equal(
            encoder.encode_document(TEXTS, prompt_name=name), encoder.encode(TEXTS, prompt=encoder.prompts[name])
        )


def test_keyword_arguments_pass_through(model):
    _, _, encoder = model
    raw = encoder.encode_document(TEXTS, normalize_embeddings=False, batch_size=1)
    np.testing.assert_array_equal(raw, encoder.encode(TEXTS, prompt=PROMPTS[model[0]][1], normalize_embeddings=False))


@pytest.mark.parametrize("name", ["multilingual-e5-small", "all-MiniLM-L6-v2"])
def test_equal_to_sentence_transformers(name):
    st = require_package("sentence_transformers")
    folder = real_model_folder(name)
    reference = st.SentenceTransformer(str(folder), device="cpu")
    encoder = load_encoder(folder, method="truncate")
    np.testing.assert_allclose(encoder.encode_query(TEXTS), reference.encode_query(TEXTS), atol=1e-5, rtol=0)
    # sentence-transformers >= 6 adds an empty "document" prompt to a model that has none, so its
    # encode_document drops e5's "passage: " (5.x chose "passage"); longembed keeps the model's prompt,
    # as its benchmark always embedded e5's documents
    documents = reference.encode(TEXTS, prompt_name="passage") if "passage" in encoder.prompts else (
        reference.encode_document(TEXTS))
    np.testing.assert_allclose(encoder.encode_document(TEXTS), documents, atol=1e-5, rtol=0)


def test_role_prompt_names_follow_sentence_transformers():
    # encode_document's candidates, in order: "document", "passage", "corpus"
    assert role_prompt_name({"passage": "p", "corpus": "c"}, "document") == "passage"
    assert role_prompt_name({"corpus": "c", "query": "q"}, "document") == "corpus"
    assert role_prompt_name({"document": "d", "passage": "p"}, "document") == "document"
    assert role_prompt_name({"document": "d"}, "query") is None
    assert retrieval_prompts({"corpus": "c: "}) == {"query": "", "document": "c: "}
