"""The mteb and LangChain adapters on the real all-MiniLM-L6-v2: their vectors are ``encode``'s with the
right prompts, and mteb scores a local task as longembed's own benchmark does."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import DATA_DIR, load_benchmark_script, real_model_folder, require_data, require_package
from encoder_fakes import FakeEncoderMembers

from longembed import load_encoder
from longembed.encoder_protocol import retrieval_prompts as prompts_by_role
from longembed.integrations import INSTALL_HINT, retrieval_prompts

require_package("langchain_core")  # packages of the test extra: fail under CI, skipped elsewhere

from langchain_core.documents import Document  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402

from longembed.integrations.langchain import LongEmbedEmbeddings, add_chunks  # noqa: E402

pytestmark = pytest.mark.slow

PROMPTS = {"query": "q: ", "document": "d: "}
QUERIES = ["Who founded the company?", "What is the capital of France?"]
# Documents beyond MiniLM's 512 tokens, so the pi extension acts on them.
DOCUMENTS = [
    " ".join(f"Paragraph {i} of the report covers quarter {i % 4} results in detail." for i in range(45)),
    "Paris is the capital and largest city of France.",
    "The company was founded in 1998 by two students.",
]


@pytest.fixture(scope="module")
def plain():
    """MiniLM under pi at 2048 tokens: its folder's prompts are empty."""
    return load_encoder(real_model_folder("all-MiniLM-L6-v2"), method="pi", max_length=2048)


@pytest.fixture(scope="module")
def prompted():
    """The same, with query and document prompts (as nomic and E5 have)."""
    return load_encoder(real_model_folder("all-MiniLM-L6-v2"), method="pi", max_length=2048, prompts=PROMPTS)


@pytest.fixture(scope="module")
def mteb_api() -> SimpleNamespace:
    """mteb and longembed's adapter, imported by the tests that use them: importing mteb costs seconds of
    CPU, which every pytest-xdist worker would pay while collecting, in the fast tier too (whose run
    deselects every test here)."""
    mteb = require_package("mteb")
    adapter = importlib.import_module("longembed.integrations.mteb")
    return SimpleNamespace(mteb=mteb, PromptType=importlib.import_module("mteb.types").PromptType,
                           Model=adapter.LongEmbedMTEBModel, model_meta=adapter.model_meta,
                           retrieval_task=adapter.retrieval_task)


def batches(texts: list[str], size: int = 2) -> list[dict[str, list[str]]]:
    """What mteb hands ``encode``: batches of ``{"text": [...]}``."""
    return [{"text": texts[i : i + size]} for i in range(0, len(texts), size)]


def mteb_encode(api: SimpleNamespace, model, texts: list[str], prompt_type) -> np.ndarray:
    """``model.encode`` as mteb calls it (``model`` an adapter, ``prompt_type`` a ``PromptType`` or None)."""
    task = api.retrieval_task("tiny", {"d": "doc"}, {"q": "query"}, {"q": {"d": 1}})
    return model.encode(batches(texts), task_metadata=task.metadata, hf_split="test", hf_subset="default",
                        prompt_type=prompt_type, batch_size=2)


# ----------------------------------------------------------------------------- mteb adapter
def test_mteb_vectors_are_encode_with_the_side_prompt(prompted, mteb_api):
    model = mteb_api.Model(prompted)
    assert isinstance(model, mteb_api.mteb.models.EncoderProtocol)
    queries = mteb_encode(mteb_api, model, QUERIES, mteb_api.PromptType.query)
    documents = mteb_encode(mteb_api, model, DOCUMENTS, mteb_api.PromptType.document)
    assert queries.dtype == np.float32 and documents.shape == (3, 384)
    np.testing.assert_allclose(queries, prompted.encode(QUERIES, prompt_name="query"), atol=1e-6, rtol=0)
    np.testing.assert_allclose(documents, prompted.encode(DOCUMENTS, prompt_name="document"), atol=1e-6, rtol=0)
    # the prompts change the vectors, so the checks above tell the sides apart
    assert np.abs(queries - prompted.encode(QUERIES, prompt_name="document")).max() > 1e-3
    np.testing.assert_allclose(mteb_encode(mteb_api, model, QUERIES, None), prompted.encode(QUERIES), atol=1e-6,
                               rtol=0)


def test_mteb_without_model_prompts_adds_none(plain, mteb_api):
    model = mteb_api.Model(plain)
    texts = QUERIES + DOCUMENTS[1:]
    expected = plain.encode(texts)
    for side in (mteb_api.PromptType.document, mteb_api.PromptType.query):
        np.testing.assert_allclose(mteb_encode(mteb_api, model, texts, side), expected, atol=1e-6, rtol=0)


