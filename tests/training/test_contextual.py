"""``longembed train contextual``: late-chunking fine-tuning with in-sequence negatives (InSeNT).

References are written here, apart from the code under test: the loss as a loop of plain softmaxes, late
chunking as ``encode_chunks(late=True)`` of the saved folder, the documents against the SQuAD file they come
from.  Models are tiny (hidden 32, 2 layers, Lo = 32, PI to 128) and built here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import DATA_DIR, VOCAB, require_data, words
from safetensors.torch import load_file
from transformers import BertConfig, BertModel, BertTokenizer, TrainerCallback

from longembed import load_encoder
from longembed.advice import advise
from longembed.advice.spec import AdviseSpec
from longembed.cli.main import build_parser, main
from longembed.cli.options import settings_from_args
from longembed.loading import default_method
from longembed.results import RunResults
from longembed.tasks import RetrievalData, get_task, write_task_dir
from longembed.training.contextual import (
    RECORD_FILE,
    ContextualConfig,
    QueryTarget,
    insent_loss,
    train_contextual,
)
from longembed.training.contextual.data import (
    SEPARATOR,
    RawDocument,
    hotpotqa_documents,
    pack_documents,
    plan_steps,
    squad_documents,
)
from longembed.training.contextual.targets import check_disk
from longembed.training.contrastive import SentenceTransformer

LO = 32


def tiny_bert(dropout: float, seed: int = 0) -> BertModel:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=LO, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    return BertModel(config, add_pooling_layer=False).eval()


def save_model(folder: Path, dropout: float = 0.1) -> Path:
    """A sentence-transformers folder laid out like all-MiniLM-L6-v2's (mean pooling, normalization)."""
    folder.mkdir(parents=True, exist_ok=True)
    BertTokenizer(vocab={piece: i for i, piece in enumerate(VOCAB)}).save_pretrained(folder)
    tiny_bert(dropout).save_pretrained(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                                  "pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": LO, "do_lower_case": False}))
    return folder


def tiny_squad(folder: Path, articles: int = 6, paragraphs: int = 5) -> Path:
    """A SQuAD-format file of the tiny vocabulary: paragraphs of 12 words, two questions each (and one
    unanswerable question per article)."""
    data = []
    for a in range(articles):
        ps = []
        for p in range(paragraphs):
            seed = 100 * a + p
            qas = [{"id": f"{seed}-{q}", "question": words(4, 5000 + 2 * seed + q), "is_impossible": False,
                    "answers": []} for q in range(2)]
            if p == 0:
                qas.append({"id": f"{seed}-x", "question": words(4, 9999 - seed), "is_impossible": True, "answers": []})
            ps.append({"context": words(12, 3000 + seed), "qas": qas})
        data.append({"title": f"article {a}", "paragraphs": ps})
    (folder / "squad").mkdir(parents=True, exist_ok=True)
    (folder / "squad" / "dev-v2.0.json").write_text(json.dumps({"version": "v2.0", "data": data}))
    return folder


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    return save_model(tmp_path_factory.mktemp("model") / "tiny")


@pytest.fixture(scope="module")
def quiet_model_folder(tmp_path_factory) -> Path:
    """The same model without dropout: a training step's forward is then the original model's exactly."""
    return save_model(tmp_path_factory.mktemp("model") / "quiet", dropout=0.0)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tiny_squad(tmp_path_factory.mktemp("data"))


#: A short run: PI to 128 tokens, documents of at most 64 tokens, 6 steps of 2 documents.
SHORT = dict(method="pi", max_length=128, doc_tokens=64, max_steps=6, documents_per_step=2, queries_per_document=3,
             learning_rate=3e-3, warmup_steps=1, save_steps=2, logging_steps=1, held_out_articles=1, device="cpu",
             show_progress=False, sources=("squad",))


# ---------------------------------------------------------------- the loss against a plain loop


