"""Tests of the Jina v2 training recipe: the MLM model and head, stage I's masking and training, the
contrastive stages, the recipe config and the ``longembed train jina`` command, on tiny models.

References are independent of the code under test: the MLM head's logits from a naive forward over
the released checkpoint's key names (the encoder's from ``test_jina_bert.naive_jina_forward``), and
the masking statistics counted directly from the collator's output.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import VOCAB, words
from safetensors.torch import load_file, save_file
from test_jina_bert import jina_config_json, jina_state_dict, naive_jina_forward, tiny_config
from transformers import BertConfig, BertTokenizer, TrainerCallback, TrainingArguments

from longembed import load_encoder
from longembed.cli import train as train_cli
from longembed.cli.parsers import train as train_parser
from longembed.evaluation.runner import DATA_DIR_ENV
from longembed.models.jina_bert import JinaBertConfig, JinaBertForMaskedLM, JinaBertModel
from longembed.training.contrastive import ContrastiveConfig, SentenceTransformer, train_contrastive
from longembed.training.jina import (
    RECORD_FILE,
    JinaRecipeConfig,
    RecipeData,
    held_out_retrieval,
    read_texts_jsonl,
    recipe_pairs,
    train_jina,
)
from longembed.training.mlm import (
    MaskedTokensTrainer,
    MLMConfig,
    MLMModelConfig,
    build_mlm_model,
    load_tokenizer,
    mlm_accuracy_by_length,
    mlm_collator,
    tokenize_documents,
    train_mlm,
)

HEAD_KEYS = {
    "cls.predictions.bias",
    "cls.predictions.transform.dense.weight",
    "cls.predictions.transform.dense.bias",
    "cls.predictions.transform.LayerNorm.weight",
    "cls.predictions.transform.LayerNorm.bias",
}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


# ---------------------------------------------------------------- helpers


def released_mlm_state(config: JinaBertConfig, seed: int = 5) -> dict[str, torch.Tensor]:
    """Random weights under the released MLM checkpoint's names: 'bert.' + encoder, 'cls.' head."""
    g = torch.Generator().manual_seed(seed)
    h = config.hidden_size
    state = {f"bert.{k}": v for k, v in jina_state_dict(config, seed=seed).items()}
    state["cls.predictions.transform.dense.weight"] = 0.1 * torch.randn(h, h, generator=g)
    state["cls.predictions.transform.dense.bias"] = 0.1 * torch.randn(h, generator=g)
    state["cls.predictions.transform.LayerNorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
    state["cls.predictions.transform.LayerNorm.bias"] = 0.1 * torch.randn(h, generator=g)
    state["cls.predictions.bias"] = 0.1 * torch.randn(config.vocab_size, generator=g)
    return state


def naive_mlm_logits(
    state: dict, config: JinaBertConfig, ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """dense -> GELU -> LayerNorm -> x E^T + b, in float64, from the checkpoint's tensors."""
    encoder = {k.removeprefix("bert."): v for k, v in state.items() if k.startswith("bert.")}
    x = naive_jina_forward(encoder, config, ids, mask)
    sd = {k: v.double() for k, v in state.items()}
    x = x @ sd["cls.predictions.transform.dense.weight"].T + sd["cls.predictions.transform.dense.bias"]
    x = torch.nn.functional.gelu(x)
    x = torch.nn.functional.layer_norm(
        x,
        (config.hidden_size,),
        sd["cls.predictions.transform.LayerNorm.weight"],
        sd["cls.predictions.transform.LayerNorm.bias"],
        config.layer_norm_eps,
    )
    return x @ sd["bert.embeddings.word_embeddings.weight"].T + sd["cls.predictions.bias"]


def mixed_text(n: int, seed: int) -> str:
    """n words: common ones (one token each) and made-up ones (several word pieces each)."""
    rng = random.Random(seed)
    common = words(n, seed).split()
    out = []
    for w in common:
        if rng.random() < 0.4:
            out.append("".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 5))))
        else:
            out.append(w)
    return " ".join(out)


@pytest.fixture(scope="module")
def tiny_tokenizer_folder(tmp_path_factory) -> Path:
    """A folder with a fast WordPiece tokenizer over conftest's tiny vocabulary (81 pieces).

    Built from the vocabulary dict: transformers 5's BertTokenizer ignores ``vocab_file=``.
    """
    folder = tmp_path_factory.mktemp("tokenizer")
    tokenizer = BertTokenizer(vocab={piece: i for i, piece in enumerate(VOCAB)})
    assert len(tokenizer) == len(VOCAB) and tokenizer("the")["input_ids"] == [2, VOCAB.index("the"), 3]
    tokenizer.save_pretrained(folder)
    return folder


