"""``longembed retrofit``: a BERT's position table replaced by ALiBi, the student distilled from the teacher.

References are written here, apart from the code under test: the weight map (the teacher's names,
minus the position table), Jina's slopes and ALiBi attention as a plain softmax per head, BERT's own
forward (transformers' BertModel), the loss as a loop over texts, and the training texts as slices
of the token stream.  Every model is tiny (hidden 32, 2 layers, Lo = 32) and built here; the real
all-MiniLM-L6-v2 only in one construction check at 24 tokens.
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import DATA_DIR, VOCAB, real_model_folder, require_data, words
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertModel, BertTokenizer, TrainerCallback

from longembed import load_encoder
from longembed.cli.main import main
from longembed.export import export_model
from longembed.loading import default_method, resolve_model
from longembed.models.jina_bert import JinaBertConfig, JinaBertModel
from longembed.training.contrastive import SentenceTransformer
from longembed.training.data import TrainingPair
from longembed.training.jina.held_out import held_out_retrieval
from longembed.training.retrofit import (
    POSITION_TABLE,
    RECORD_FILE,
    RetrofitConfig,
    build_student,
    distillation_loss,
    retrofit_alibi,
    student_state,
)
from longembed.training.retrofit.data import plan_batches, read_text_file, retrofit_texts, tokenized_plan
from longembed.training.retrofit.fidelity import held_out_squad_pairs, short_text_fidelity
from longembed.training.retrofit.pairs import batch_texts, contrastive_loss, plan_pair_batches
from longembed.training.retrofit.student import load_teacher
from longembed.training.retrofit.trainer import DistillationTrainer

LO = 32  # the tiny teacher's window
HIDDEN = 32


# ---------------------------------------------------------------- the tiny teacher and its texts


def tiny_bert(heads: int = 4, hidden: int = HIDDEN, seed: int = 0) -> BertModel:
    """A random BERT with Lo = 32 positions, made less degenerate: larger q/k (sharper attention) and
    non-trivial LayerNorm and bias parameters, so a misplaced one would show."""
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        intermediate_size=64,
        max_position_embeddings=LO,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    model = BertModel(config, add_pooling_layer=False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ("query" in name or "key" in name) and p.dim() == 2:
                p.mul_(4.0)
            elif name.endswith("bias") or "LayerNorm.weight" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def save_sentence_transformers_teacher(model: BertModel, folder: Path) -> Path:
    """The teacher as a sentence-transformers folder laid out like all-MiniLM-L6-v2's: the transformer at
    the root, mean pooling, normalization."""
    folder.mkdir(parents=True, exist_ok=True)
    BertTokenizer(vocab={piece: i for i, piece in enumerate(VOCAB)}).save_pretrained(folder)
    model.save_pretrained(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": model.config.hidden_size, "pooling_mode_mean_tokens": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": LO, "do_lower_case": False}))
    return folder


@pytest.fixture(scope="module")
def teacher_folder(tmp_path_factory) -> Path:
    return save_sentence_transformers_teacher(tiny_bert(), tmp_path_factory.mktemp("teacher"))


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    """Six distinct texts repeated: a stream of about 1,900 tokens, learnable in a few steps."""
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("\n".join(words(40, i % 6) for i in range(48)) + "\n")
    return path


#: A short run: 8 steps of 4 texts of 8..32 tokens.
SHORT = dict(max_steps=8, batch_size=4, min_seq_length=8, learning_rate=3e-3, warmup_steps=1, save_steps=3,
             logging_steps=1, token_weight=1.0, device="cpu", show_progress=False)


def plain_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def jina_slopes(heads: int) -> list[float]:
    """Jina's (Press et al.'s) slopes: 2^(-8h/H), h = 1..H, for H a power of two; otherwise those of the
    largest power of two a < H, then every other slope of 2a heads (the odd ones) for the rest."""
    if heads & (heads - 1) == 0:
        return [2 ** (-8 * h / heads) for h in range(1, heads + 1)]
    a = 2 ** int(math.log2(heads))
    return jina_slopes(a) + jina_slopes(2 * a)[0::2][: heads - a]


def padded_ids(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, len(VOCAB), (3, 20), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 13:] = 0
    mask[2, 6:] = 0
    ids[mask == 0] = 0
    return ids, mask


# ---------------------------------------------------------------- (a) construction: the weights


def test_step_0_student_holds_every_teacher_weight_but_the_position_table() -> None:
    teacher = tiny_bert()
    student = build_student(teacher, LO)
    t, s = plain_state(teacher), plain_state(student)
    # the map, written independently: the same name for every teacher tensor but the position table
    expected_names = set(t) - {"embeddings.position_embeddings.weight"}
    assert set(s) == expected_names
    for name in expected_names:
        assert torch.equal(s[name], t[name]), name
    assert isinstance(student, JinaBertModel) and student.config.feed_forward_type == "original"
    assert student.config.training_length == LO and student.config.hidden_act == teacher.config.hidden_act
    assert student.config.layer_norm_eps == teacher.config.layer_norm_eps
    # a copy, not shared storage: training the student leaves the teacher alone
    s_param = student.embeddings.word_embeddings.weight
    assert s_param.data_ptr() != teacher.embeddings.word_embeddings.weight.data_ptr()


def test_the_weight_map_is_checked_complete_both_ways() -> None:
    teacher = tiny_bert()
    names = plain_state(build_student(teacher, LO)).keys()
    state = plain_state(teacher)
    assert POSITION_TABLE == "embeddings.position_embeddings.weight"
    with pytest.raises(ValueError, match="no embeddings.position_embeddings"):
        student_state({k: v for k, v in state.items() if k != POSITION_TABLE}, names)
    with pytest.raises(ValueError, match="no place in the student.*pooler"):
        student_state({**state, "pooler.dense.weight": torch.zeros(2, 2)}, names)
    with pytest.raises(ValueError, match="no teacher tensor.*intermediate"):
        student_state({k: v for k, v in state.items() if "layer.1.intermediate.dense.bias" not in k}, names)


def test_the_teacher_loads_whole_without_its_cls_pooler(tmp_path: Path) -> None:
    """BERT's CLS pooler is left out (mean pooling); any other weight that does not load is an error."""
    torch.manual_seed(0)
    with_pooler = BertModel(tiny_bert().config, add_pooling_layer=True)
    with_pooler.load_state_dict(tiny_bert().state_dict(), strict=False)
    folder = save_sentence_transformers_teacher(with_pooler, tmp_path / "pooler")
    teacher = load_teacher(resolve_model(folder))
    assert teacher.pooler is None
    assert all(torch.equal(a, b) for a, b in zip(teacher.state_dict().values(), tiny_bert().state_dict().values(),
                                                  strict=True))
    weights = load_file(folder / "model.safetensors")
    save_file({**weights, "encoder.layer.0.extra.weight": torch.zeros(2)}, folder / "model.safetensors")
    with pytest.raises(ValueError, match="extra"):
        load_teacher(resolve_model(folder))


