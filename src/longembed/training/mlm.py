"""Stage I of Jina Embeddings v2: masked-language-model pre-training (section 4.3), and its measure.

The recipe, each part named as in the paper and done with transformers' own tools:

- **Sequences** come from single documents: the first ``training_length`` tokens of each, the rest
  dropped; no packing of several documents into one sequence, one sequence per document
  (:func:`tokenize_documents`).  Batches are padded dynamically, so their masked-token counts vary.
- **Masking**: 30% of the words, whole-word masking, and of the masked tokens 80% become [MASK],
  10% a random token, 10% stay (:class:`~longembed.training.masking.WholeWordMaskCollator`, seeded per
  batch by longembed, not by a library's private random state).  The loss is the cross entropy of
  eq. (2) over the masked tokens.
- **Optimizer**: AdamW (beta1 0.9, beta2 0.98, eps 1e-6, weight decay 0.01), learning rate linear from
  0 to eta over the warm-up steps, then linearly to 0; dropout 0.1 and attention dropout 0.1.
- **Training loop**: transformers' ``Trainer``: checkpoints every ``save_steps`` in
  ``OUTPUT/checkpoints``, a killed run resumes from the last one (the masks, the data order and the
  RNG states are restored, so a resumed run ends with the weights of an uninterrupted one), progress
  bars, fp16/bf16 where the device has them.

Two models (:func:`build_mlm_model`): JinaBERT (``positions="alibi"``, ``JinaBertForMaskedLM``) and
its twin with learned absolute positions (``positions="absolute"``, transformers' ``BertForMaskedLM``
with a ``training_length``-row position table).  They share sizes, post-LN, the MLM head, tokenizer,
data and optimizer; they differ in two things: the positions (the point of the comparison) and the
feed-forward, GEGLU in JinaBERT and BERT's GELU MLP in the twin, whose intermediate size is 3/2 of
JinaBERT's so both feed-forwards have the same parameters and FLOPs (GEGLU: h x 2I + I x h).

:func:`mlm_accuracy_by_length` measures masked-token accuracy of a saved model at several lengths
(the paper's Figure 2); the APE twin runs past its table with PI or RP position ids
(``longembed.extension.ape``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from longembed.extension.ape import APE_METHODS, InterpolatedPositionEmbedding, ape_position_ids
from longembed.loading import quiet_transformers, resolve_device
from longembed.models.jina_bert import JinaBertConfig, JinaBertForMaskedLM
from longembed.training.choices import PRECISIONS
from longembed.training.contrastive import (
    CHECKPOINTS,
    RUN_CONFIG_FILE,
    TrainingSummary,
    checkpoint_step,
    require_training_extra,
    resume_point,
    shared_trainer_arguments,
)
from longembed.training.masking import WholeWordMaskCollator

try:  # the ``training`` extra; without it ``require_training_extra`` says what to install
    from datasets import Dataset
except ImportError:  # pragma: no cover - exercised only without the extra
    Dataset = None  # type: ignore[assignment,misc]

POSITIONS = ("alibi", "absolute")
#: The GEGLU feed-forward has 3 h I weights; a GELU MLP with 3I/2 units has the same.
APE_TWIN_INTERMEDIATE_FACTOR = 1.5
IGNORE_INDEX = -100


@dataclass
class MLMModelConfig:
    """The model's size and position scheme (defaults: the small reproduction of benchmarks/jina_recipe.py).

    ``positions`` "alibi" builds JinaBERT, "absolute" its twin with a learned position table of
    ``training_length`` rows.  ``intermediate_size`` is JinaBERT's I (GEGLU); the twin uses 3I/2.
    ``max_position_embeddings`` is what an ALiBi model declares it can read (Jina: 8192).
    """

    positions: str = "alibi"
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    feed_forward_type: str = "geglu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")


@dataclass
class MLMConfig:
    """Stage I hyperparameters, named as in the paper (section 4.3); round-trips through JSON.

    Paper values: sequences of 512 tokens, global batch 4096, eta 1e-3 / 6e-4 / 4e-4 (small / base /
    large), 10,000 warm-up steps of 100,000, AdamW (0.9, 0.98, 1e-6), weight decay 0.01, 30% whole-word
    masking with 80/10/10, FP16.  The defaults here are the small reproduction's (benchmarks/jina_recipe.py).
    """

    training_length: int = 128
    batch_size: int = 32
    gradient_accumulation_steps: int = 1
    learning_rate: float = 1e-3
    warmup_steps: int = 60
    max_steps: int = 600
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-6
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    mlm_probability: float = 0.3
    whole_word_mask: bool = True
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    save_steps: int = 100
    logging_steps: int = 20
    seed: int = 0
    precision: str = "fp32"
    device: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "training_length",
            "batch_size",
            "gradient_accumulation_steps",
            "max_steps",
            "save_steps",
            "logging_steps",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.training_length < 8:
            raise ValueError(f"training_length must be at least 8 tokens, got {self.training_length}")
        if (
            self.learning_rate <= 0
            or self.warmup_steps < 0
            or self.weight_decay < 0
            or self.max_grad_norm < 0
        ):
            raise ValueError(
                "learning_rate must be positive; warmup_steps, weight_decay and max_grad_norm >= 0"
            )
        if not (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1 and self.adam_epsilon > 0):
            raise ValueError("AdamW needs 0 <= beta1, beta2 < 1 and epsilon > 0")
        if not 0 < self.mlm_probability < 1:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        if (
            self.mask_replace_prob < 0
            or self.random_replace_prob < 0
            or self.mask_replace_prob + self.random_replace_prob > 1
        ):
            raise ValueError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- models


def build_mlm_model(
    model_config: MLMModelConfig, tokenizer: PreTrainedTokenizerBase, training_length: int, seed: int = 0
) -> PreTrainedModel:
    """A randomly initialised MLM model (seeded): ``JinaBertForMaskedLM`` or the APE twin.

    The vocabulary is the tokenizer's; the MLM decoder is tied to the word embeddings in both.
    """
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=model_config.hidden_size,
        num_hidden_layers=model_config.num_hidden_layers,
        num_attention_heads=model_config.num_attention_heads,
        hidden_dropout_prob=model_config.hidden_dropout_prob,
        attention_probs_dropout_prob=model_config.attention_probs_dropout_prob,
        initializer_range=model_config.initializer_range,
        pad_token_id=tokenizer.pad_token_id,
        hidden_act="gelu",
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    if model_config.positions == "alibi":
        config = JinaBertConfig(
            **common,
            intermediate_size=model_config.intermediate_size,
            feed_forward_type=model_config.feed_forward_type,
            max_position_embeddings=max(model_config.max_position_embeddings, training_length),
            training_length=training_length,
        )
        return JinaBertForMaskedLM(config)
    config = BertConfig(
        **common,
        intermediate_size=round(APE_TWIN_INTERMEDIATE_FACTOR * model_config.intermediate_size),
        max_position_embeddings=training_length,
        position_embedding_type="absolute",
    )
    return BertForMaskedLM(config)


def is_alibi_folder(folder: Path | str) -> bool:
    """Whether a model folder holds a JinaBERT (ALiBi) model, from its config.json."""
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{folder} has no config.json: not a model folder")
    config = json.loads(config_file.read_text())
    return config.get("model_type") == "jina_bert" or config.get("position_embedding_type") == "alibi"


def load_mlm_model(folder: Path | str) -> PreTrainedModel:
    """The MLM model saved in ``folder`` (JinaBERT or a BERT-style APE model), float32, train mode off."""
    with quiet_transformers():
        if is_alibi_folder(folder):
            return JinaBertForMaskedLM.from_pretrained(folder, dtype=torch.float32).eval()
        return AutoModelForMaskedLM.from_pretrained(folder, dtype=torch.float32).eval()


def load_tokenizer(path: Path | str) -> PreTrainedTokenizerBase:
    """A fast WordPiece/BPE tokenizer from a model folder (whole-word masking needs its offsets)."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"tokenizer folder {path} does not exist")
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if not tokenizer.is_fast or tokenizer.mask_token is None:
        raise ValueError(f"{path}: MLM training needs a fast tokenizer with a mask token")
    return tokenizer