def test_document_prompt_falls_back_to_passage_as_e5_names_it():
    e5 = {"query": "query: ", "passage": "passage: "}
    assert prompts_by_role(e5) == {"query": "query: ", "document": "passage: "}
    assert prompts_by_role({"document": "d: ", "passage": "p: "}) == {"query": "", "document": "d: "}
    assert prompts_by_role({}) == {"query": "", "document": ""}
    fake = FakeEncoderMembers()
    fake.prompts = e5
    assert retrieval_prompts(fake) == {"query": "query: ", "document": "passage: "}  # the encoder's own choice


def test_model_meta_names_the_configuration_and_reloads_it(prompted, mteb_api):
    meta = mteb_api.model_meta(prompted)
    assert meta.name == "longembed/all-MiniLM-L6-v2-pi-2048"
    assert meta.revision and meta.embed_dim == 384 and meta.max_tokens == 2048
    assert meta.similarity_fn_name.value == "cosine" and meta.use_instructions
    assert meta.experiment_kwargs == {"prompts": PROMPTS}
    reloaded = meta.load_model()
    assert isinstance(reloaded, mteb_api.Model)
    assert reloaded.encoder.config.to_dict() == {**prompted.config.to_dict(), "model": meta.loader_kwargs["model"]}
    np.testing.assert_allclose(reloaded.encoder.encode(QUERIES, prompt_name="query"),
                               prompted.encode(QUERIES, prompt_name="query"), atol=1e-6, rtol=0)


def test_mteb_refuses_quantized_output(plain, mteb_api):
    with pytest.raises(ValueError, match="float32"):
        mteb_api.Model(plain).encode(batches(QUERIES), task_metadata=None, hf_split="test",
                                     hf_subset="default", precision="int8")


def test_retrieval_task_rejects_unknown_judged_documents(mteb_api):
    with pytest.raises(ValueError, match="unknown"):
        mteb_api.retrieval_task("bad", {"d1": "text"}, {"q1": "query"}, {"q1": {"d2": 1}})


def test_mteb_and_longembed_agree_on_needle(prompted, mteb_api, tmp_path, monkeypatch):
    """The issue's check: same model, method and data, nDCG@10 within 0.1 points."""
    require_data("paul_graham_essays")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    agreement_script = load_benchmark_script("mteb_agreement")

    # the first 40 of the 100 documents (and the queries they answer) keep the test quick
    agreement = agreement_script.compare(prompted, "needle", 256, DATA_DIR, tmp_path, max_documents=40)
    print(agreement.summary())
    assert agreement.documents == 40 and agreement.queries >= 10
    assert 50 < agreement.longembed <= 100  # a real score, not a degenerate one
    assert agreement.difference <= agreement_script.TOLERANCE
    saved = list((tmp_path / "mteb").rglob("longembed-needle-256.json"))  # mteb filed it under our name
    assert len(saved) == 1 and "longembed__all-MiniLM-L6-v2-pi-2048" in saved[0].parts


# ----------------------------------------------------------------------------- LangChain adapter
def test_langchain_vectors_are_encode_with_the_side_prompt(prompted):
    embeddings = LongEmbedEmbeddings(prompted, batch_size=2)
    documents = embeddings.embed_documents(DOCUMENTS)
    query = embeddings.embed_query(QUERIES[0])
    assert isinstance(documents, list) and len(documents) == 3 and all(len(v) == 384 for v in documents)
    assert all(type(x) is float for v in documents for x in v) and all(type(x) is float for x in query)
    np.testing.assert_allclose(np.asarray(documents), prompted.encode(DOCUMENTS, prompt_name="document"),
                               atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.asarray(query), prompted.encode(QUERIES[0], prompt_name="query"),
                               atol=1e-6, rtol=0)
    assert embeddings.embed_documents([]) == []


def test_langchain_rejects_what_is_not_text(prompted):
    embeddings = LongEmbedEmbeddings(prompted)
    with pytest.raises(TypeError, match="list of strings"):
        embeddings.embed_documents("one string is not a list of documents")
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        embeddings.embed_documents(["fine", 3])
    with pytest.raises(TypeError, match="one string"):
        embeddings.embed_query(["a list"])
    with pytest.raises(ValueError, match="empty"):
        embeddings.embed_documents(["  "])
    with pytest.raises(ValueError, match="batch_size"):
        LongEmbedEmbeddings(prompted, batch_size=0)