TINY_MODEL = MLMModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)


def tiny_recipe(root: Path, tokenizer_folder: Path, **model_overrides) -> JinaRecipeConfig:
    """A recipe with tiny sizes and a few steps, on jsonl text and pairs written under ``root``."""
    texts = root / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": mixed_text(40, i)}) + "\n" for i in range(24)))
    pairs = root / "pairs.jsonl"
    with pairs.open("w") as f:
        for i in range(40):
            topic = words(3, 100 + i)
            f.write(
                json.dumps(
                    {
                        "query": f"{topic} {LETTERS[i % 26]}",
                        "positive": f"{topic} {LETTERS[i % 26]} {words(12, 200 + i)}",
                        "negatives": [words(12, 300 + i), words(10, 400 + i)],
                    }
                )
                + "\n"
            )
    contrastive = dict(
        warmup_steps=1, temperature=0.05, symmetric=True, save_steps=2, logging_steps=1, seed=0
    )
    return JinaRecipeConfig(
        model=MLMModelConfig(**{**TINY_MODEL.__dict__, **model_overrides}),
        mlm=MLMConfig(
            training_length=24, batch_size=4, max_steps=3, warmup_steps=1, save_steps=2, logging_steps=1
        ),
        pairs=ContrastiveConfig(batch_size=8, max_steps=2, hard_negatives=0, **contrastive),
        negatives=ContrastiveConfig(batch_size=4, max_steps=2, hard_negatives=2, **contrastive),
        data=RecipeData(
            tokenizer=str(tokenizer_folder),
            text_file=str(texts),
            train_file=str(pairs),
            held_out_fraction=0.25,
        ),
    )


def mean_pool(model: JinaBertModel, tokenizer, texts: list[str]) -> np.ndarray:
    """Mean of the last hidden states over each text's tokens, one text at a time (no padding)."""
    out = []
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(text, return_tensors="pt")
            out.append(model(enc["input_ids"]).last_hidden_state[0].mean(dim=0).numpy())
    return np.stack(out)


# ---------------------------------------------------------------- JinaBertForMaskedLM