# ----------------------------------------------------------------------------- data


def tokenize_documents(
    texts: Sequence[str], tokenizer: PreTrainedTokenizerBase, training_length: int
) -> Dataset:
    """One training sequence per document: its first ``training_length`` tokens ([CLS] ... [SEP]).

    No packing and no second sequence from a long document (paper 4.3).  Columns: input_ids,
    attention_mask, special_tokens_mask and offset_mapping (word boundaries for whole-word masking).
    """
    require_training_extra()
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise ValueError("no MLM training text")

    def encode(batch: dict[str, list[str]]) -> Any:
        return tokenizer(
            batch["text"],
            truncation=True,
            max_length=training_length,
            return_special_tokens_mask=True,
            return_offsets_mapping=True,
            return_token_type_ids=False,
        )

    return Dataset.from_dict({"text": list(texts)}).map(
        encode, batched=True, remove_columns=["text"], desc="tokenizing", load_from_cache_file=False
    )


def mlm_collator(
    tokenizer: PreTrainedTokenizerBase, config: MLMConfig, seed: int | None = None
) -> WholeWordMaskCollator:
    """The masking of ``config`` (30% whole words, 80/10/10 by default), seeded by ``seed``."""
    return WholeWordMaskCollator(
        tokenizer=tokenizer,
        whole_word_mask=config.whole_word_mask,
        mlm_probability=config.mlm_probability,
        mask_replace_prob=config.mask_replace_prob,
        random_replace_prob=config.random_replace_prob,
        seed=config.seed if seed is None else seed,
    )