def test_langchain_chunk_documents_are_encode_chunks_with_spans_in_metadata(prompted):
    embeddings = LongEmbedEmbeddings(prompted, batch_size=2)
    texts = DOCUMENTS[:2]
    documents, vectors = embeddings.chunk_documents(texts, chunking="tokens:128", metadatas=[{"source": "a"}, {}])
    expected = prompted.encode_chunks(texts, chunking="tokens:128", late=True, prompt_name="document")
    assert len(documents) == len(vectors) == sum(len(spans) for _, spans in expected) > 2
    k = 0
    for i, (text, (text_vectors, spans)) in enumerate(zip(texts, expected, strict=True)):
        for vector, (start, end) in zip(text_vectors, spans, strict=True):
            document = documents[k]
            assert document.page_content == text[start:end]
            assert document.metadata == {**({"source": "a"} if i == 0 else {}), "text_index": i, "start": start, "end": end}
            np.testing.assert_allclose(np.asarray(vectors[k]), vector, atol=1e-6, rtol=0)
            k += 1
    assert all(type(x) is float for x in vectors[0])
    naive, naive_vectors = embeddings.chunk_documents(texts[:1], chunking="sentences:3", late=False)
    (reference, spans), = prompted.encode_chunks(texts[:1], chunking="sentences:3", late=False, prompt_name="document")
    np.testing.assert_allclose(np.asarray(naive_vectors), reference, atol=1e-6, rtol=0)
    assert [(d.metadata["start"], d.metadata["end"]) for d in naive] == spans
    with pytest.raises(ValueError, match="one per text"):
        embeddings.chunk_documents(texts, metadatas=[{}])


def test_add_chunks_keeps_the_late_chunk_vectors_in_an_in_memory_store(prompted):
    # The recipe that once failed: InMemoryVectorStore has no add_embeddings.  The stored vectors must be the
    # late chunk vectors, not the chunk texts embedded again (naive chunking), and each must find its chunk.
    embeddings = LongEmbedEmbeddings(prompted, batch_size=2)
    documents, vectors = embeddings.chunk_documents(DOCUMENTS[:1], chunking="tokens:128")
    store = InMemoryVectorStore(embeddings)
    ids = add_chunks(store, documents, vectors)
    assert len(ids) == len(set(ids)) == len(documents) > 2
    for doc_id, document, vector in zip(ids, documents, vectors, strict=True):
        (found,) = store.get_by_ids([doc_id])
        assert found.page_content == document.page_content and found.metadata == document.metadata
        np.testing.assert_array_equal(np.asarray(store.store[doc_id]["vector"]), np.asarray(vector))
        (best, _), = store.similarity_search_with_score_by_vector(vector, k=1)
        assert best.metadata["start"] == document.metadata["start"]
    naive = embeddings.embed_documents([d.page_content for d in documents])
    assert not np.allclose(np.asarray(naive), np.asarray(vectors), atol=1e-4)  # late != each chunk alone


def test_add_chunks_writes_the_records_add_documents_writes(prompted):
    # add_chunks fills InMemoryVectorStore's store with records of the shape its own add_documents writes:
    # if langchain_core changes that shape, this fails rather than the store silently missing fields.
    embeddings = LongEmbedEmbeddings(prompted, batch_size=2)
    document = Document("Paris is the capital of France.", metadata={"source": "x"})
    reference = InMemoryVectorStore(embeddings)
    (ref_id,) = reference.add_documents([document], ids=["a"])
    ours = InMemoryVectorStore(embeddings)
    (our_id,) = add_chunks(ours, [document], [reference.store["a"]["vector"]], ids=["a"])
    assert ref_id == our_id == "a"
    assert ours.store == reference.store


def test_add_chunks_uses_add_embeddings_where_the_store_has_it():
    class EmbeddingsStore:  # FAISS's and PGVector's signature
        def add_embeddings(self, text_embeddings, metadatas=None, ids=None, **kwargs):
            self.received = (list(text_embeddings), metadatas, ids)
            return ids or ["0", "1"]

    store = EmbeddingsStore()
    documents = [Document("a", metadata={"start": 0}), Document("b", metadata={"start": 1})]
    assert add_chunks(store, documents, [[1.0, 0.0], [0.0, 1.0]]) == ["0", "1"]
    assert store.received == ([("a", [1.0, 0.0]), ("b", [0.0, 1.0])], [{"start": 0}, {"start": 1}], None)


def test_add_chunks_refuses_mismatched_lists_and_stores_without_vectors():
    with pytest.raises(ValueError, match="2 documents, 1 vectors"):
        add_chunks(InMemoryVectorStore(None), [Document("a"), Document("b")], [[1.0]])
    with pytest.raises(TypeError, match="no add_embeddings"):
        add_chunks(object(), [Document("a")], [[1.0]])


# ----------------------------------------------------------------------------- missing extras
@pytest.mark.parametrize(("module", "missing"), [("mteb", "mteb"), ("langchain", "langchain_core")])
def test_missing_extra_names_the_install_command(module, missing, monkeypatch):
    importlib.import_module(f"longembed.integrations.{module}")  # loaded with its library, then both hidden
    for name in [n for n in sys.modules if n == missing or n.startswith(f"{missing}.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, f"longembed.integrations.{module}")
    with pytest.raises(ImportError, match=r'pip install "longembed\[integrations\]"'):
        importlib.import_module(f"longembed.integrations.{module}")
    assert INSTALL_HINT == 'pip install "longembed[integrations]"'
