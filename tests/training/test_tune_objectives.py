"""``longembed tune --objective distill|both``: the added rows trained to read a text as the original model does.

References: the target is checked against the original model itself (``load_encoder`` of the untuned
folder), the student's vector against a forward of the bare transformer with the PoSE ids and a
mean written out here, and the original rows against ``extended_table_position_ids``, the map the
loader uses for short inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import LO, build_tiny, words
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer

from longembed import load_encoder
from longembed.cli.main import main
from longembed.extension.ape import ExtendedTable, extended_position_table, extended_table_position_ids
from longembed.training.contrastive import info_nce_loss
from longembed.training.tune import default_tuning_config, tune_positions
from longembed.training.tune_objectives import PositionDistillationLoss, original_position_ids, tuning_loss

LT = 4 * LO
TABLE = "embeddings.position_embeddings.weight"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("base") / "bert")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    rows = [{"query": words(4, seed=i), "positive": words(20, seed=1000 + i), "negatives": [words(20, seed=2000 + i)]}
            for i in range(48)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def tiny_config(**overrides):
    return default_tuning_config(**{"batch_size": 8, "max_steps": 4, "warmup_steps": 1, "hard_negatives": 1,
                                    "save_steps": 2, "logging_steps": 1, "learning_rate": 5e-2, **overrides})


def original_rows(base: Path, method: str) -> torch.Tensor:
    table = load_file(str(base / "model.safetensors"))[TABLE]
    _, kept = extended_position_table(table, method, LT)
    return kept.nonzero().flatten()


@pytest.mark.parametrize("method", ["pi", "rp"])
def test_the_original_rows_are_the_loaders_rows_for_short_inputs(base: Path, method: str) -> None:
    mask = torch.tensor([[1] * 20 + [0] * 5, [1] * 25])
    got = original_position_ids(mask, original_rows(base, method), offset=0)
    loader = extended_table_position_ids(
        ExtendedTable(method, LO, LT, tuned=True), method, mask.sum(1), 25, torch.ones(2, dtype=torch.long)
    )
    assert torch.equal(got[mask.bool()], loader[mask.bool()])
    assert (got[~mask.bool()] == 0).all()
    if method == "pi":
        assert got[1, :4].tolist() == [0, 4, 8, 12]  # s = 4: rows 0, s, 2s, ...


def student_vector(st: SentenceTransformer, text: str, u: int) -> torch.Tensor:
    """The mean of the bare transformer's token states with the text at rows u..u+n-1."""
    ids = st.tokenize([text])
    positions = u + torch.arange(ids["input_ids"].shape[1]).unsqueeze(0)
    with torch.no_grad():
        states = st[0].auto_model(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"],
                                  position_ids=positions).last_hidden_state
    return states[0].mean(0)


@pytest.mark.slow
def test_distill_loss_is_one_minus_cosine_to_the_original_models_vector(base: Path, tmp_path: Path, pairs) -> None:
    """On a folder extended and tuned two steps: the loss of a batch at PoSE offsets equals 1 - cos(student,
    original model) averaged over texts, with the original model's vector from the untuned folder itself."""
    folder = tune_positions(base, "pi", LT, tmp_path / "t", train_file=pairs, objective="distill",
                            config=tiny_config(max_steps=2)).folder
    st = SentenceTransformer(str(folder), device="cpu").eval()
    texts, offsets = [words(10, seed=1), words(25, seed=2)], [3, 70]
    features = st.tokenize(texts)
    n = features["input_ids"].shape[1]
    features["position_ids"] = torch.stack([u + torch.arange(n) for u in offsets]) * features["attention_mask"]
    loss = PositionDistillationLoss(st, original_rows(base, "pi"), offset=0)
    got = float(loss([features], torch.zeros(2)).detach())

    original = load_encoder(base).encode(texts)  # the untuned model: the target
    students = [student_vector(st, t, u).numpy() for t, u in zip(texts, offsets, strict=True)]
    cosines = [s @ o / (np.linalg.norm(s) * np.linalg.norm(o)) for s, o in zip(students, original, strict=True)]
    assert got == pytest.approx(1 - np.mean(cosines), abs=1e-5)
    assert got > 1e-4  # PoSE rows are not the original rows: there is something to learn