def reference_insent(queries, chunks, targets, tau, w):
    """The loss as plain softmaxes, one (query, positive) at a time."""
    def cos(a, b):
        return float(a @ b / (a.norm() * b.norm()))
    seq_terms, batch_terms = [], []
    for q, t in zip(queries, targets, strict=True):
        for p in t.positives:
            pos = math.exp(cos(q, chunks[t.document][p]) / tau)
            own = [math.exp(cos(q, c) / tau) for k, c in enumerate(chunks[t.document])
                   if k == p or k not in t.positives]
            other = [math.exp(cos(q, c) / tau) for d, cs in enumerate(chunks) if d != t.document for c in cs]
            seq_terms.append(-math.log(pos / sum(own)))
            batch_terms.append(-math.log(pos / (pos + sum(other))))
    return w * np.mean(seq_terms) + (1 - w) * np.mean(batch_terms), np.mean(seq_terms), np.mean(batch_terms)


def test_insent_loss_is_weighted_in_sequence_plus_in_batch_infonce() -> None:
    g = torch.Generator().manual_seed(0)
    chunks = [torch.randn(3, 8, generator=g), torch.randn(4, 8, generator=g), torch.randn(2, 8, generator=g)]
    queries = torch.randn(4, 8, generator=g)
    targets = [QueryTarget(0, (1,)), QueryTarget(1, (0, 3)), QueryTarget(2, (1,)), QueryTarget(1, (2,))]
    loss, parts = insent_loss(queries, chunks, targets, temperature=0.1, in_sequence_weight=0.3)
    want, seq, batch = reference_insent(queries, chunks, targets, 0.1, 0.3)
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert float(parts["in_sequence_loss"]) == pytest.approx(seq, rel=1e-5)
    assert float(parts["in_batch_loss"]) == pytest.approx(batch, rel=1e-5)


# ---------------------------------------------------------------- the documents


def test_squad_articles_become_chunked_documents_packed_to_the_budget(data_dir: Path) -> None:
    raw, counts = squad_documents(data_dir, ["article 1"])
    assert counts == {"articles": 5, "held_out_articles": 1, "unanswerable questions": 5}
    assert [d.group for d in raw] == [f"squad:article {a}" for a in (0, 2, 3, 4, 5)]
    squad = json.loads((data_dir / "squad" / "dev-v2.0.json").read_text())["data"]
    assert raw[0].chunks == [p["context"] for p in squad[0]["paragraphs"]]
    assert raw[0].queries[0] == [q["question"] for q in squad[0]["paragraphs"][0]["qas"][:2]]
    sizes = [[12, 12, 40, 12, 12]] + [[12] * 5] * 4
    docs, packing = pack_documents(raw, sizes, budget=30, chunk_limit=30)
    assert packing["chunks longer than the window"] == 1  # the 40-token paragraph of article 0
    first = [d for d in docs if d.group == "squad:article 0"]
    assert [len(d.chunks) for d in first] == [2, 2]  # 12 + 1 + 12 = 25 <= 30; a third would pass it
    assert first[1].chunks == (raw[0].chunks[3], raw[0].chunks[4])
    assert first[1].queries[2] == (raw[0].queries[4][0], (1,))
    assert first[0].text[slice(*first[0].spans()[1])] == first[0].chunks[1]
    assert SEPARATOR.join(first[0].chunks) == first[0].text


def test_hotpotqa_texts_drop_distractors_from_the_end_to_fit() -> None:
    doc = RawDocument(["a", "b", "c", "d"], [[], ["q"], [], ["q"]], "hotpotqa:1", splittable=False)
    docs, counts = pack_documents([doc], [[5, 5, 5, 5]], budget=16, chunk_limit=10)
    assert counts["distractors cut to fit"] == 2 and docs[0].chunks == ("b", "d")
    assert docs[0].queries == (("q", (0, 1)),)  # one question, both supporting passages positive
    docs, counts = pack_documents([doc], [[5, 5, 5, 5]], budget=8, chunk_limit=10)
    assert docs == [] and counts["questions whose passages exceed the budget"] == 1