# ----------------------------------------------------------------------------- training


@dataclass
class MLMSummary(TrainingSummary):
    """A finished MLM run: the contrastive summary's fields plus tokens (non-padding) and tokens/s."""

    tokens: int = 0
    tokens_per_second: float = 0.0


def train_mlm(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    output_dir: Path | str,
    config: MLMConfig,
    run_identity: dict[str, Any] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> MLMSummary:
    """Pre-train ``model`` in place on ``texts``; checkpoints in ``output_dir/checkpoints``, resumed after a kill.

    ``run_identity`` (model, data, ...) is stored with the checkpoints; resuming another run's
    checkpoints raises a ValueError instead of silently mixing two trainings.  ``callbacks`` are
    extra transformers ``TrainerCallback``s (progress reporting, early stops).
    """
    require_training_extra()
    if config.precision == "fp16" and not _cuda_requested(config.device):
        raise ValueError("precision fp16 needs a CUDA device; use fp32 or bf16 on the CPU")
    output_dir = Path(output_dir)
    checkpoint_dir = output_dir / CHECKPOINTS
    identity = {"config": config.to_dict(), **(run_identity or {})}
    resume = resume_point(checkpoint_dir, identity)
    dataset = tokenize_documents(texts, tokenizer, config.training_length)
    args = TrainingArguments(
        **shared_trainer_arguments(config, checkpoint_dir),
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        adam_beta1=config.adam_beta1,
        adam_beta2=config.adam_beta2,
        adam_epsilon=config.adam_epsilon,
        max_grad_norm=config.max_grad_norm,
        max_steps=config.max_steps,
        use_cpu=not _cuda_requested(config.device),
        remove_unused_columns=False,  # the collator needs special_tokens_mask and offset_mapping
        include_num_input_tokens_seen="non_padding",
    )
    trainer = MaskedTokensTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=mlm_collator(tokenizer, config),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    (checkpoint_dir / RUN_CONFIG_FILE).write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")
    tokens_before = _checkpoint_tokens(resume)
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - start
    losses = [(int(e["step"]), float(e["loss"])) for e in trainer.state.log_history if "loss" in e]
    steps_run = result.global_step - (checkpoint_step(resume) if resume else 0)
    examples = steps_run * config.batch_size * config.gradient_accumulation_steps
    tokens = int(trainer.state.num_input_tokens_seen) - tokens_before
    return MLMSummary(
        steps=result.global_step,
        examples=examples,
        seconds=round(seconds, 1),
        examples_per_second=round(examples / seconds, 2) if seconds > 0 else 0.0,
        final_loss=losses[-1][1] if losses else None,
        resumed_from=resume,
        losses=losses,
        tokens=tokens,
        tokens_per_second=round(tokens / seconds, 1) if seconds > 0 else 0.0,
    )


class MaskedTokensTrainer(Trainer):
    """transformers' Trainer whose MLM loss runs the head only at the masked tokens.

    The loss is the one of eq. (2), the cross entropy over every masked token of the (accumulated)
    batch, as the models' own ``labels`` loss computes it; but the decoder (hidden x vocabulary, most
    of a small model's compute) runs on the masked ~30% of the tokens instead of all of them.  Works for
    any model with ``base_model`` and an MLM head ``cls`` (JinaBERT and BERT).  A model wrapped for
    distributed training runs its full forward instead, so the wrapper's gradient hooks see the call.
    """

    loss_is_scaled_for_ga = True  # divided by the masked tokens of the whole accumulated batch

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model_accepts_loss_kwargs = True  # so the Trainer counts num_items_in_batch

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        labels = inputs["labels"]
        encoder_inputs = {k: v for k, v in inputs.items() if k != "labels"}
        chosen = labels != IGNORE_INDEX
        unwrapped = self.accelerator.unwrap_model(model)
        if unwrapped is model and hasattr(model, "cls"):
            hidden = model.base_model(**encoder_inputs).last_hidden_state
            logits = model.cls(hidden[chosen])
            outputs = None
        else:
            outputs = model(**encoder_inputs)
            logits = outputs.logits[chosen]
        loss = torch.nn.functional.cross_entropy(logits.float(), labels[chosen], reduction="sum")
        count = num_items_in_batch if num_items_in_batch is not None else chosen.sum()
        loss = loss / torch.as_tensor(count, device=loss.device).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes  # num_items_in_batch counted every device's tokens
        return (loss, outputs) if return_outputs else loss


def _cuda_requested(device: str | None) -> bool:
    if device is None:
        return torch.cuda.is_available()
    return resolve_device(device).type == "cuda"


def _checkpoint_tokens(path: str | None) -> int:
    """Tokens seen up to a checkpoint (from its trainer_state.json), 0 for a fresh run."""
    if path is None:
        return 0
    state = Path(path) / "trainer_state.json"
    return int(json.loads(state.read_text()).get("num_input_tokens_seen", 0)) if state.is_file() else 0


# ----------------------------------------------------------------------------- measurement


@dataclass
class LengthAccuracy:
    """Masked-token accuracy at one sequence length (one point of the paper's Figure 2)."""

    length: int
    positions: str
    windows: int
    masked_tokens: int
    correct: int
    accuracy: float | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def mlm_accuracy_by_length(
    model_folder: Path | str,
    texts: Sequence[str],
    lengths: Sequence[int],
    *,
    position_method: str | None = None,
    mlm_probability: float = 0.3,
    seed: int = 0,
    batch_tokens: int = 8192,
    device: str | None = None,
) -> list[LengthAccuracy]:
    """Accuracy of the top-1 prediction at masked tokens of held-out ``texts``, per sequence length.

    Every text is tokenized once and cut into consecutive windows of L - 2 tokens, each run as
    [CLS] window [SEP] of L tokens, so every length scores (nearly) the same tokens and only the
    context differs.  (The paper truncates each of 50,000 C4 documents to L; long held-out texts are
    few here, so windows give every length enough masked tokens.)  Masking as in training: whole
    words, ``mlm_probability``, 80/10/10, seeded.

    An APE model (the twin) runs up to its position table; beyond it the row says so (accuracy None),
    unless ``position_method`` is "pi" or "rp": then longer windows get position ids
    ``ape_position_ids(method, ...)`` with s = ceil(L / Lo) (PI interpolates between table rows).
    An ALiBi model needs no method.
    """
    if position_method not in (None, *APE_METHODS):
        raise ValueError(f"position_method must be None or one of {APE_METHODS}, got {position_method!r}")
    if not lengths or any(int(n) < 8 for n in lengths):
        raise ValueError(f"lengths must be integers >= 8, got {list(lengths)}")
    folder = Path(model_folder)
    alibi = is_alibi_folder(folder)
    if alibi and position_method is not None:
        raise ValueError("an ALiBi model has no position ids to remap; measure it with position_method=None")
    model = load_mlm_model(folder)
    tokenizer = load_tokenizer(folder)
    run_device = resolve_device(device)
    model.to(run_device)
    table = None if alibi else int(model.config.max_position_embeddings)
    if position_method == "pi":
        embeddings = model.base_model.embeddings
        embeddings.position_embeddings = InterpolatedPositionEmbedding(embeddings.position_embeddings)
    encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    config = MLMConfig(mlm_probability=mlm_probability, seed=seed)
    collator = mlm_collator(tokenizer, config, seed=seed)
    label = "alibi" if alibi else position_method or "absolute"
    rows = []
    for length in [int(n) for n in lengths]:
        windows = _windows(encoded, tokenizer, length)
        if not windows:
            rows.append(LengthAccuracy(length, label, 0, 0, 0, None, "no text is that long"))
            continue
        if table is not None and length > table and position_method is None:
            rows.append(
                LengthAccuracy(length, label, len(windows), 0, 0, None, f"beyond the {table}-position table")
            )
            continue
        per_batch = max(1, batch_tokens // length)
        masked = correct = 0
        for start in range(0, len(windows), per_batch):
            batch = collator(windows[start : start + per_batch])
            hits, count = _masked_hits(model, batch, run_device, table, position_method)
            correct += hits
            masked += count
        rows.append(
            LengthAccuracy(length, label, len(windows), masked, correct, correct / masked if masked else None)
        )
    return rows


def _windows(encoded: Any, tokenizer: PreTrainedTokenizerBase, length: int) -> list[dict[str, Any]]:
    """Consecutive full windows of ``length`` tokens ([CLS] + length - 2 tokens + [SEP]) of every text."""
    body = length - 2
    out = []
    for ids, offsets in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True):
        for start in range(0, len(ids) - body + 1, body):
            out.append(
                {
                    "input_ids": [tokenizer.cls_token_id, *ids[start : start + body], tokenizer.sep_token_id],
                    "attention_mask": [1] * length,
                    "special_tokens_mask": [1] + [0] * body + [1],
                    "offset_mapping": [[0, 0], *[list(o) for o in offsets[start : start + body]], [0, 0]],
                }
            )
    return out


@torch.no_grad()
def _masked_hits(
    model: PreTrainedModel,
    batch: dict[str, torch.Tensor],
    device: torch.device,
    table: int | None,
    method: str | None,
) -> tuple[int, int]:
    """(correct top-1 predictions, masked tokens) of one masked batch."""
    labels = batch["labels"].to(device)
    inputs = {
        "input_ids": batch["input_ids"].to(device),
        "attention_mask": batch["attention_mask"].to(device),
        "token_type_ids": torch.zeros_like(batch["input_ids"]).to(device),
    }
    if table is not None and method is not None:
        lengths = batch["attention_mask"].sum(dim=1)
        seq_len = batch["input_ids"].shape[1]
        scales = torch.clamp(torch.ceil(lengths / table), min=1).long()
        inputs["position_ids"] = ape_position_ids(method, lengths, seq_len, scales, table).to(device)
    logits = model(**inputs).logits
    chosen = labels != IGNORE_INDEX
    hits = (logits.argmax(dim=-1) == labels) & chosen
    return int(hits.sum()), int(chosen.sum())