# ---------------------------------------------------------------- (b) construction: ALiBi attention


@pytest.mark.parametrize(("heads", "slope_scale"), [(4, 1.0), (6, 1.0), (4, 0.25)])
def test_student_attention_equals_a_plain_alibi_reference(heads: int, slope_scale: float) -> None:
    """softmax(Q K^T / sqrt(d) - m_h |i - j| + padding) V, per head in float64, with Jina's slopes (times
    ``slope_scale``), from the teacher's q/k/v weights read by their names; padded keys are never attended to."""
    teacher = tiny_bert(heads, hidden=8 * heads)
    student = build_student(teacher, LO, slope_scale).eval()
    ids, mask = padded_ids()
    x = student.embeddings(ids)
    layer = student.encoder.layer[0].attention.self
    with torch.no_grad():
        got, _ = layer(x, student._padding_mask(mask, x))
    w = {k: v.double() for k, v in plain_state(teacher).items()}
    xd, (batch, n, hidden), d = x.double(), x.shape, 8

    def project(name: str) -> torch.Tensor:
        p = f"encoder.layer.0.attention.self.{name}"
        return (xd @ w[p + ".weight"].T + w[p + ".bias"]).view(batch, n, heads, d)

    q, k, v = project("query"), project("key"), project("value")
    slopes = [slope_scale * m for m in jina_slopes(heads)]
    expected = torch.zeros(batch, n, heads, d, dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            logits = torch.empty(n, n, dtype=torch.float64)
            for i in range(n):
                for j in range(n):
                    bias = -slopes[h] * abs(i - j) if mask[b, j] else -math.inf
                    logits[i, j] = q[b, i, h] @ k[b, j, h] / math.sqrt(d) + bias
            expected[b, :, h] = torch.softmax(logits, dim=-1) @ v[b, :, h]
    torch.testing.assert_close(got.double(), expected.reshape(batch, n, hidden), rtol=1e-5, atol=1e-5)


def test_minilm_has_twelve_heads_with_jinas_slopes() -> None:
    """MiniLM's 12 heads (not a power of two): 2^-1..2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5."""
    student = build_student(tiny_bert(12, hidden=48), LO)
    literal = [2.0**-i for i in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    assert jina_slopes(12) == pytest.approx(literal)
    for layer in student.encoder.layer:
        torch.testing.assert_close(layer.attention.self.alibi_slopes, torch.tensor(literal), rtol=1e-6, atol=0)


# ---------------------------------------------------------------- (c) construction: BERT without positions


def zero_positions_equal_bert(teacher: BertModel, ids: torch.Tensor, mask: torch.Tensor, atol: float) -> None:
    """With the teacher's position table zeroed and the student's slopes zeroed, every layer's output of
    the student (JinaBERT, BERT's feed-forward) equals BertModel's at the real tokens."""
    student = build_student(teacher, LO).eval()
    with torch.no_grad():
        teacher.embeddings.position_embeddings.weight.zero_()
        for layer in student.encoder.layer:
            layer.attention.self.alibi_slopes.zero_()
        want = teacher(ids, attention_mask=mask, output_hidden_states=True).hidden_states
        got = student(ids, attention_mask=mask, output_hidden_states=True).hidden_states
    assert len(got) == len(want) == teacher.config.num_hidden_layers + 1
    real = mask.bool()
    for layer, (a, b) in enumerate(zip(got, want, strict=True)):
        torch.testing.assert_close(a[real], b[real], rtol=1e-5, atol=atol, msg=f"layer {layer}")


def test_without_positions_the_student_is_bert_layer_by_layer() -> None:
    ids, mask = padded_ids()
    zero_positions_equal_bert(tiny_bert(), ids, mask, atol=1e-5)


@pytest.mark.slow
def test_without_positions_the_student_of_minilm_is_minilm() -> None:
    """The same check on the real all-MiniLM-L6-v2 (30,522 x 384, 6 layers, 12 heads) at 24 tokens."""
    source = resolve_model(real_model_folder("all-MiniLM-L6-v2"))
    teacher = load_teacher(source)
    ids = torch.randint(1000, 30000, (2, 24), generator=torch.Generator().manual_seed(3))
    ids[:, 0], ids[:, -1] = 101, 102
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0
    zero_positions_equal_bert(teacher, ids, mask, atol=1e-4)


# ---------------------------------------------------------------- the loss and the texts


def test_distillation_loss_is_cosine_of_pooled_plus_weighted_token_mse() -> None:
    torch.manual_seed(0)
    student, teacher = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    teacher_pooled = torch.randn(2, 3)
    loss, parts = distillation_loss(student, mask, teacher_pooled, teacher, token_weight=0.5)
    cosines, squares, count = [], 0.0, 0
    for b in range(2):
        n = int(mask[b].sum())
        pooled = student[b, :n].mean(dim=0)
        cosines.append(float(pooled @ teacher_pooled[b] / (pooled.norm() * teacher_pooled[b].norm())))
        squares += float(((student[b, :n] - teacher[b, :n]) ** 2).sum())
        count += n * 3
    pooled_loss, token_loss = 1 - sum(cosines) / 2, squares / count
    assert float(parts["pooled_loss"]) == pytest.approx(pooled_loss, rel=1e-5)
    assert float(parts["token_loss"]) == pytest.approx(token_loss, rel=1e-5)
    assert float(loss) == pytest.approx(pooled_loss + 0.5 * token_loss, rel=1e-5)
    pooled_only, parts = distillation_loss(student, mask, teacher_pooled, None, token_weight=0.0)
    assert set(parts) == {"pooled_loss"} and float(pooled_only) == pytest.approx(pooled_loss, rel=1e-5)


def test_batches_are_consecutive_slices_of_the_stream_one_length_each() -> None:
    stream = np.arange(10, 2010)  # distinct ids: a slice is identified by its first id
    plan = plan_batches(stream, cls_id=1, sep_id=2, batch_size=3, min_length=8, max_length=40, seed=5)
    lengths, slices = set(), []
    for batch in plan.batches:
        assert batch.shape[0] == 3 and 8 <= batch.shape[1] <= 40
        lengths.add(batch.shape[1])
        assert (batch[:, 0] == 1).all() and (batch[:, -1] == 2).all()
        for row in batch[:, 1:-1]:
            assert (np.diff(row) == 1).all()  # a consecutive stretch of the stream
            slices.append((int(row[0]), int(row[-1])))
    slices.sort()
    assert slices[0][0] == 10 and all(a[1] + 1 == b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert len(lengths) > 5 and plan.examples == 3 * len(plan.batches)
    again = plan_batches(stream, 1, 2, 3, 8, 40, seed=5)
    assert again.digest() == plan.digest() != plan_batches(stream, 1, 2, 3, 8, 40, seed=6).digest()
    with pytest.raises(ValueError, match="too little"):
        plan_batches(stream[:17], 1, 2, 3, 8, 40, seed=5)  # 3 x 6 > 17


def test_text_files_jsonl_or_one_text_per_line(tmp_path: Path) -> None:
    lines = tmp_path / "t.txt"
    lines.write_text("first text\n\n  second text  \n")
    assert read_text_file(lines) == ["first text", "second text"]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"text": "one"}\n{"text": "two"}\n')
    assert read_text_file(jsonl) == ["one", "two"]
    jsonl.write_text('{"body": "one"}\n')
    with pytest.raises(ValueError, match="text"):
        read_text_file(jsonl)


def test_config_round_trips_and_refuses_unknown_names() -> None:
    config = RetrofitConfig(max_steps=5, token_weight=0.0, slope_scale=0.25, precision="bf16")
    assert RetrofitConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="unknown retrofit option"):
        RetrofitConfig().with_overrides(max_step=3)
    with pytest.raises(ValueError, match="min_seq_length"):
        RetrofitConfig(min_seq_length=64, max_seq_length=32)
    with pytest.raises(ValueError, match="token_weight"):
        RetrofitConfig(token_weight=-1.0)
    with pytest.raises(ValueError, match="slope_scale"):
        RetrofitConfig(slope_scale=0.0)
    with pytest.raises(ValueError, match="alibi_slope_scale"):
        JinaBertConfig(alibi_slope_scale=-1.0)


# ---------------------------------------------------------------- (d) training lowers the loss


def planned_batches(teacher_folder: Path, text_file: Path) -> list[np.ndarray]:
    """The token ids of the planned batches, in training order, planned again as the run plans them."""
    tokenizer = BertTokenizer.from_pretrained(teacher_folder)
    texts = read_text_file(text_file)
    return tokenized_plan(texts, tokenizer, SHORT["batch_size"], SHORT["min_seq_length"], LO, seed=0).batches


def independent_loss(student: JinaBertModel, teacher: BertModel, batch: torch.Tensor) -> float:
    """1 - cos of mean-pooled vectors + MSE of token states, over unpadded texts, computed plainly."""
    with torch.no_grad():
        s = student(batch).last_hidden_state.double()
        t = teacher(batch).last_hidden_state.double()
    cos = torch.nn.functional.cosine_similarity(s.mean(1), t.mean(1), dim=-1)
    return float((1 - cos).mean() + ((s - t) ** 2).mean())


@pytest.mark.slow
def test_a_few_steps_lower_the_distillation_loss(tmp_path: Path, teacher_folder: Path, text_file: Path) -> None:
    """Eight steps lower the loss on the texts trained on (0.35 -> 0.29 here), every part of it recorded."""
    teacher = load_teacher(resolve_model(teacher_folder))
    batches = [torch.as_tensor(b) for b in planned_batches(teacher_folder, text_file)[: SHORT["max_steps"]]]
    start = build_student(teacher, LO).eval()
    before = np.mean([independent_loss(start, teacher, b) for b in batches])

    result = retrofit_alibi(teacher_folder, tmp_path / "out", text_file=text_file, **SHORT)
    trained = JinaBertModel.from_pretrained(result.folder).eval()
    after = np.mean([independent_loss(trained, teacher, b) for b in batches])
    assert after < 0.9 * before, (before, after)

    summary = result.summary
    assert summary.steps == 8 and summary.resumed_from is None and summary.examples == 32
    assert [step for step, _ in summary.losses] == list(range(1, 9))
    assert len(summary.pooled_losses) == len(summary.token_losses) == 8
    for (_, loss), (_, pooled), (_, token) in zip(summary.losses, summary.pooled_losses, summary.token_losses,
                                                  strict=True):
        assert loss == pytest.approx(pooled + token, rel=1e-3)
    assert summary.tokens > 0 and summary.tokens_per_second > 0
    record = json.loads((result.folder / RECORD_FILE).read_text())
    assert record["config"]["max_steps"] == 8 and record["training_length"] == LO
    assert record["data"]["text_file"] == 48 and record["targets"]["token_states"] is True
    assert not (result.folder / "checkpoints").exists()  # checkpoints and default targets removed
    assert (result.folder / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- (d') the optional contrastive term


def test_pairs_loss_is_infonce_over_in_batch_positives_and_every_rows_negatives() -> None:
    """The module docstring's formula written as a loop: -ln(e^{s(q_i,p_i)/tau} / sum_j [e^{s(q_i,p_j)/tau}
    + sum_l e^{s(q_i,n_jl)/tau}]), with the documents laid out positives first, then each negative column."""
    torch.manual_seed(0)
    k, m, dim, tau = 3, 2, 5, 0.05
    queries, positives, negatives = torch.randn(k, dim), torch.randn(k, dim), torch.randn(k, m, dim)
    documents = torch.cat([positives, *(negatives[:, col] for col in range(m))])

    def s(a: torch.Tensor, b: torch.Tensor) -> float:
        return float(a @ b / (a.norm() * b.norm())) / tau

    total = 0.0
    for i in range(k):
        denominator = sum(
            math.exp(s(queries[i], positives[j])) + sum(math.exp(s(queries[i], negatives[j, col])) for col in range(m))
            for j in range(k)
        )
        total += -math.log(math.exp(s(queries[i], positives[i])) / denominator)
    assert float(contrastive_loss(queries, documents, tau)) == pytest.approx(total / k, rel=1e-4)
    rows = [("q0", "p0", "n0a", "n0b"), ("q1", "p1", "n1a", "n1b")]
    assert batch_texts(rows, {"query": "query: ", "document": "passage: "}) == (
        ["query: q0", "query: q1"],
        ["passage: p0", "passage: p1", "passage: n0a", "passage: n1a", "passage: n0b", "passage: n1b"],
    )


def test_pair_batches_share_no_text_and_cycle_through_every_pair() -> None:
    """Two questions on one paragraph, or one question twice, never meet in a batch (each would make the
    other's positive a negative); the deferred row leads the next batch; every pair comes round."""
    pairs = [TrainingPair(f"q{i}", f"p{i // 2}", (f"n{i}",), group=f"g{i}") for i in range(10)]  # p shared in twos
    pairs.append(TrainingPair("q0", "p9", ("n10",), group="g10"))  # q0 asked again
    batches = plan_pair_batches(pairs, batch_size=3, count=12, hard_negatives=1, seed=0)
    assert len(batches) == 12 and all(len(b) == 3 for b in batches)
    for batch in batches:
        texts = [t for row in batch for t in row]
        assert len(texts) == len(set(texts)), batch
    seen = {row for batch in batches for row in batch}
    assert seen == {(p.query, p.positive, p.negatives[0]) for p in pairs}
    assert plan_pair_batches(pairs, 3, 12, 1, seed=0) == batches != plan_pair_batches(pairs, 3, 12, 1, seed=1)
    distinct = [TrainingPair(f"q{i}", f"x{i}", (f"m{i}",), group=f"h{i}") for i in range(10)]
    filled = plan_pair_batches(distinct, batch_size=2, count=1, hard_negatives=3, seed=0)[0]
    for row in filled:  # too few negatives: other pairs' positives fill them, never the row's own
        assert len(row) == 5 and set(row[3:]) <= {p.positive for p in distinct} - {row[1]}
    shared = [TrainingPair("q0", "p", (), "a"), TrainingPair("q1", "p", (), "b"), TrainingPair("q2", "r", (), "c")]
    rows = plan_pair_batches(shared, batch_size=1, count=3, hard_negatives=1, seed=0)
    assert {row[0]: row[2] for (row,) in rows} == {"q0": "r", "q1": "r", "q2": "p"}  # never the own positive
    same_paragraph = [TrainingPair(f"q{i}", "p", (), group=f"g{i}") for i in range(4)]
    with pytest.raises(ValueError, match="share no text"):
        plan_pair_batches(same_paragraph, batch_size=2, count=1, hard_negatives=0, seed=0)


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> Path:
    """Twenty query -> passage pairs of the tiny vocabulary, one hard negative each."""
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    rows = [{"query": words(5, 300 + i), "positive": words(20, 400 + i), "negatives": [words(20, 500 + i)]}
            for i in range(20)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def independent_pairs_loss(student: JinaBertModel, tokenizer: BertTokenizer, rows: list[tuple[str, ...]]) -> float:
    """InfoNCE (tau 0.05) of one pair batch through the student, each text alone: no padding, a plain mean."""

    def vector(text: str) -> torch.Tensor:
        ids = torch.tensor([tokenizer(text, truncation=True, max_length=LO)["input_ids"]])
        with torch.no_grad():
            return student(ids).last_hidden_state[0].double().mean(0)

    queries = torch.stack([vector(row[0]) for row in rows])
    documents = torch.stack([vector(row[c]) for c in range(1, len(rows[0])) for row in rows])
    scores = torch.nn.functional.normalize(queries, dim=-1) @ torch.nn.functional.normalize(documents, dim=-1).T
    return float(torch.nn.functional.cross_entropy(scores / 0.05, torch.arange(len(rows))))


@pytest.mark.slow
def test_pairs_mix_a_contrastive_term_that_training_lowers(
    tmp_path: Path, teacher_folder: Path, text_file: Path, pairs_file: Path
) -> None:
    options = {**SHORT, "pairs_weight": 1.0, "pairs_batch_size": 4, "hard_negatives": 1}
    result = retrofit_alibi(teacher_folder, tmp_path / "out", text_file=text_file, pairs_file=pairs_file, **options)
    summary = result.summary
    assert len(summary.pairs_losses) == len(summary.pooled_losses) == 8
    for (_, loss), (_, pooled), (_, token), (_, pair) in zip(
        summary.losses, summary.pooled_losses, summary.token_losses, summary.pairs_losses, strict=True
    ):
        assert loss == pytest.approx(pooled + token + pair, rel=1e-3)
    assert result.record["data"]["pairs"] == {"pairs.jsonl": 20, "held_out": 0}
    assert result.record["config"]["pairs_weight"] == 1.0

    tokenizer = BertTokenizer.from_pretrained(teacher_folder)
    pairs = [TrainingPair(r["query"], r["positive"], tuple(r["negatives"]), str(i))
             for i, r in enumerate(map(json.loads, pairs_file.read_text().splitlines()))]
    batches = plan_pair_batches(pairs, 4, 8, 1, seed=0)
    start = build_student(load_teacher(resolve_model(teacher_folder)), LO).eval()
    trained = JinaBertModel.from_pretrained(result.folder).eval()
    before = np.mean([independent_pairs_loss(start, tokenizer, b) for b in batches])
    after = np.mean([independent_pairs_loss(trained, tokenizer, b) for b in batches])
    assert after < before, (before, after)
    first = summary.pairs_losses[0][1]  # the logged first step is the start student's loss on batch 0
    assert first == pytest.approx(independent_pairs_loss(start, tokenizer, batches[0]), rel=1e-3)

    plain = retrofit_alibi(teacher_folder, tmp_path / "plain", text_file=text_file, **SHORT)
    assert plain.summary.pairs_losses == [] and "pairs" not in plain.record["data"]


@pytest.mark.slow
def test_the_command_line_mixes_pairs(tmp_path: Path, teacher_folder: Path, text_file: Path, pairs_file: Path,
                                      capsys) -> None:
    output = tmp_path / "cli"
    code = main(["retrofit", "--model", str(teacher_folder), "--output", str(output), "--text-file", str(text_file),
                 "--pairs-file", str(pairs_file), "--pairs-weight", "0.5", "--pairs-batch-size", "4",
                 "--max-steps", "2", "--batch-size", "4", "--min-seq-length", "8", "--device", "cpu",
                 "--logging-steps", "1"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((output / RECORD_FILE).read_text())
    assert record["config"]["pairs_weight"] == 0.5 and record["config"]["pairs_batch_size"] == 4
    assert len(record["summary"]["pairs_losses"]) == 2


# ---------------------------------------------------------------- (e) resume


class Killed(Exception):
    pass


class KillAt(TrainerCallback):
    """Stops training with an exception after a step, as a kill would (the checkpoints stay)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Killed()


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_uninterrupted_weights(
    tmp_path: Path, teacher_folder: Path, text_file: Path
) -> None:
    straight = retrofit_alibi(teacher_folder, tmp_path / "straight", text_file=text_file, **SHORT)
    with pytest.raises(Killed):
        retrofit_alibi(teacher_folder, tmp_path / "killed", text_file=text_file, callbacks=[KillAt(5)], **SHORT)
    assert (tmp_path / "killed" / "checkpoints" / "checkpoint-3").is_dir()
    with pytest.raises(FileExistsError, match="--resume"):
        retrofit_alibi(teacher_folder, tmp_path / "killed", text_file=text_file, **SHORT)
    with pytest.raises(ValueError, match="different run"):
        retrofit_alibi(teacher_folder, tmp_path / "killed", text_file=text_file, resume=True,
                       **{**SHORT, "learning_rate": 1e-3})
    resumed = retrofit_alibi(teacher_folder, tmp_path / "killed", text_file=text_file, resume=True, **SHORT)
    assert resumed.summary.resumed_from.endswith("checkpoint-3") and resumed.summary.steps == 8
    assert resumed.record["targets"]["computed_batches"] == 0  # the killed run's targets were reused
    a = JinaBertModel.from_pretrained(straight.folder).state_dict()
    b = JinaBertModel.from_pretrained(resumed.folder).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.summary.losses == straight.summary.losses  # the whole curve, steps 1-3 from the checkpoint
    assert resumed.summary.token_losses == straight.summary.token_losses
    with pytest.raises(FileExistsError, match="finished retrofit"):
        retrofit_alibi(teacher_folder, tmp_path / "killed", text_file=text_file, resume=True, **SHORT)


class KilledWhileSaving(Exception):
    pass


@pytest.mark.slow
def test_incomplete_checkpoints_are_never_resumed_from(
    tmp_path: Path, teacher_folder: Path, text_file: Path, monkeypatch, caplog
) -> None:
    """Issue 40: a kill while checkpoint-6 is written leaves no checkpoint-6 (the run resumes from
    checkpoint-3), and a checkpoint-3 without trainer_state.json is skipped with a log line (the run starts
    afresh): both end with the weights of an uninterrupted run.  The final weights follow the umask."""
    previous_umask = os.umask(0o022)
    try:
        straight = retrofit_alibi(teacher_folder, tmp_path / "straight", text_file=text_file, **SHORT)
        original = DistillationTrainer._save_rng_state

        def dies_while_saving_step_6(self, output_dir):
            if self.state.global_step == 6:
                raise KilledWhileSaving()
            return original(self, output_dir)

        monkeypatch.setattr(DistillationTrainer, "_save_rng_state", dies_while_saving_step_6)
        with pytest.raises(KilledWhileSaving):
            retrofit_alibi(teacher_folder, tmp_path / "a", text_file=text_file, **SHORT)
        monkeypatch.setattr(DistillationTrainer, "_save_rng_state", original)
        assert sorted(p.name for p in (tmp_path / "a" / "checkpoints").glob("checkpoint-*")) == ["checkpoint-3"]
        resumed = retrofit_alibi(teacher_folder, tmp_path / "a", text_file=text_file, resume=True, **SHORT)
        assert resumed.summary.resumed_from.endswith("checkpoint-3") and resumed.summary.steps == 8

        with pytest.raises(Killed):
            retrofit_alibi(teacher_folder, tmp_path / "b", text_file=text_file, callbacks=[KillAt(5)], **SHORT)
        broken = tmp_path / "b" / "checkpoints" / "checkpoint-3"
        (broken / "trainer_state.json").unlink()
        with caplog.at_level(logging.WARNING, logger="longembed.training.runs"):
            fresh = retrofit_alibi(teacher_folder, tmp_path / "b", text_file=text_file, resume=True, **SHORT)
        assert fresh.summary.resumed_from is None and fresh.summary.steps == 8
        assert any(str(broken) in r.getMessage() and "no trainer_state.json" in r.getMessage()
                   for r in caplog.records)
    finally:
        os.umask(previous_umask)
    a = JinaBertModel.from_pretrained(straight.folder).state_dict()
    for run in (resumed, fresh):
        b = JinaBertModel.from_pretrained(run.folder).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert stat.S_IMODE((fresh.folder / "model.safetensors").stat().st_mode) == 0o644


@pytest.mark.slow
def test_teacher_targets_are_cached_and_reused(tmp_path: Path, teacher_folder: Path, text_file: Path) -> None:
    cache = tmp_path / "cache"
    options = {**SHORT, "max_steps": 3, "token_weight": 0.0}
    first = retrofit_alibi(teacher_folder, tmp_path / "a", text_file=text_file, cache_dir=cache, **options)
    assert first.record["targets"]["computed_batches"] == 3 and first.record["targets"]["token_states"] is False
    (folder,) = cache.iterdir()
    teacher = load_teacher(resolve_model(teacher_folder))
    with np.load(folder / "batch-000000.npz") as data:
        assert "tokens" not in data.files
        pooled = data["pooled"]
    first_batch = first.record["data"]["used_texts"] // 3
    assert pooled.shape == (first_batch, HIDDEN)
    longer = retrofit_alibi(teacher_folder, tmp_path / "b", text_file=text_file, cache_dir=cache,
                            **{**options, "max_steps": 5})
    assert longer.record["targets"]["computed_batches"] == 2  # the first three batches were reused
    with_tokens = retrofit_alibi(teacher_folder, tmp_path / "c", text_file=text_file, cache_dir=cache,
                                 **{**options, "token_weight": 1.0})
    assert with_tokens.record["targets"]["computed_batches"] == 3  # recomputed, now with token states
    # the cached vector is the teacher's mean-pooled vector of the planned text
    with np.load(folder / "batch-000000.npz") as data:
        tokens, cached = data["tokens"], data["pooled"]
    assert tokens.dtype == np.float16 and tokens.shape[0] == first_batch
    assert np.array_equal(cached, pooled)
    ids = planned_batches(teacher_folder, text_file)[0]
    with torch.no_grad():
        want = teacher(torch.as_tensor(ids)).last_hidden_state
    np.testing.assert_allclose(cached, want.mean(1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tokens.astype(np.float32), want.numpy(), rtol=1e-2, atol=2e-3)


# ---------------------------------------------------------------- (f) the folder opens everywhere


@pytest.mark.slow
def test_the_folder_opens_in_load_encoder_sentence_transformers_and_export(
    tmp_path: Path, teacher_folder: Path, text_file: Path
) -> None:
    result = retrofit_alibi(teacher_folder, tmp_path / "out", text_file=text_file,
                            **{**SHORT, "max_steps": 2, "slope_scale": 0.5})
    long_text = words(150, 11)  # 150 tokens + 2: about five times the teacher's window
    student = JinaBertModel.from_pretrained(result.folder).eval()
    heads = student.config.num_attention_heads  # the folder keeps the slopes it was trained with
    for layer in student.encoder.layer:
        torch.testing.assert_close(layer.attention.self.alibi_slopes, 0.5 * torch.tensor(jina_slopes(heads)))
    tokenizer = BertTokenizer.from_pretrained(result.folder)
    ids = torch.tensor([tokenizer(long_text)["input_ids"]])
    assert ids.shape[1] > 4 * LO
    with torch.no_grad():
        direct = student(ids).last_hidden_state.mean(1)[0]
    direct = (direct / direct.norm()).numpy()  # the teacher's pipeline normalizes

    encoder = load_encoder(result.folder, method="native")
    assert encoder.max_length >= ids.shape[1]
    got = encoder.encode([long_text])[0]
    np.testing.assert_allclose(got, direct, rtol=1e-4, atol=1e-5)
    assert default_method(result.folder) == "native"  # an ALiBi folder opens natively, not cut at Lo
    np.testing.assert_allclose(load_encoder(result.folder).encode([long_text])[0], direct, rtol=1e-4, atol=1e-5)
    st = SentenceTransformer(str(result.folder), device="cpu")
    assert st.max_seq_length >= ids.shape[1]
    np.testing.assert_allclose(st.encode([long_text])[0], direct, rtol=1e-4, atol=1e-5)
    # export reads the folder as an ALiBi model, whose folder already takes long inputs as it is
    with pytest.raises(ValueError, match="natively"):
        export_model(result.folder, "native", 8 * LO, tmp_path / "exported")
    assert not (tmp_path / "exported").exists()


@pytest.mark.slow
def test_the_command_line_runs_a_retrofit(tmp_path: Path, teacher_folder: Path, text_file: Path, capsys) -> None:
    output = tmp_path / "cli"
    code = main(["retrofit", "--model", str(teacher_folder), "--positions", "alibi", "--output", str(output),
                 "--text-file", str(text_file), "--max-steps", "2", "--batch-size", "4", "--min-seq-length", "8",
                 "--token-weight", "0.5", "--slope-scale", "0.25", "--device", "cpu", "--save-steps", "1"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((output / RECORD_FILE).read_text())
    assert record["config"]["token_weight"] == 0.5 and record["summary"]["steps"] == 2
    assert record["config"]["slope_scale"] == 0.25
    assert json.loads((output / "config.json").read_text())["alibi_slope_scale"] == 0.25
    assert "load_encoder" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["retrofit", "--model", str(teacher_folder), "--positions", "rope", "--output", str(tmp_path / "x")])
    code = main(["retrofit", "--model", str(output), "--output", str(tmp_path / "y"), "--text-file", str(text_file)])
    assert code == 2 and "learned absolute position table" in capsys.readouterr().err


# ---------------------------------------------------------------- (f') short-text fidelity on held-out articles


def tiny_squad(folder: Path) -> Path:
    """A SQuAD-format file of the tiny vocabulary: 3 articles of 4 paragraphs, 2 questions each (one unanswerable
    question per article, which fidelity skips as SQuAD training does)."""
    articles = []
    for a in range(3):
        paragraphs = []
        for p in range(4):
            seed = 10 * a + p
            qas = [{"id": f"{seed}-{q}", "question": words(5, 700 + 2 * seed + q), "is_impossible": False,
                    "answers": []} for q in range(2)]
            if p == 0:
                qas.append({"id": f"{seed}-x", "question": words(5, 999 - seed), "is_impossible": True, "answers": []})
            paragraphs.append({"context": words(25, 600 + seed), "qas": qas})
        articles.append({"title": f"article {a}", "paragraphs": paragraphs})
    (folder / "squad").mkdir(parents=True, exist_ok=True)
    (folder / "squad" / "dev-v2.0.json").write_text(json.dumps({"version": "v2.0", "data": articles}))
    return folder


@pytest.mark.slow
def test_fidelity_scores_the_held_out_articles_against_a_plain_computation(
    tmp_path: Path, teacher_folder: Path, text_file: Path
) -> None:
    data = tiny_squad(tmp_path / "data")
    student = retrofit_alibi(teacher_folder, tmp_path / "s", text_file=text_file, **{**SHORT, "max_steps": 2}).folder
    got = short_text_fidelity(student, teacher_folder, data, ["article 0", "article 2"], device="cpu")
    assert got["articles"] == ["article 0", "article 2"] and got["longer_than_lo"] == 0
    assert got["texts"] == 8 + 16 and got["teacher"]["queries"] == 16 and got["teacher"]["documents"] == 8

    squad = json.loads((data / "squad" / "dev-v2.0.json").read_text())["data"]
    texts = [p["context"] for a in (squad[0], squad[2]) for p in a["paragraphs"]]
    texts += [q["question"] for a in (squad[0], squad[2]) for p in a["paragraphs"] for q in p["qas"]
              if not q["is_impossible"]]
    tokenizer = BertTokenizer.from_pretrained(teacher_folder)
    teacher = load_teacher(resolve_model(teacher_folder))
    trained = JinaBertModel.from_pretrained(student).eval()
    cosines = []
    for text in texts:
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.no_grad():
            t, s = teacher(ids).last_hidden_state[0].mean(0), trained(ids).last_hidden_state[0].mean(0)
        cosines.append(float(t @ s / (t.norm() * s.norm())))
    assert got["cosine_mean"] == pytest.approx(np.mean(cosines), abs=1e-4)
    assert got["cosine_min"] == pytest.approx(min(cosines), abs=1e-4)
    assert got["ndcg@10_difference"] == pytest.approx(got["student"]["ndcg@10"] - got["teacher"]["ndcg@10"], abs=0.01)
    pairs = held_out_squad_pairs(data, ["article 0", "article 2"])  # the one-pass scores = each model scored alone
    for name, folder in (("teacher", teacher_folder), ("student", student)):
        alone = held_out_retrieval(folder, pairs, device="cpu")
        assert got[name] == pytest.approx(alone, abs=0.01)
    with pytest.raises(ValueError, match="no answerable"):
        short_text_fidelity(student, teacher_folder, data, ["no such article"], device="cpu")


@pytest.mark.slow
def test_held_out_articles_are_never_trained_on_and_scored_at_the_end(tmp_path: Path, teacher_folder: Path) -> None:
    """On the shared data: the held-out articles' paragraphs are not in the texts and their questions not in the
    pairs; the record holds their fidelity."""
    require_data("squad/dev-v2.0.json")
    texts, counts, titles = retrofit_texts(DATA_DIR, None, held_out_articles=2, seed=0)
    squad = json.loads((DATA_DIR / "squad" / "dev-v2.0.json").read_text())["data"]
    held = [a for a in squad if a["title"] in titles]
    assert len(held) == 2 and counts["held_out_articles"] == 2
    assert not {p["context"].strip() for a in held for p in a["paragraphs"]} & set(texts)
    kept = [a for a in squad if a["title"] not in titles]
    assert kept[0]["paragraphs"][0]["context"].strip() in set(texts)

    result = retrofit_alibi(teacher_folder, tmp_path / "out", data_dir=DATA_DIR,
                            **{**SHORT, "max_steps": 1, "held_out_articles": 2, "pairs_weight": 1.0})
    record = result.record
    assert record["data"]["held_out_titles"] == titles
    questions = sum(1 for a in held for p in a["paragraphs"] for q in p["qas"] if not q["is_impossible"])
    assert record["data"]["pairs"]["held_out"] == questions
    assert record["fidelity"]["teacher"]["queries"] <= questions and record["fidelity"]["articles"] == titles


# ---------------------------------------------------------------- (g) benchmark data is never read


def test_benchmark_only_data_yields_a_clear_error_and_is_never_read(tmp_path: Path, teacher_folder: Path) -> None:
    """A data folder holding only QMSum, SQuALITY and the essays (here: files that fail if parsed) gives
    a FileNotFoundError naming the allowed training data, and nothing is trained or written."""
    data = tmp_path / "data"
    for sub, name in (("qmsum", "test.jsonl"), ("squality", "test.jsonl"), ("paul_graham_essays", "essays.json")):
        (data / sub).mkdir(parents=True)
        (data / sub / name).write_text("{not json: a benchmark file must never be read for training\n")
    with pytest.raises(FileNotFoundError, match="squad"):
        retrofit_alibi(teacher_folder, tmp_path / "out", data_dir=data, **SHORT)
    assert not (tmp_path / "out" / RECORD_FILE).exists()
    assert not any((tmp_path / "out").rglob("*.npz"))