def test_steps_hold_distinct_documents_and_every_document_each_epoch() -> None:
    raw = [RawDocument([f"c{i}"], [[f"q{i}"]], f"g{i}", True) for i in range(5)]
    docs, _ = pack_documents(raw, [[1]] * 5, 10, 10)
    plan = plan_steps(docs, steps=5, per_step=2, queries_per_document=1, seed=0)
    assert all(len({item.document for item in step}) == 2 for step in plan)
    seen = [item.document for step in plan for item in step]
    assert sorted(seen[:5]) == list(range(5))  # the first epoch covers every document once
    assert plan == plan_steps(docs, 5, 2, 1, seed=0) and plan != plan_steps(docs, 5, 2, 1, seed=1)


def test_a_squad_share_mixes_the_sources_in_that_proportion() -> None:
    raw = [RawDocument([f"c{i}"], [[f"q{i}"]], f"squad:{i}" if i < 3 else f"hotpotqa:{i}", True) for i in range(60)]
    docs, _ = pack_documents(raw, [[1]] * 60, 10, 10)
    plan = plan_steps(docs, steps=400, per_step=4, queries_per_document=1, seed=0, squad_share=0.5)
    squad = [item.document < 3 for step in plan for item in step]
    assert all(len({item.document for item in step}) == 4 for step in plan)
    assert abs(np.mean(squad) - 0.5) < 0.05  # three SQuAD documents, each back again and again
    none = plan_steps(docs, steps=400, per_step=4, queries_per_document=1, seed=0, squad_share=0.0)
    assert not any(item.document < 3 for step in none for item in step)


# ---------------------------------------------------------------- training, resume, the folder


class Killed(Exception):
    pass


