"""Position tuning, export and the shared contrastive trainer, against independent references.

- the extended tables against the paper's definitions written out row by row;
- PoSE ids against Appendix B (contiguous, u in 0..Lt-Lo, both ends reached);
- the loss against a naive loop over InfoNCE / Jina v2 equations (3)-(5);
- a tiny BERT tuned for a few steps: every original weight and row bit-identical, short inputs equal
  to the original model, the folder reopens with its method, exports to a plain sentence-transformers
  folder that gives longembed's vectors for long inputs, and a killed run resumes;
- the training data never holds a benchmark question or paragraph.
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
from conftest import DATA_DIR, LO, build_tiny, require_data, slow_fixture, words
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
from transformers import TrainerCallback

from longembed import load_encoder
from longembed.cli.main import main
from longembed.export import export_model
from longembed.extension.ape import (
    ExtendedTable,
    extended_position_table,
    extended_table_position_ids,
    interpolated_position_matrix,
)
from longembed.tasks import get_task
from longembed.training.contrastive import ContrastiveConfig, info_nce_loss, pairs_dataset
from longembed.training.data import (
    TrainingPair,
    hotpotqa_pairs,
    read_pairs_jsonl,
    split_held_out,
    squad_pairs,
)
from longembed.training.jina.config import JinaRecipeConfig
from longembed.training.mlm.config import MLMConfig
from longembed.training.positions import pose_position_ids
from longembed.training.retrofit.config import RetrofitConfig
from longembed.training.runs import incomplete_reason
from longembed.training.tune import default_tuning_config, tune_positions

LT = 4 * LO  # tiny models: Lo = 32, tuned to 128


# ----------------------------------------------------------------------------- tables and ids
def test_extended_tables_follow_the_papers_position_maps() -> None:
    torch.manual_seed(0)
    e_o = torch.randn(8, 3)
    pi, pi_kept = extended_position_table(e_o, "pi", 32)
    assert torch.equal(pi, interpolated_position_matrix(e_o, 4))
    for p in range(32):  # naive: E_o at p / s, linear between neighbours, clamped at the end
        left, frac = divmod(p, 4)
        right = min(left + 1, 7)
        assert torch.allclose(pi[p], e_o[left] * (1 - frac / 4) + e_o[right] * frac / 4, atol=1e-6)
    assert pi_kept.tolist() == [p % 4 == 0 for p in range(32)]
    gp, _ = extended_position_table(e_o, "gp", 32)
    assert all(torch.equal(gp[p], e_o[p // 4]) for p in range(32))
    rp, rp_kept = extended_position_table(e_o, "rp", 20)
    assert all(torch.equal(rp[p], e_o[p % 8]) for p in range(20))
    assert rp_kept.tolist() == [p < 8 for p in range(20)]


def test_extended_table_ids_read_original_rows_for_short_inputs() -> None:
    table = ExtendedTable("pi", 8, 32)  # S = 4
    lengths = torch.tensor([5, 30])
    ids = extended_table_position_ids(table, "pi", lengths, 30, torch.tensor([1, 4]))
    assert ids[0, :5].tolist() == [0, 4, 8, 12, 16]  # s = 1: the original rows
    assert ids[1].tolist() == list(range(30))  # s = S: the rows in order
    half = extended_table_position_ids(table, "pi", torch.tensor([12]), 12, torch.tensor([2]))
    assert half[0].tolist() == [2 * p for p in range(12)]  # s = 2: position p / 2 is row 2p
    odd = extended_table_position_ids(table, "pi", torch.tensor([12]), 12, torch.tensor([3]))
    assert odd.is_floating_point() and torch.allclose(odd[0], torch.arange(12) * 4 / 3)
    rp = extended_table_position_ids(ExtendedTable("rp", 8, 32), "rp", torch.tensor([40]), 40, torch.tensor([5]))
    assert rp[0].tolist() == [p % 32 for p in range(40)]


def test_pose_ids_are_contiguous_from_u_in_the_papers_range() -> None:
    mask = torch.tensor([[1] * 6 + [0] * 2] * 4000)
    ids = pose_position_ids(mask, target_length=40, original_length=8, offset=2,
                            generator=torch.Generator().manual_seed(0))
    u = ids[:, 0] - 2
    assert int(u.min()) == 0 and int(u.max()) == 40 - 8  # U{0..Lt-Lo}, both ends reached
    assert torch.equal(ids[:, :6] - ids[:, :1], torch.arange(6).expand(4000, -1))
    assert (ids[:, 6:] == 2).all()  # padding
    assert len(set(u.tolist())) == 33
    with pytest.raises(ValueError, match="at most Lo"):
        pose_position_ids(torch.ones(1, 9), 40, 8)


# ----------------------------------------------------------------------------- the loss
def _naive_loss(q, p, negatives, tau, symmetric):
    """Jina v2 eq. (5) (eq. 3 + 4 without negatives), one row at a time; directions averaged."""
    def s(a, b):
        return float(torch.nn.functional.cosine_similarity(a, b, dim=0)) / tau

    k = len(q)
    forward = backward = 0.0
    for i in range(k):
        denominator = sum(math.exp(s(q[i], p[j])) + sum(math.exp(s(q[i], n[j])) for n in negatives) for j in range(k))
        forward += -(s(q[i], p[i]) - math.log(denominator))
        backward += -(s(p[i], q[i]) - math.log(sum(math.exp(s(p[i], q[j])) for j in range(k))))
    forward, backward = forward / k, backward / k
    return (forward + backward) / 2 if symmetric else forward


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("negatives", [0, 2])
def test_info_nce_matches_the_papers_formula(tiny_models, symmetric, negatives) -> None:
    model = SentenceTransformer(str(tiny_models["bert"]), device="cpu")
    loss = info_nce_loss(model, temperature=0.05, symmetric=symmetric)
    g = torch.Generator().manual_seed(1)
    q, p = torch.randn(5, 16, generator=g), torch.randn(5, 16, generator=g)
    ns = [torch.randn(5, 16, generator=g) for _ in range(negatives)]
    got = float(loss.compute_loss_from_embeddings([q, p, *ns], None))
    assert got == pytest.approx(_naive_loss(q, p, ns, 0.05, symmetric), rel=1e-5)


def test_pairs_dataset_fills_missing_negatives_from_other_groups() -> None:
    pairs = [TrainingPair(f"q{i}", f"p{i}", ("hard",) if i == 0 else (), group=f"g{i}") for i in range(6)]
    data = pairs_dataset(pairs, hard_negatives=2, seed=0)
    assert data.column_names == ["query", "positive", "negative_1", "negative_2"]
    assert data[0]["negative_1"] == "hard"
    for row, pair in zip(data, pairs, strict=True):
        assert pair.positive not in (row["negative_1"], row["negative_2"])
        assert row["negative_1"] != row["negative_2"]


def test_contrastive_config_round_trips_and_checks() -> None:
    config = ContrastiveConfig(batch_size=4, symmetric=True, temperature=0.05)
    assert ContrastiveConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="unknown"):
        ContrastiveConfig.from_dict({"batchsize": 3})
    with pytest.raises(ValueError, match="tau"):
        ContrastiveConfig(temperature=0)


@pytest.mark.parametrize(
    ("config", "kind"),
    [(ContrastiveConfig(batch_size=4, temperature=0.05), "contrastive training"),
     (MLMConfig(batch_size=8, whole_word_mask=False), "MLM"),
     (RetrofitConfig(max_steps=5, slope_scale=0.5), "retrofit")],
)
def test_every_flat_training_config_round_trips_overrides_and_names_unknown_options(config, kind: str) -> None:
    """The three flat configs share TrainingConfig (a FlatConfig): JSON round trip, named overrides that keep the checks, and an
    unknown name refused with the config's kind and its known fields."""
    assert type(config).from_dict(json.loads(json.dumps(config.to_dict()))) == config
    changed = config.with_overrides(seed=7)
    assert changed.seed == 7 and changed.to_dict() == {**config.to_dict(), "seed": 7} and config.seed == 0
    for bad in (lambda: type(config).from_dict({"sead": 1}), lambda: config.with_overrides(sead=1)):
        with pytest.raises(ValueError, match=f"unknown {kind} option.*'sead'.*known: .*'seed'"):
            bad()
    with pytest.raises(ValueError, match="batch_size"):
        config.with_overrides(batch_size=0)  # __post_init__ runs on the copy