def test_both_adds_the_weighted_distillation_to_info_nce(base: Path, tmp_path: Path, pairs) -> None:
    st = SentenceTransformer(str(base), device="cpu").eval()
    rows = torch.arange(LO)
    columns = [st.tokenize([words(4, seed=i) for i in range(3)]), st.tokenize([words(20, seed=9 + i) for i in range(3)])]
    labels = torch.zeros(3)
    both = tuning_loss(st, "both", 0.05, rows, 0, distill_weight=0.3)
    distill = tuning_loss(st, "distill", 0.05, rows, 0)
    contrastive = info_nce_loss(st, 0.05, symmetric=False)
    with torch.no_grad():
        values = [float(loss(columns, labels)) for loss in (both, contrastive, distill)]
    assert values[0] == pytest.approx(values[1] + 0.3 * values[2], rel=1e-5)
    assert values[2] == pytest.approx(0.0, abs=1e-6)  # no PoSE ids: the texts are already at the original rows
    with pytest.raises(ValueError, match="objective"):
        tuning_loss(st, "mse", 0.05, rows, 0)
    with pytest.raises(ValueError, match="distill_weight"):
        tune_positions(base, "pi", LT, tmp_path / "x", train_file=pairs, objective="both", distill_weight=0.0)


def mean_distill_loss(folder: Path, base: Path, texts: list[str], offsets: list[int]) -> float:
    st = SentenceTransformer(str(folder), device="cpu").eval()
    original = load_encoder(base).encode(texts)
    cosines = []
    for text, u, o in zip(texts, offsets, original, strict=True):
        s = student_vector(st, text, u).numpy()
        cosines.append(s @ o / (np.linalg.norm(s) * np.linalg.norm(o)))
    return float(1 - np.mean(cosines))


@pytest.mark.slow
def test_distill_tuning_lowers_the_distillation_loss_and_keeps_every_original_weight(
    base: Path, tmp_path: Path, pairs
) -> None:
    result = tune_positions(base, "pi", LT, tmp_path / "d", train_file=pairs, objective="distill",
                            config=tiny_config(max_steps=12, learning_rate=2e-2))
    texts = [json.loads(line)["positive"] for line in pairs.read_text().splitlines()[:16]]
    offsets = [(7 * i) % (LT - LO) for i in range(16)]
    untuned = tmp_path / "untuned"
    tune_positions(base, "pi", LT, untuned, train_file=pairs, objective="distill",
                   config=tiny_config(max_steps=1, learning_rate=1e-12))  # the extended table, as initialised
    before = mean_distill_loss(untuned, base, texts, offsets)
    after = mean_distill_loss(result.folder, base, texts, offsets)
    assert after < 0.7 * before, (before, after)
    original = load_file(str(base / "model.safetensors"))
    tuned = load_file(str(result.folder / "model.safetensors"))
    for name, value in original.items():
        if name != TABLE:
            assert torch.equal(value, tuned[name]), name
    assert result.record["training"]["objective"] == "distill"


@pytest.mark.slow
def test_tune_command_takes_the_objective(base: Path, tmp_path: Path, pairs, capsys) -> None:
    output = tmp_path / "cli"
    code = main(["tune", "--model", str(base), "--method", "rp", "--max-length", str(LT), "--output", str(output),
                 "--train-file", str(pairs), "--objective", "both", "--distill-weight", "0.5", "--max-steps", "2",
                 "--batch-size", "8", "--hard-negatives", "1", "--warmup-steps", "1", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((output / "longembed_tuning.json").read_text())
    assert record["training"]["objective"] == "both" and record["training"]["distill_weight"] == 0.5