class KillAt(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Killed()


@pytest.mark.slow
def test_a_run_lowers_the_loss_and_the_folder_opens_everywhere(
    tmp_path: Path, quiet_model_folder: Path, data_dir: Path
) -> None:
    model_folder = quiet_model_folder
    result = train_contextual(model_folder, tmp_path / "out", data_dir=data_dir, **{**SHORT, "max_steps": 12})
    record = json.loads((tmp_path / "out" / RECORD_FILE).read_text())
    losses = record["summary"]["losses"]
    assert len(losses) >= 12 and np.mean([v for _, v in losses[-3:]]) < np.mean([v for _, v in losses[:3]])
    # step 1: the model is still the original, and its vectors of texts alone are the cached targets
    assert record["summary"]["distill_losses"][0][1] < 1e-6
    assert record["encoder"] == {"method": "pi", "max_length": 128, "original_length": LO}
    assert record["data"]["held_out_titles"] and (tmp_path / "out" / "loss_curve.png").is_file()
    assert not (tmp_path / "out" / "checkpoints").exists()
    fidelity = record["fidelity"]  # the short-text check on the held-out article, as the retrofit scores it
    assert fidelity["articles"] == record["data"]["held_out_titles"] and fidelity["teacher"]["queries"] == 10
    assert fidelity["cosine_min"] < 1 and "ndcg@10_difference" in fidelity
    assert result.summary.steps == 12

    # load_encoder opens it with the method and Lt it was trained under; late chunks run through them
    encoder = load_encoder(result.folder)
    assert (encoder.method, encoder.max_length) == ("pi", 128) and default_method(result.folder) == "pi"
    long_text = words(90, 7)
    vectors, spans = encoder.encode_chunks([long_text], "tokens:20", late=True)[0]
    assert vectors.shape == (len(spans), 32) and len(spans) >= 4
    # sentence-transformers opens it as the original model: the trained weights, short texts alike
    st = SentenceTransformer(str(result.folder), device="cpu")
    short = words(10, 3)
    np.testing.assert_allclose(st.encode([short])[0], encoder.encode([short])[0], rtol=1e-4, atol=1e-5)
    original = load_encoder(model_folder).encode([short])[0]
    assert not np.allclose(original, encoder.encode([short])[0], atol=1e-4)  # the weights did change


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_uninterrupted_weights(tmp_path: Path, model_folder: Path, data_dir: Path) -> None:
    straight = train_contextual(model_folder, tmp_path / "straight", data_dir=data_dir, **SHORT)
    with pytest.raises(Killed):
        train_contextual(model_folder, tmp_path / "killed", data_dir=data_dir, callbacks=[KillAt(3)], **SHORT)
    assert (tmp_path / "killed" / "checkpoints" / "checkpoint-2").is_dir()
    with pytest.raises(FileExistsError, match="--resume"):
        train_contextual(model_folder, tmp_path / "killed", data_dir=data_dir, **SHORT)
    with pytest.raises(ValueError, match="different run"):
        train_contextual(model_folder, tmp_path / "killed", data_dir=data_dir, resume=True,
                         **{**SHORT, "temperature": 0.1})
    resumed = train_contextual(model_folder, tmp_path / "killed", data_dir=data_dir, resume=True, **SHORT)
    assert resumed.summary.resumed_from.endswith("checkpoint-2") and resumed.summary.steps == 6
    assert resumed.record["targets"]["computed"] is False  # the killed run's targets were reused
    a = load_file(straight.folder / "model.safetensors")  # (BertModel.from_pretrained would add a random pooler)
    b = load_file(resumed.folder / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.summary.losses == straight.summary.losses
    with pytest.raises(FileExistsError, match="finished contextual training"):
        train_contextual(model_folder, tmp_path / "killed", data_dir=data_dir, resume=True, **SHORT)


@pytest.mark.slow
def test_the_command_line_trains(tmp_path: Path, model_folder: Path, data_dir: Path, capsys) -> None:
    output = tmp_path / "cli"
    code = main(["train", "contextual", "--model", str(model_folder), "--output", str(output), "--data-dir",
                 str(data_dir), "--sources", "squad", "--method", "pi", "--max-length", "128", "--doc-tokens", "64",
                 "--max-steps", "2", "--documents-per-step", "2", "--temperature", "0.1", "--distill-weight", "0.5",
                 "--held-out-articles", "1", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((output / RECORD_FILE).read_text())
    assert record["config"]["temperature"] == 0.1 and record["config"]["distill_weight"] == 0.5
    assert record["summary"]["steps"] == 2
    assert "load_encoder" in capsys.readouterr().out
    code = main(["train", "contextual", "--model", str(model_folder), "--output", str(tmp_path / "x"), "--data-dir",
                 str(data_dir), "--sources", "squad", "--doc-tokens", "64"])
    assert code == 2 and "doc_tokens 64 is longer than one model input" in capsys.readouterr().err


# ---------------------------------------------------------------- the guard: benchmark data is never read


def test_benchmark_only_data_yields_a_clear_error_and_is_never_read(tmp_path: Path, model_folder: Path) -> None:
    """A data folder holding only QMSum, SQuALITY and the essays (files that fail if parsed) gives a
    FileNotFoundError naming the allowed training data, and nothing is written."""
    data = tmp_path / "data"
    for sub, name in (("qmsum", "test.jsonl"), ("squality", "test.jsonl"), ("paul_graham_essays", "essays.json")):
        (data / sub).mkdir(parents=True)
        (data / sub / name).write_text("{not json: a benchmark file must never be read for training\n")
    for sources in (("squad",), ("hotpotqa",)):
        with pytest.raises(FileNotFoundError, match=sources[0]):
            train_contextual(model_folder, tmp_path / "out", data_dir=data, **{**SHORT, "sources": sources})
    assert not (tmp_path / "out" / RECORD_FILE).exists()


@pytest.mark.slow
def test_hotpotqa_documents_never_hold_a_benchmark_question_or_passage() -> None:
    require_data("hotpotqa_dev_distractor")
    benchmark = get_task("hotpotqa").load(DATA_DIR)
    questions = set(benchmark.queries.values())
    passages = set()
    for document in benchmark.corpus.values():
        for passage in document.split("\nPassage "):
            _, title, text = passage.split("\n", 2)
            passages.add(f"{title}\n{text}")
    raw, counts = hotpotqa_documents(DATA_DIR)
    assert len(raw) > 3000 and counts["benchmark questions"] == len(questions)
    for doc in raw:
        assert not passages & set(doc.chunks)
        assert not questions & {q for qs in doc.queries for q in qs}


def test_the_disk_check_refuses_targets_that_do_not_fit(tmp_path: Path) -> None:
    check_disk(tmp_path / "new" / "folder", 1024, margin=0)
    with pytest.raises(OSError, match="--distill-weight 0"):
        check_disk(tmp_path / "new", 1 << 60)


def test_config_refuses_a_step_without_in_batch_negatives() -> None:
    with pytest.raises(ValueError, match="documents_per_step"):
        ContextualConfig(documents_per_step=1)
    assert ContextualConfig(documents_per_step=1, in_sequence_weight=1.0).documents_per_step == 1


# ---------------------------------------------------------------- advise measures the trained late chunks


@pytest.mark.slow
def test_advise_offers_the_trained_late_chunks(tmp_path: Path, quiet_model_folder: Path, data_dir: Path) -> None:
    trained = train_contextual(quiet_model_folder, tmp_path / "trained", data_dir=data_dir,
                               **{**SHORT, "max_steps": 2}).folder
    corpus = {f"d{j}": words(50 + j, seed=j) for j in range(12)}
    queries = {f"q{i}": " ".join(corpus[f"d{i}"].split()[5:12]) for i in range(8)}
    task = write_task_dir(RetrievalData(corpus, queries, {f"q{i}": {f"d{i}": 1} for i in range(8)}), tmp_path / "task")
    advice = advise(quiet_model_folder, max_length=64, task_dirs=[task], output_dir=tmp_path / "advice",
                    chunking="tokens:8", contextual=trained, cache_dir=tmp_path / "cache", sample_documents=2,
                    latency_queries=2, show_progress=False, log=None)
    names = [s.name for s in advice.strategies]
    assert "trained-late-chunks" in names and "trained-late-chunks+bm25" in names and "late-chunks" in names
    strategy = advice.strategy("trained-late-chunks")
    assert strategy.config["model"] == str(trained)
    assert (strategy.config["method"], strategy.config["max_length"]) == ("pi", 128)
    assert f"--model {trained}" in strategy.commands["eval"] and "--late" in strategy.commands["eval"]
    # its run is the trained folder's late chunks at pi/128: nDCG@10 of each query recomputed here, a
    # document scored by its best chunk (one relevant document: 100 / log2(rank + 1) within the top 10)
    encoder = load_encoder(trained)
    vectors = {d: encoder.encode_chunks([text], "tokens:8", late=True)[0][0] for d, text in corpus.items()}
    want = {}
    for qid, text in queries.items():
        q = encoder.encode([text])[0]
        order = sorted(corpus, key=lambda d: -float((vectors[d] @ q).max()))
        rank = order.index(f"d{qid[1:]}") + 1
        want[qid] = 100 / math.log2(rank + 1) if rank <= 10 else 0.0
    (scores,) = RunResults.load(tmp_path / "advice" / "runs" / "trained-late-chunks").query_scores().values()
    assert scores == pytest.approx(want, abs=1e-3)  # the run keeps three decimals
    args = build_parser().parse_args(["advise", "--model", str(quiet_model_folder), "--contextual", str(trained),
                                      "--task-dir", str(task), "--output", str(tmp_path / "y")])
    assert settings_from_args(AdviseSpec, args).contextual == trained  # the command line's flag
    with pytest.raises(ValueError, match="not a folder written by"):
        advise(quiet_model_folder, max_length=64, task_dirs=[task], output_dir=tmp_path / "x",
               contextual=quiet_model_folder, show_progress=False, log=None)