#: Each config's to_dict() as written before the configs shared TrainingConfig (saved run records hold these).
_SAVED_BEFORE_THE_BASE = {
    ContrastiveConfig: {"batch_size": 512, "learning_rate": 0.0005, "warmup_steps": 100, "epochs": 3.0, "max_steps": None,
                        "weight_decay": 0.01, "temperature": 0.01, "symmetric": False, "hard_negatives": 7,
                        "max_seq_length": None, "save_steps": 100, "logging_steps": 10, "seed": 0, "precision": "fp32",
                        "device": None},
    MLMConfig: {"training_length": 128, "batch_size": 32, "gradient_accumulation_steps": 1, "learning_rate": 0.001,
                "warmup_steps": 60, "max_steps": 600, "adam_beta1": 0.9, "adam_beta2": 0.98, "adam_epsilon": 1e-06,
                "weight_decay": 0.01, "max_grad_norm": 1.0, "mlm_probability": 0.3, "whole_word_mask": True,
                "mask_replace_prob": 0.8, "random_replace_prob": 0.1, "save_steps": 100, "logging_steps": 20,
                "seed": 0, "precision": "fp32", "device": None},
    RetrofitConfig: {"max_steps": 2000, "batch_size": 16, "max_seq_length": None, "min_seq_length": 64,
                     "learning_rate": 0.0001, "warmup_steps": 100, "weight_decay": 0.01, "token_weight": 1.0,
                     "slope_scale": 1.0, "pairs_weight": 0.0, "pairs_batch_size": 16, "pairs_temperature": 0.05,
                     "hard_negatives": 1, "held_out_articles": 5, "save_steps": 100, "logging_steps": 10, "seed": 0,
                     "precision": "fp32", "device": None},
}