@pytest.mark.parametrize("with_tied_copies", [False, True])
def test_mlm_head_released_layout_loads_and_round_trips_bit_equal(tmp_path, with_tied_copies):
    """A folder in the released key layout (optionally with the tied decoder copies that torch.save'd
    checkpoints hold) loads with no missing or unexpected keys, its logits equal the naive head over
    the checkpoint's tensors, and save_pretrained -> from_pretrained gives bit-equal logits."""
    config = tiny_config(6)
    state = released_mlm_state(config)
    weights = dict(state)
    if with_tied_copies:
        weights["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].clone()
        weights["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].clone()
    (tmp_path / "released").mkdir()
    save_file({k: v.contiguous() for k, v in weights.items()}, tmp_path / "released" / "model.safetensors")
    released_config = {**jina_config_json(config), "architectures": ["JinaBertForMaskedLM"]}
    (tmp_path / "released" / "config.json").write_text(json.dumps(released_config))

    model, info = JinaBertForMaskedLM.from_pretrained(tmp_path / "released", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    model.eval()
    # tied: the decoder is the word-embedding matrix and the head's bias, not copies
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
    ids = torch.randint(1, config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        logits = model(ids, attention_mask=mask).logits
    real = mask.bool()
    expected = naive_mlm_logits(state, config, ids, mask)
    torch.testing.assert_close(logits[real].double(), expected[real], rtol=1e-5, atol=1e-5)

    model.save_pretrained(tmp_path / "saved")
    saved = load_file(tmp_path / "saved" / "model.safetensors")
    assert set(saved) == set(state)  # the released names; the tied decoder is stored once, as in BERT
    assert set(saved) >= HEAD_KEYS and all(k.startswith("bert.") for k in set(saved) - HEAD_KEYS)
    reloaded = JinaBertForMaskedLM.from_pretrained(tmp_path / "saved").eval()
    with torch.no_grad():
        assert torch.equal(reloaded(ids, attention_mask=mask).logits, logits)
        # the embedding model reads the same folder: the encoder under 'bert.', the head ignored
        encoder, info = JinaBertModel.from_pretrained(tmp_path / "saved", output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"]
        assert torch.equal(
            encoder.eval()(ids, attention_mask=mask).last_hidden_state,
            model.bert(ids, attention_mask=mask).last_hidden_state,
        )


def test_mlm_loss_is_the_cross_entropy_of_the_masked_tokens():
    torch.manual_seed(0)
    model = JinaBertForMaskedLM(tiny_config(4)).eval()
    ids = torch.randint(1, 50, (2, 10))
    labels = torch.full_like(ids, -100)
    labels[0, [1, 4]] = ids[0, [1, 4]]
    labels[1, 7] = 3
    with torch.no_grad():
        out = model(ids, labels=labels)
        logp = out.logits.log_softmax(-1)
        picked = [logp[0, 1, ids[0, 1]], logp[0, 4, ids[0, 4]], logp[1, 7, 3]]
        torch.testing.assert_close(out.loss, -torch.stack(picked).mean())
        # with the accumulated batch's count (Trainer's num_items_in_batch): sum / count
        summed = model(ids, labels=labels, num_items_in_batch=6).loss
        torch.testing.assert_close(summed, -torch.stack(picked).sum() / 6)


@pytest.mark.parametrize("positions", ["alibi", "absolute"])
def test_masked_tokens_trainer_loss_equals_the_models_own(tmp_path, tiny_tokenizer_folder, positions):
    """The Trainer's loss (head only at masked tokens) is the model's own labels loss."""
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    model = build_mlm_model(
        MLMModelConfig(**{**TINY_MODEL.__dict__, "positions": positions}), tokenizer, 24
    ).eval()
    dataset = tokenize_documents([mixed_text(30, i) for i in range(4)], tokenizer, 24)
    batch = mlm_collator(tokenizer, MLMConfig())([dataset[i] for i in range(4)])
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    trainer = MaskedTokensTrainer(model=model, args=args)
    inputs = {k: v for k, v in batch.items()}
    with torch.no_grad():
        loss = trainer.compute_loss(model, dict(inputs))
        expected = model(**inputs).loss
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-6)


def test_ape_twin_differs_only_in_positions_and_feed_forward(tiny_tokenizer_folder):
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    alibi = build_mlm_model(TINY_MODEL, tokenizer, 24)
    twin = build_mlm_model(MLMModelConfig(**{**TINY_MODEL.__dict__, "positions": "absolute"}), tokenizer, 24)
    assert isinstance(alibi, JinaBertForMaskedLM) and isinstance(twin.config, BertConfig)
    for name in (
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "vocab_size",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "layer_norm_eps",
        "hidden_act",
    ):
        assert getattr(alibi.config, name) == getattr(twin.config, name), name
    assert twin.config.max_position_embeddings == 24 and alibi.config.training_length == 24

    def ff_params(model, names):
        return sum(
            p.numel() for n, p in model.named_parameters() if any(n.endswith(f"layer.0.{k}") for k in names)
        )

    # GEGLU (gated_layers h x 2I, wo I x h) and the twin's GELU MLP (h x 3I/2, 3I/2 x h): same weights
    geglu = ff_params(alibi, ("mlp.gated_layers.weight", "mlp.wo.weight"))
    assert geglu == 3 * 32 * 48
    assert geglu == ff_params(twin, ("intermediate.dense.weight", "output.dense.weight"))
    assert twin.cls.predictions.decoder.weight is twin.bert.embeddings.word_embeddings.weight


# ---------------------------------------------------------------- stage I: masking


def test_whole_word_masking_rate_and_80_10_10(tiny_tokenizer_folder):
    """On a fixed seed: ~30% of the tokens masked, always whole words, never special tokens or
    padding; of the masked tokens ~80% [MASK], ~10% random, ~10% kept; same batch, same masks."""
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    dataset = tokenize_documents(
        [mixed_text(random.Random(i).randint(20, 60), i) for i in range(300)], tokenizer, 96
    )
    collator = mlm_collator(tokenizer, MLMConfig(seed=7))
    assert (collator.mask_replace_prob, collator.random_replace_prob) == (
        0.8,
        0.1,
    )  # the library would set 1, 0
    examples = [dataset[i] for i in range(len(dataset))]
    masked_tokens = real_tokens = as_mask = kept = 0
    for start in range(0, len(examples), 50):
        chunk = examples[start : start + 50]
        batch = collator(chunk)
        again = collator(chunk)
        assert torch.equal(batch["input_ids"], again["input_ids"]) and torch.equal(
            batch["labels"], again["labels"]
        )
        for row, example in enumerate(chunk):
            n = len(example["input_ids"])
            original = torch.tensor(example["input_ids"])
            labels, inputs = batch["labels"][row], batch["input_ids"][row]
            assert (labels[n:] == -100).all() and (inputs[n:] == tokenizer.pad_token_id).all()  # padding
            special = torch.tensor(example["special_tokens_mask"], dtype=torch.bool)
            chosen = labels[:n] != -100
            assert not chosen[special].any()
            assert torch.equal(labels[:n][chosen], original[chosen])
            # whole words: a run of tokens with touching offsets is masked entirely or not at all
            offsets = example["offset_mapping"]
            word = []
            for i in range(n + 1):
                new_word = i == n or special[i] or not word or offsets[i][0] != offsets[word[-1]][1]
                if new_word and word:
                    assert len({bool(chosen[j]) for j in word}) == 1, "a word was split by the mask"
                    word = []
                if i < n and not special[i]:
                    word.append(i)
            real_tokens += int((~special).sum())
            masked_tokens += int(chosen.sum())
            as_mask += int((inputs[:n][chosen] == tokenizer.mask_token_id).sum())
            kept += int((inputs[:n][chosen] == original[chosen]).sum())
    assert masked_tokens > 3000
    assert abs(masked_tokens / real_tokens - 0.30) < 0.03
    assert abs(as_mask / masked_tokens - 0.80) < 0.03
    # kept: the 10% left alone, plus random replacements that drew the original token (1 / |V|)
    expected_kept = 0.1 + 0.1 / len(VOCAB)
    assert abs(kept / masked_tokens - expected_kept) < 0.025
    assert abs((masked_tokens - as_mask - kept) / masked_tokens - (0.1 - 0.1 / len(VOCAB))) < 0.025


def test_masks_depend_only_on_seed_and_batch(tiny_tokenizer_folder):
    """A batch's masks are a function of (seed, token ids): not of earlier calls, not of the collator
    instance; another seed or another batch order gives other masks; token-level masking (no whole
    words) keeps the rate and never touches special tokens."""
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    dataset = tokenize_documents([mixed_text(40, i) for i in range(40)], tokenizer, 64)
    first, second = [dataset[i] for i in range(20)], [dataset[i] for i in range(20, 40)]
    collator = mlm_collator(tokenizer, MLMConfig(seed=3))
    before = collator(second)
    collator(first)
    after = collator(second)
    fresh = mlm_collator(tokenizer, MLMConfig(seed=3))(second)
    for batch in (after, fresh):
        assert torch.equal(batch["input_ids"], before["input_ids"]) and torch.equal(batch["labels"], before["labels"])
    assert not torch.equal(mlm_collator(tokenizer, MLMConfig(seed=4))(second)["labels"], before["labels"])
    assert not torch.equal(collator(second[::-1])["labels"], before["labels"].flip(0))
    tokens = mlm_collator(tokenizer, MLMConfig(seed=3, whole_word_mask=False))(second)
    special = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(e["special_tokens_mask"]) for e in second], batch_first=True, padding_value=1
    ).bool()
    chosen = tokens["labels"] != -100
    assert not chosen[special].any()
    assert abs(chosen.sum().item() / (~special).sum().item() - 0.3) < 0.05


def test_sequences_are_the_first_tokens_of_single_documents(tiny_tokenizer_folder):
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    texts = [mixed_text(80, 1), "the of and", mixed_text(5, 2)]
    dataset = tokenize_documents(texts, tokenizer, 16)
    assert len(dataset) == 3  # one sequence per document: no packing, no second window
    full = tokenizer(texts[0])["input_ids"]
    assert dataset[0]["input_ids"] == full[:15] + [tokenizer.sep_token_id]
    assert dataset[1]["input_ids"] == tokenizer(texts[1])["input_ids"]


# ---------------------------------------------------------------- stage I: training and resume


class _Killed(Exception):
    pass


class _KillAt(TrainerCallback):
    """Stops training with an exception after a step, as a kill would (checkpoints stay on disk)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise _Killed()


def _fixed_batch_loss(model, tokenizer, texts) -> float:
    dataset = tokenize_documents(texts, tokenizer, 24)
    batch = mlm_collator(tokenizer, MLMConfig(seed=123))([dataset[i] for i in range(len(dataset))])
    model.eval()
    with torch.no_grad():
        return float(model(**batch).loss)


@pytest.mark.slow
@pytest.mark.parametrize("positions", ["alibi", "absolute"])
def test_tiny_mlm_run_lowers_loss_and_resumes_to_the_same_weights(tmp_path, tiny_tokenizer_folder, positions):
    """Six steps lower the loss on a fixed masked batch; a run killed after step 4 and started again
    resumes from its step-3 checkpoint and ends with bit-identical weights to an uninterrupted run."""
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    size = MLMModelConfig(**{**TINY_MODEL.__dict__, "positions": positions})
    texts = [words(30, i % 3) for i in range(24)]  # three documents, repeated: learnable in a few steps
    config = MLMConfig(
        training_length=24,
        batch_size=4,
        max_steps=6,
        warmup_steps=1,
        learning_rate=5e-3,
        save_steps=3,
        logging_steps=1,
    )
    straight = build_mlm_model(size, tokenizer, 24)
    before = _fixed_batch_loss(straight, tokenizer, texts[:3])
    summary = train_mlm(straight, tokenizer, texts, tmp_path / "straight", config)
    assert summary.steps == 6 and summary.resumed_from is None and summary.tokens > 0
    assert _fixed_batch_loss(straight, tokenizer, texts[:3]) < before - 0.3

    with pytest.raises(_Killed):
        train_mlm(
            build_mlm_model(size, tokenizer, 24),
            tokenizer,
            texts,
            tmp_path / "killed",
            config,
            callbacks=[_KillAt(4)],
        )
    resumed = build_mlm_model(size, tokenizer, 24)
    summary = train_mlm(resumed, tokenizer, texts, tmp_path / "killed", config)
    assert summary.resumed_from is not None and summary.resumed_from.endswith("checkpoint-3")
    assert summary.steps == 6
    a, b = straight.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


class _KilledWhileSaving(Exception):
    pass


@pytest.mark.slow
def test_an_incomplete_checkpoint_is_skipped_and_the_previous_one_resumed(
    tmp_path, tiny_tokenizer_folder, monkeypatch, caplog
):
    """Issue 40: a run killed while writing checkpoint-4 (its weights written, not yet its RNG and trainer
    state) leaves no checkpoint-4 at all, and a checkpoint-4 that lacks trainer_state.json (an older
    longembed's, or damaged) is skipped with a log line naming it and what it lacks: both resume from
    checkpoint-2 and end with the weights of an uninterrupted run.  The checkpoint's weights follow the
    umask (safetensors writes them 0600)."""
    previous_umask = os.umask(0o022)
    try:
        tokenizer = load_tokenizer(tiny_tokenizer_folder)
        texts = [words(30, i % 3) for i in range(24)]
        config = MLMConfig(training_length=24, batch_size=4, max_steps=6, warmup_steps=1, learning_rate=5e-3,
                           save_steps=2, logging_steps=1)
        straight = build_mlm_model(TINY_MODEL, tokenizer, 24)
        train_mlm(straight, tokenizer, texts, tmp_path / "straight", config)

        # (a) killed inside the save of checkpoint-4
        original_save_rng = MaskedTokensTrainer._save_rng_state

        def dies_while_saving_step_4(self, output_dir):
            if self.state.global_step == 4:
                raise _KilledWhileSaving()
            return original_save_rng(self, output_dir)

        monkeypatch.setattr(MaskedTokensTrainer, "_save_rng_state", dies_while_saving_step_4)
        with pytest.raises(_KilledWhileSaving):
            train_mlm(build_mlm_model(TINY_MODEL, tokenizer, 24), tokenizer, texts, tmp_path / "a", config)
        monkeypatch.setattr(MaskedTokensTrainer, "_save_rng_state", original_save_rng)
        checkpoints = tmp_path / "a" / "checkpoints"
        assert sorted(p.name for p in checkpoints.glob("checkpoint-*")) == ["checkpoint-2"]
        assert stat.S_IMODE((checkpoints / "checkpoint-2" / "model.safetensors").stat().st_mode) == 0o644
        resumed_a = build_mlm_model(TINY_MODEL, tokenizer, 24)
        summary = train_mlm(resumed_a, tokenizer, texts, tmp_path / "a", config)
        assert summary.resumed_from.endswith("checkpoint-2") and summary.steps == 6

        # (b) a checkpoint-4 without its trainer state
        with pytest.raises(_Killed):
            train_mlm(build_mlm_model(TINY_MODEL, tokenizer, 24), tokenizer, texts, tmp_path / "b", config,
                      callbacks=[_KillAt(5)])
        broken = tmp_path / "b" / "checkpoints" / "checkpoint-4"
        (broken / "trainer_state.json").unlink()
        resumed_b = build_mlm_model(TINY_MODEL, tokenizer, 24)
        with caplog.at_level(logging.WARNING, logger="longembed.training.runs"):
            summary = train_mlm(resumed_b, tokenizer, texts, tmp_path / "b", config)
        assert summary.resumed_from.endswith("checkpoint-2") and summary.steps == 6
        skipped = [r.getMessage() for r in caplog.records if "incomplete checkpoint" in r.getMessage()]
        assert len(skipped) == 1 and str(broken) in skipped[0] and "no trainer_state.json" in skipped[0]
    finally:
        os.umask(previous_umask)
    reference = straight.state_dict()
    for resumed in (resumed_a, resumed_b):
        state = resumed.state_dict()
        assert state.keys() == reference.keys() and all(torch.equal(state[k], reference[k]) for k in reference)


@pytest.mark.slow
def test_a_run_whose_only_checkpoint_is_incomplete_starts_afresh(tmp_path, tiny_tokenizer_folder, caplog):
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    texts = [words(30, i) for i in range(8)]
    config = MLMConfig(training_length=24, batch_size=4, max_steps=4, save_steps=2, warmup_steps=1, logging_steps=1)
    with pytest.raises(_Killed):
        train_mlm(build_mlm_model(TINY_MODEL, tokenizer, 24), tokenizer, texts, tmp_path, config,
                  callbacks=[_KillAt(3)])
    (tmp_path / "checkpoints" / "checkpoint-2" / "optimizer.pt").unlink()
    with caplog.at_level(logging.WARNING, logger="longembed.training.runs"):
        summary = train_mlm(build_mlm_model(TINY_MODEL, tokenizer, 24), tokenizer, texts, tmp_path, config)
    assert summary.resumed_from is None and summary.steps == 4
    assert any("no optimizer.pt" in r.getMessage() and "starting afresh" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_resuming_another_runs_checkpoints_is_refused(tmp_path, tiny_tokenizer_folder):
    tokenizer = load_tokenizer(tiny_tokenizer_folder)
    texts = [words(30, i) for i in range(8)]
    config = MLMConfig(
        training_length=24, batch_size=4, max_steps=4, save_steps=2, warmup_steps=1, logging_steps=1
    )
    with pytest.raises(_Killed):
        train_mlm(
            build_mlm_model(TINY_MODEL, tokenizer, 24),
            tokenizer,
            texts,
            tmp_path,
            config,
            callbacks=[_KillAt(3)],
        )
    other = MLMConfig(**{**config.to_dict(), "learning_rate": 1e-4})
    with pytest.raises(ValueError, match="different run"):
        train_mlm(build_mlm_model(TINY_MODEL, tokenizer, 24), tokenizer, texts, tmp_path, other)


# ---------------------------------------------------------------- accuracy by length


@pytest.mark.slow
def test_mlm_accuracy_by_length_for_alibi_and_the_ape_twin(tmp_path, tiny_tokenizer_folder):
    config = tiny_recipe(tmp_path, tiny_tokenizer_folder)
    alibi = train_jina("mlm", tmp_path / "alibi", config=config).folder
    twin_config = tiny_recipe(tmp_path, tiny_tokenizer_folder, positions="absolute")
    twin = train_jina("mlm", tmp_path / "twin", config=twin_config).folder
    texts = [mixed_text(200, i) for i in range(2)]
    lengths = [24, 48, 96]

    rows = mlm_accuracy_by_length(alibi, texts, lengths)
    assert [r.length for r in rows] == lengths and all(r.positions == "alibi" for r in rows)
    assert all(r.masked_tokens > 20 and 0 <= r.accuracy <= 1 for r in rows)
    assert rows[0].windows > rows[2].windows > 0

    plain = mlm_accuracy_by_length(twin, texts, lengths)
    assert plain[0].accuracy is not None
    assert plain[1].accuracy is None and "24-position table" in plain[1].note
    for method in ("pi", "rp"):
        extended = mlm_accuracy_by_length(twin, texts, lengths, position_method=method)
        assert all(r.accuracy is not None and r.positions == method for r in extended)
        # within the table the method's ids are the plain positions: the same measurement
        assert extended[0].to_dict() | {"positions": "absolute"} == plain[0].to_dict()
    with pytest.raises(ValueError, match="ALiBi"):
        mlm_accuracy_by_length(alibi, texts, lengths, position_method="pi")


# ---------------------------------------------------------------- the recipe: stages and folders


@pytest.mark.slow
def test_recipe_stages_write_folders_that_load_encoder_opens(tmp_path, tiny_tokenizer_folder, monkeypatch):
    """mlm -> pairs -> negatives on tiny data: each folder opens with load_encoder(method="native")
    and gives the vector of the model run directly; the contrastive stages go through
    train_contrastive with the paper's loss settings; the held-out pairs are scored after each stage."""
    config = tiny_recipe(tmp_path, tiny_tokenizer_folder)
    config.save(tmp_path / "recipe.json")
    seen = []

    def spy(model, pairs, output_dir, section, **kwargs):
        seen.append((section, len(pairs)))
        return train_contrastive(model, pairs, output_dir, section, **kwargs)

    monkeypatch.setattr("longembed.training.jina.stages.train_contrastive", spy)
    texts = ["the of and to in", mixed_text(50, 9)]

    mlm = train_jina("mlm", tmp_path / "mlm", config=config)
    assert mlm.record["positions"] == "alibi" and "held_out" in mlm.record
    assert not (tmp_path / "mlm" / "checkpoints").exists()
    head = JinaBertForMaskedLM.from_pretrained(tmp_path / "mlm").eval()
    assert head.config.training_length == 24
    tokenizer = load_tokenizer(tmp_path / "mlm")
    expected = mean_pool(head.bert, tokenizer, texts)
    got = load_encoder(tmp_path / "mlm", method="native").encode(texts, normalize_embeddings=False)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)

    pairs = train_jina("pairs", tmp_path / "pairs", init=tmp_path / "mlm", config=config)
    negatives = train_jina("negatives", tmp_path / "negatives", init=tmp_path / "pairs", config=config)
    (pairs_section, n_pairs), (negatives_section, _) = seen
    assert (pairs_section.symmetric, pairs_section.temperature, pairs_section.hard_negatives) == (
        True,
        0.05,
        0,
    )
    assert (negatives_section.symmetric, negatives_section.hard_negatives) == (True, 2)
    assert n_pairs == pairs.record["data"]["train"] == 30  # 40 pairs, a quarter held out by group
    for result in (pairs, negatives):
        assert set(result.record["held_out"]) >= {"ndcg@10", "accuracy@1"}
        assert result.summary.steps == 2 and np.isfinite(result.summary.final_loss)
        saved = json.loads((result.folder / RECORD_FILE).read_text())
        assert saved["config"] == config.to_dict()
    encoder = JinaBertModel.from_pretrained(tmp_path / "negatives").eval()
    before = JinaBertModel.from_pretrained(tmp_path / "mlm").eval()
    assert not torch.equal(encoder.encoder.layer[0].mlp.wo.weight, before.encoder.layer[0].mlp.wo.weight)
    expected = mean_pool(encoder, load_tokenizer(tmp_path / "negatives"), texts)
    got = load_encoder(tmp_path / "negatives", method="native").encode(texts, normalize_embeddings=False)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # the held-out score is recomputable from the folder
    held = recipe_pairs(config.data, None)[1]
    assert held_out_retrieval(tmp_path / "negatives", held) == negatives.record["held_out"]

    with pytest.raises(FileExistsError, match="finished stage"):
        train_jina("pairs", tmp_path / "pairs", init=tmp_path / "mlm", config=config)
    with pytest.raises(ValueError, match="--init"):
        train_jina("pairs", tmp_path / "other", config=config)


@pytest.mark.slow
def test_mlm_folder_is_also_a_sentence_transformers_folder(tmp_path, tiny_tokenizer_folder):
    folder = train_jina("mlm", tmp_path / "mlm", config=tiny_recipe(tmp_path, tiny_tokenizer_folder)).folder
    model = SentenceTransformer(str(folder), device="cpu")
    texts = ["the of and", mixed_text(20, 3)]
    direct = load_encoder(folder, method="native").encode(texts, normalize_embeddings=False)
    np.testing.assert_allclose(model.encode(texts), direct, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- config


def test_recipe_config_round_trips_and_rejects_unknown_names(tmp_path):
    config = JinaRecipeConfig()
    assert (config.pairs.symmetric, config.pairs.temperature, config.pairs.hard_negatives) == (True, 0.05, 0)
    assert (config.negatives.hard_negatives, config.mlm.mlm_probability) == (15, 0.3)
    assert (
        config.mlm.adam_beta1,
        config.mlm.adam_beta2,
        config.mlm.adam_epsilon,
        config.mlm.weight_decay,
    ) == (0.9, 0.98, 1e-6, 0.01)
    changed = config.with_overrides("negatives", max_steps=7, precision="bf16")
    assert (
        changed.negatives.max_steps == 7
        and changed.negatives.precision == "bf16"
        and changed.pairs == config.pairs
    )
    assert JinaRecipeConfig.load(changed.save(tmp_path / "c.json")) == changed

    (tmp_path / "partial.json").write_text(
        json.dumps({"model": {"hidden_size": 128}, "mlm": {"training_length": 64}})
    )
    partial = JinaRecipeConfig.load(tmp_path / "partial.json")
    assert (
        partial.model.hidden_size == 128
        and partial.mlm.training_length == 64
        and partial.pairs == config.pairs
    )

    for bad, message in (
        ({"mlm": {"learnin_rate": 1}}, "unknown option"),
        ({"stage4": {}}, "unknown recipe section"),
        ({"model": {"positions": "rope"}}, "positions"),
        ({"mlm": {"mlm_probability": 1.5}}, "mlm_probability"),
    ):
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=message):
            JinaRecipeConfig.load(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError):
        JinaRecipeConfig.load(tmp_path / "missing.json")


def test_user_text_file_errors(tmp_path):
    (tmp_path / "t.jsonl").write_text(json.dumps({"text": "a b"}) + "\n" + json.dumps({"txt": "c"}) + "\n")
    with pytest.raises(ValueError, match=r"t.jsonl:2"):
        read_texts_jsonl(tmp_path / "t.jsonl")


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="longembed")
    train_parser.register_cli(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_parses_and_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    parser = _parser()
    args = parser.parse_args(
        [
            "train",
            "jina",
            "--stage",
            "pairs",
            "--output",
            str(tmp_path / "o"),
            "--init",
            str(tmp_path / "m"),
            "--max-steps",
            "5",
            "--precision",
            "bf16",
            "--device",
            "cpu",
        ]
    )
    assert (args.stage, args.max_steps, args.precision, args.device) == ("pairs", 5, "bf16", "cpu")
    assert args.func.resolve() is train_cli.run_jina
    for argv in (
        ["train", "jina", "--stage", "finetune", "--output", "o"],
        ["train", "jina", "--stage", "mlm", "--max-steps", "0"],
        ["train", "jina", "--stage", "mlm", "--precision", "fp8"],
        ["train", "jina"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(argv)
        assert exit_info.value.code == 2

    def run(*argv):
        return train_cli.run_jina(parser.parse_args(["train", "jina", *argv]))

    with pytest.raises(FileNotFoundError, match="--init .* is not a folder"):
        run("--stage", "pairs", "--output", str(tmp_path / "o"), "--init", str(tmp_path / "nowhere"))
    (tmp_path / "m").mkdir()
    with pytest.raises(ValueError, match="give --init"):
        run("--stage", "pairs", "--output", str(tmp_path / "o"))
    with pytest.raises(ValueError, match="give --output"):
        run("--stage", "mlm")
    with pytest.raises(FileNotFoundError, match="no recipe config file"):
        run("--stage", "mlm", "--output", str(tmp_path / "o"), "--config", str(tmp_path / "none.json"))
    with pytest.raises(ValueError, match="needs text"):
        run("--stage", "mlm", "--output", str(tmp_path / "o2"))
    assert run("--stage", "negatives", "--max-steps", "9", "--write-config", str(tmp_path / "w.json")) == 0
    written = JinaRecipeConfig.load(tmp_path / "w.json")
    assert written.negatives.max_steps == 9 and written.mlm == JinaRecipeConfig().mlm
    shutil.rmtree(tmp_path / "m")