@pytest.mark.parametrize("kind", list(_SAVED_BEFORE_THE_BASE), ids=lambda k: k.__name__)
def test_configs_saved_before_the_shared_base_load_unchanged_with_the_same_defaults(kind) -> None:
    """The shared TrainingConfig changed no default and no name: an old record loads, equals the default
    config and writes back the same values."""
    saved = _SAVED_BEFORE_THE_BASE[kind]
    assert kind().to_dict() == saved
    assert kind.from_dict(saved) == kind() and kind.from_dict(saved).to_dict() == saved


def test_published_retrofit_records_and_the_jina_recipe_load_unchanged() -> None:
    """Every committed retrofit record's config loads and writes back the same values; so does a recipe."""
    records = sorted((Path(__file__).resolve().parents[2] / "results").rglob("longembed_retrofit.json"))
    assert records
    for path in records:
        saved = json.loads(path.read_text())["config"]
        assert RetrofitConfig.from_dict(saved).to_dict() == saved, path
    recipe = JinaRecipeConfig().to_dict()
    assert recipe["mlm"] == _SAVED_BEFORE_THE_BASE[MLMConfig]
    assert JinaRecipeConfig.from_dict(json.loads(json.dumps(recipe))) == JinaRecipeConfig()


@pytest.mark.parametrize(("kind", "field", "value", "message"), [
    (ContrastiveConfig, "learning_rate", 0.0, "learning_rate must be positive"),
    (MLMConfig, "warmup_steps", -1, "warmup_steps and weight_decay >= 0"),
    (RetrofitConfig, "weight_decay", -0.1, "warmup_steps and weight_decay >= 0"),
    (ContrastiveConfig, "precision", "fp8", "precision must be one of"),
    (MLMConfig, "max_steps", None, "max_steps must be a positive integer"),  # MLM and retrofit need a step count
    (RetrofitConfig, "max_steps", None, "max_steps must be a positive integer"),
    (ContrastiveConfig, "max_steps", 0, "max_steps must be a positive integer"),
    (MLMConfig, "logging_steps", True, "logging_steps must be a positive integer"),
])
def test_the_shared_checks_hold_for_every_training_config(kind, field: str, value, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kind(**{field: value})
    assert ContrastiveConfig(max_steps=None).max_steps is None  # contrastive runs may count epochs instead


# ----------------------------------------------------------------------------- tuning end to end
def _pairs_file(folder: Path, n: int = 48) -> Path:
    path = folder / "pairs.jsonl"
    rows = [{"query": words(4, seed=i), "positive": words(20, seed=1000 + i), "negatives": [words(20, seed=2000 + i)]}
            for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _tiny_config(**overrides) -> ContrastiveConfig:
    return default_tuning_config(**{"batch_size": 8, "max_steps": 4, "warmup_steps": 1, "hard_negatives": 1,
                                    "save_steps": 2, "logging_steps": 1, "learning_rate": 5e-2, **overrides})


@pytest.fixture(scope="module")
@slow_fixture  # two tuning runs
def tuned(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tuning")
    base = build_tiny("bert", root / "base")
    pairs = _pairs_file(root)
    out = {"base": base, "pairs": pairs}
    for method in ("pi", "rp"):
        out[method] = tune_positions(base, method, LT, root / f"tuned-{method}", train_file=pairs,
                                     config=_tiny_config()).folder
    return out


@pytest.mark.parametrize("method", ["pi", "rp"])
def test_tuning_trains_only_the_added_rows(tuned, method) -> None:
    before = load_file(str(tuned["base"] / "model.safetensors"))
    after = load_file(str(tuned[method] / "model.safetensors"))
    key = "embeddings.position_embeddings.weight"
    for name, value in before.items():
        if name != key:
            assert torch.equal(value, after[name]), name
    table = after[key]
    assert table.shape[0] == LT
    initial, kept = extended_position_table(before[key], method, LT)
    assert torch.equal(table[kept], initial[kept])  # original rows: bit-identical
    changed = (table[~kept] != initial[~kept]).any(dim=1)
    assert changed.float().mean() > 0.5  # PoSE reached most added rows in 4 steps


@pytest.mark.parametrize("method", ["pi", "rp"])
def test_tuned_folder_opens_with_its_method_and_keeps_short_inputs_exact(tuned, method) -> None:
    encoder = load_encoder(tuned[method])
    assert (encoder.method, encoder.max_length, encoder.original_length) == (method, LT, LO)
    short = [words(n, seed=n) for n in (3, 10, 25)]
    original = load_encoder(tuned["base"]).encode(short)
    assert np.abs(encoder.encode(short) - original).max() <= 1e-6
    record = json.loads((tuned[method] / "longembed_positions.json").read_text())
    assert record["tuned"] and record["scale"] == 4


@pytest.mark.parametrize("method", ["pi", "rp"])
def test_exported_tuned_folder_gives_longembeds_vectors_in_sentence_transformers(tuned, tmp_path, method) -> None:
    folder = export_model(tuned[method], None, None, tmp_path / "plain")
    long_texts = [words(80, seed=1), words(115, seed=2)]
    expected = load_encoder(tuned[method]).encode(long_texts)
    assert min(len(load_encoder(tuned[method]).tokenizer(t)["input_ids"]) for t in long_texts) > LO
    got = SentenceTransformer(str(folder), device="cpu").encode(long_texts)
    assert np.abs(got - expected).max() <= 1e-5


@pytest.mark.parametrize("method", ["pi", "gp", "rp"])
def test_export_of_training_free_ape_methods(tiny_models, tmp_path, method) -> None:
    folder = export_model(tiny_models["bert"], method, LT, tmp_path / method)
    texts = [words(90, seed=5), words(110, seed=6)]
    expected = load_encoder(tiny_models["bert"], method=method, max_length=LT).encode(texts)
    assert np.abs(SentenceTransformer(str(folder), device="cpu").encode(texts) - expected).max() <= 1e-5
    # longembed reads the exported table as what it is: short inputs on the original rows
    short = [words(7, seed=3)]
    base = load_encoder(tiny_models["bert"]).encode(short)
    assert np.abs(load_encoder(folder).encode(short) - base).max() <= 1e-6


@pytest.mark.parametrize(
    "method, options",
    [("pi", {}), ("ntk", {}), ("ntk", {"ntk_variant": "dynamic"}), ("yarn", {})],
)
def test_export_of_rope_methods_writes_rotary_parameters(tiny_models, tmp_path, method, options) -> None:
    folder = export_model(tiny_models["nomic"], method, LT, tmp_path / method, **options)
    texts = [words(90, seed=7), words(120, seed=8)]
    expected = load_encoder(tiny_models["nomic"], method=method, max_length=LT, **options).encode(texts)
    plain = SentenceTransformer(str(folder), device="cpu")
    if options.get("ntk_variant") == "dynamic":
        # transformers' dynamic rope follows the longest (padded) input seen so far, longembed each
        # document's own length: they agree on one text at a time, shortest first
        got = np.stack([plain.encode(text) for text in texts])
    else:
        got = plain.encode(texts)
    assert np.abs(got - expected).max() <= 1e-5


def test_export_refuses_what_no_plain_config_expresses(tiny_models, tmp_path) -> None:
    for model, method in (("nomic", "selfextend"), ("nomic", "gp"), ("bert", "pcw")):
        with pytest.raises(ValueError, match="exportable"):
            export_model(tiny_models[model], method, LT, tmp_path / f"x-{method}")
    with pytest.raises(ValueError, match="per_document"):
        export_model(tiny_models["bert"], "pi", LT, tmp_path / "x", scale="per_document")
    with pytest.raises(ValueError, match="extended with 'pi'"):
        load_encoder(export_model(tiny_models["bert"], "pi", LT, tmp_path / "pi"), method="gp", max_length=LT)


def assert_same_weights(folder: Path, reference: Path, base: Path) -> None:
    """The weights of ``base``'s parameters in ``folder`` are bit-identical to ``reference``'s.  (A pooler
    the tiny base lacks is initialised at random by transformers when the tuning loads it: used by
    nothing, trained by nothing, it is left out.)"""
    a, b = load_file(str(folder / "model.safetensors")), load_file(str(reference / "model.safetensors"))
    names = load_file(str(base / "model.safetensors")).keys()
    assert a.keys() == b.keys() and names <= a.keys()
    changed = {k: float((a[k] - b[k]).abs().max()) for k in names if not torch.equal(a[k], b[k])}
    assert not changed, f"not bit-identical to the uninterrupted run: {changed}"


@pytest.mark.slow
def test_a_killed_tuning_resumes_from_its_checkpoint(tuned, tmp_path, monkeypatch) -> None:
    """Killed during step 3, rerun: it resumes from checkpoint-2 and ends bit-identical to the
    uninterrupted run (``tuned``), as ``train contextual --resume`` does."""
    original_step = SentenceTransformerTrainer.training_step
    calls = {"n": 0}

    def dies_at_step_3(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformerTrainer, "training_step", dies_at_step_3)
    output = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        tune_positions(tuned["base"], "pi", LT, output, train_file=tuned["pairs"], config=_tiny_config())
    assert (output / "checkpoints" / "checkpoint-2").is_dir()
    monkeypatch.setattr(SentenceTransformerTrainer, "training_step", original_step)
    with pytest.raises(ValueError, match="different run"):
        tune_positions(tuned["base"], "pi", LT, output, train_file=tuned["pairs"], config=_tiny_config(seed=1))
    result = tune_positions(tuned["base"], "pi", LT, output, train_file=tuned["pairs"], config=_tiny_config())
    assert result.summary.resumed_from.endswith("checkpoint-2") and result.summary.steps == 4
    assert not (output / "checkpoints").exists()
    assert_same_weights(result.folder, tuned["pi"], tuned["base"])  # issue 51: the PoSE draws continue where the kill left them
    with pytest.raises(FileExistsError, match="finished"):
        tune_positions(tuned["base"], "pi", LT, output, train_file=tuned["pairs"], config=_tiny_config())


@pytest.mark.slow
def test_a_tuning_whose_checkpoint_lost_its_state_starts_afresh(
    tuned, tmp_path, monkeypatch, caplog
) -> None:
    """Issue 40: a checkpoint without trainer_state.json (a kill while it was written, by an older longembed)
    no longer fails every rerun: it is skipped with a log line naming it, and with no complete checkpoint
    before it the run starts afresh, to the uninterrupted run's weights."""
    original_step = SentenceTransformerTrainer.training_step
    calls = {"n": 0}

    def dies_at_step_3(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformerTrainer, "training_step", dies_at_step_3)
    output = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        tune_positions(tuned["base"], "pi", LT, output, train_file=tuned["pairs"], config=_tiny_config())
    monkeypatch.setattr(SentenceTransformerTrainer, "training_step", original_step)
    broken = output / "checkpoints" / "checkpoint-2"
    (broken / "trainer_state.json").unlink()
    with caplog.at_level(logging.WARNING, logger="longembed.training.runs"):
        result = tune_positions(tuned["base"], "pi", LT, output, train_file=tuned["pairs"], config=_tiny_config())
    assert result.summary.resumed_from is None and result.summary.steps == 4
    assert any(str(broken) in r.getMessage() and "no trainer_state.json" in r.getMessage() for r in caplog.records)
    assert load_encoder(output).method == "pi" and not (output / "checkpoints").exists()
    assert_same_weights(output, tuned["pi"], tuned["base"])


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_tuned_exported_and_checkpointed_weights_follow_the_umask(tuned, tmp_path, umask) -> None:
    """Issue 40: safetensors writes weights 0600 whatever the umask; the tuned folder, its checkpoints and
    an export get what ``open()`` gives, as every other file does."""
    previous = os.umask(umask)
    try:
        output = tmp_path / "tuned"
        tune_positions(tuned["base"], "rp", LT, output, train_file=tuned["pairs"],
                       config=_tiny_config(max_steps=2, save_steps=1),
                       )
        exported = export_model(output, None, None, tmp_path / "plain")
        reference = tmp_path / "made-by-open"
        reference.write_text("x")
    finally:
        os.umask(previous)
    expected = stat.S_IMODE(reference.stat().st_mode)
    assert expected == 0o666 & ~umask
    weights = [output / "model.safetensors", *exported.rglob("*.safetensors")]
    assert len(weights) >= 2
    assert {str(w): stat.S_IMODE(w.stat().st_mode) for w in weights} == {str(w): expected for w in weights}


@pytest.mark.slow
def test_checkpoints_are_renamed_into_place_whole(tuned, tmp_path) -> None:
    """Every checkpoint a tuning run leaves is complete, with umask-following weights, and no staging folder
    stays behind (the run is stopped after step 2, before its last checkpoint would be removed)."""
    previous = os.umask(0o022)
    try:
        output = tmp_path / "stopped"

        class StopAfter2(TrainerCallback):
            def on_save(self, args, state, control, **kwargs):
                if state.global_step == 2:
                    raise KeyboardInterrupt("stopped")

        original_init = SentenceTransformerTrainer.__init__

        def with_callback(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            self.add_callback(StopAfter2())

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(SentenceTransformerTrainer, "__init__", with_callback)
            with pytest.raises(KeyboardInterrupt):
                tune_positions(tuned["base"], "pi", LT, output, train_file=tuned["pairs"],
                               config=_tiny_config(save_steps=1))
    finally:
        os.umask(previous)
    checkpoints = output / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.name.startswith("checkpoint")) == [
        "checkpoint-1", "checkpoint-2"]
    assert not (checkpoints / ".incomplete").exists()
    for folder in checkpoints.glob("checkpoint-*"):
        assert incomplete_reason(folder) is None
        assert stat.S_IMODE((folder / "model.safetensors").stat().st_mode) == 0o644


def test_tuning_refuses_bad_input(tiny_models, tuned, tmp_path) -> None:
    with pytest.raises(ValueError, match="RoPE|ROPE"):
        tune_positions(tiny_models["nomic"], "pi", LT, tmp_path / "a", train_file=tuned["pairs"], config=_tiny_config())
    with pytest.raises(ValueError, match="one of"):
        tune_positions(tuned["base"], "gp", LT, tmp_path / "b", train_file=tuned["pairs"], config=_tiny_config())
    with pytest.raises(ValueError, match="weight_decay"):
        tune_positions(tuned["base"], "pi", LT, tmp_path / "c", train_file=tuned["pairs"],
                       config=_tiny_config(weight_decay=0.01))
    with pytest.raises(ValueError, match="already extended"):
        tune_positions(tuned["pi"], "pi", LT, tmp_path / "d", train_file=tuned["pairs"], config=_tiny_config())


@pytest.mark.slow
def test_tune_and_export_commands(tuned, tmp_path, capsys) -> None:
    out = tmp_path / "cli-tuned"
    code = main(["tune", "--model", str(tuned["base"]), "--method", "rp", "--max-length", str(LT), "--output", str(out),
                 "--train-file", str(tuned["pairs"]), "--max-steps", "2", "--batch-size", "8", "--hard-negatives", "1",
                 "--warmup-steps", "1"])
    printed = capsys.readouterr().out  # the trainer's progress logs, then the summary
    assert code == 0 and json.loads(printed[printed.rindex('{\n  "output"'):])["steps"] == 2
    assert load_encoder(out).method == "rp"
    assert main(["export", "--model", str(out), "--output", str(tmp_path / "plain")]) == 0
    assert main(["export", "--model", str(tuned["base"]), "--method", "selfextend", "--max-length", "64",
                 "--output", str(tmp_path / "x")]) == 2
    assert "longembed export: error:" in capsys.readouterr().err


def test_user_pairs_file_errors_name_the_line(tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"query": "a", "positive": "b"}\n{"query": "a"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: missing field"):
        read_pairs_jsonl(path)
    path.write_text('{"query": "a", "positive": "b", "negatives": "c"}\n')
    with pytest.raises(ValueError, match="list of texts"):
        read_pairs_jsonl(path)


# ----------------------------------------------------------------------------- training data
@pytest.mark.slow
def test_training_pairs_never_hold_a_benchmark_question_or_paragraph() -> None:
    require_data("hotpotqa_dev_distractor")
    require_data("squad")
    benchmark = get_task("hotpotqa").load(DATA_DIR)
    questions = set(benchmark.queries.values())
    paragraphs = set()
    for document in benchmark.corpus.values():
        for passage in document.split("\nPassage ")[0:]:
            _, title, text = passage.split("\n", 2)
            paragraphs.add(f"{title}\n{text}")
    assert len(paragraphs) > 5000
    source = hotpotqa_pairs(DATA_DIR)
    assert len(source.pairs) > 10000
    for pair in source.pairs:
        assert pair.query not in questions
        assert pair.positive not in paragraphs
        assert not paragraphs & set(pair.negatives)
    train, held = split_held_out(squad_pairs(DATA_DIR).pairs, 0.1)
    assert not {p.group for p in train} & {p.group for p in held}
