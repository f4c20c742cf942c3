"""The Jina Embeddings v2 training recipe in three stages, as one API (``longembed train jina``).

    >>> config = JinaRecipeConfig()                      # the small reproduction; .save/.load as JSON
    >>> train_jina("mlm", "runs/jina/mlm", config=config, data_dir="../shared/data")
    >>> train_jina("pairs", "runs/jina/pairs", init="runs/jina/mlm", config=config, data_dir=...)
    >>> train_jina("negatives", "runs/jina/negatives", init="runs/jina/pairs", config=config, data_dir=...)
    >>> load_encoder("runs/jina/negatives", method="native")

- **Stage I, ``mlm``** (section 4.3): masked-language-model pre-training of a new JinaBERT
  (``training.mlm``) on Wikipedia paragraphs that the benchmark does not use, or a user's jsonl texts.
  The folder holds the MLM head in the released key layout (``JinaBertForMaskedLM.from_pretrained``),
  the tokenizer, and sentence-transformers files with mean pooling (section 5), so ``load_encoder``
  and ``SentenceTransformer`` open it too.  ``model.positions="absolute"`` trains the APE twin.
- **Stage II, ``pairs``** (section 5.1): the previous folder as a SentenceTransformer (Transformer +
  mean Pooling) trained with the bidirectional InfoNCE of eqs. (3)+(4), tau = 0.05, in-batch
  negatives only (``contrastive.train_contrastive`` with ``symmetric=True, hard_negatives=0``).
- **Stage III, ``negatives``** (section 5.2): the same trainer with hard negatives, eq. (5) (15 per
  pair in the paper: HotpotQA distractors, other paragraphs of the same SQuAD article; missing ones
  are filled with random in-batch-style negatives by ``contrastive.pairs_dataset``).

After each stage the held-out pairs (whole groups kept out of stages II and III) are scored:
query -> positive retrieval among all held-out positives (:func:`held_out_retrieval`).

Every stage checkpoints into ``OUTPUT/checkpoints`` and resumes from there when called again with the
same arguments; a finished folder is never overwritten unless asked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from longembed.encoder import load_encoder
from longembed.evaluation.metrics import evaluate_scores
from longembed.export import refuse_overlap
from longembed.loading import default_model_path
from longembed.models.jina_bert import JinaBertForMaskedLM
from longembed.tasks.base import iter_jsonl, read_json_file
from longembed.training.choices import STAGES
from longembed.training.contrastive import (
    CHECKPOINTS,
    ContrastiveConfig,
    SentenceTransformer,
    TrainingSummary,
    require_training_extra,
    train_contrastive,
)
from longembed.training.data import (
    SOURCES,
    SQUAD_FILE,
    TrainingPair,
    mlm_documents,
    split_held_out,
    training_pairs,
)
from longembed.training.mlm import (
    MLMConfig,
    MLMModelConfig,
    build_mlm_model,
    is_alibi_folder,
    load_mlm_model,
    load_tokenizer,
    train_mlm,
)

try:  # the ``training`` extra
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
except ImportError:  # pragma: no cover - exercised only without the extra (require_training_extra says so)
    Transformer = Pooling = None  # type: ignore[assignment,misc]

RECORD_FILE = "longembed_jina.json"
#: The files sentence-transformers needs beside a model's own weights, config and tokenizer.
SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
)
POOLING_DIR = "1_Pooling"
DEFAULT_TOKENIZER = "default"


def pairs_stage_defaults() -> ContrastiveConfig:
    """Stage II: eqs. (3)+(4), bidirectional InfoNCE, tau = 0.05, no hard negatives (small-reproduction steps)."""
    return ContrastiveConfig(
        batch_size=64,
        learning_rate=2e-4,
        warmup_steps=10,
        max_steps=100,
        weight_decay=0.01,
        temperature=0.05,
        symmetric=True,
        hard_negatives=0,
        save_steps=25,
        logging_steps=10,
    )


def negatives_stage_defaults() -> ContrastiveConfig:
    """Stage III: eq. (5), NCE+ with 15 hard negatives per pair (paper 5.2), tau = 0.05."""
    return ContrastiveConfig(
        batch_size=16,
        learning_rate=1e-4,
        warmup_steps=3,
        max_steps=30,
        weight_decay=0.01,
        temperature=0.05,
        symmetric=True,
        hard_negatives=15,
        save_steps=10,
        logging_steps=5,
    )


@dataclass
class RecipeData:
    """Where each stage's data comes from, and what is held out.

    ``tokenizer``: a folder with a fast tokenizer ("default": the packaged all-MiniLM-L6-v2 WordPiece).
    ``text_file``: a user's MLM text (jsonl, one ``{"text": ...}`` per line) instead of the Wikipedia
    paragraphs of ``--data-dir``.  ``train_file``: a user's pairs (jsonl: query, positive, negatives)
    instead of SQuAD + HotpotQA (``sources``).  ``held_out_articles`` SQuAD articles are kept out of
    MLM training (the long held-out texts of the accuracy-by-length measurement);
    ``held_out_fraction`` of the pairs (whole groups) is kept out of stages II and III and scored
    after every stage on at most ``max_held_out_queries`` queries.  ``max_pairs`` caps the training pairs.
    ``seed`` chooses what is held out and the order of the pairs (the same in every stage).
    """

    tokenizer: str = DEFAULT_TOKENIZER
    text_file: str | None = None
    train_file: str | None = None
    sources: list[str] = field(default_factory=lambda: list(SOURCES))
    held_out_articles: int = 6
    held_out_fraction: float = 0.05
    max_held_out_queries: int = 500
    max_pairs: int | None = None
    evaluate: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.sources) - set(SOURCES))
        if unknown or not self.sources:
            raise ValueError(f"data.sources must be a non-empty list from {SOURCES}, got {self.sources}")
        if not 0 <= self.held_out_fraction < 1:
            raise ValueError(f"data.held_out_fraction must be in [0, 1), got {self.held_out_fraction}")
        if self.held_out_articles < 0 or self.max_held_out_queries < 1:
            raise ValueError("data.held_out_articles must be >= 0 and data.max_held_out_queries >= 1")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise ValueError(f"data.max_pairs must be positive, got {self.max_pairs}")


@dataclass
class JinaRecipeConfig:
    """The whole recipe: the model, one section per stage, and the data; round-trips through JSON.

    A file may give only some sections and fields; the rest keep their defaults.  Unknown names are
    an error (a typo must not silently train with a default).
    """

    model: MLMModelConfig = field(default_factory=MLMModelConfig)
    mlm: MLMConfig = field(default_factory=MLMConfig)
    pairs: ContrastiveConfig = field(default_factory=pairs_stage_defaults)
    negatives: ContrastiveConfig = field(default_factory=negatives_stage_defaults)
    data: RecipeData = field(default_factory=RecipeData)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> JinaRecipeConfig:
        defaults = cls()
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(
                f"unknown recipe section(s) {unknown}; known: {[f.name for f in dataclasses.fields(cls)]}"
            )
        sections = {}
        for f in dataclasses.fields(cls):
            default = getattr(defaults, f.name)
            given = values.get(f.name) or {}
            if not isinstance(given, dict):
                raise ValueError(f"recipe section {f.name!r} must be an object, got {type(given).__name__}")
            known = {x.name for x in dataclasses.fields(default)}
            wrong = sorted(set(given) - known)
            if wrong:
                raise ValueError(
                    f"unknown option(s) {wrong} in recipe section {f.name!r}; known: {sorted(known)}"
                )
            sections[f.name] = dataclasses.replace(default, **given)
        return cls(**sections)

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: Path | str) -> JinaRecipeConfig:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no recipe config file at {path}")
        try:
            values = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path}: a recipe config is a JSON object of sections")
        return cls.from_dict(values)

    def with_overrides(
        self,
        stage: str,
        max_steps: int | None = None,
        device: str | None = None,
        precision: str | None = None,
    ) -> JinaRecipeConfig:
        """A copy whose ``stage`` section has the given options (the command-line flags) instead."""
        check_stage(stage)
        section = getattr(self, stage)
        changes = {
            k: v
            for k, v in (("max_steps", max_steps), ("device", device), ("precision", precision))
            if v is not None
        }
        return dataclasses.replace(self, **{stage: dataclasses.replace(section, **changes)})


@dataclass
class StageResult:
    """A finished stage: its folder, what its training did, and the record written beside the model."""

    folder: Path
    summary: TrainingSummary
    record: dict[str, Any]


def check_stage(stage: str) -> str:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose from {', '.join(STAGES)}")
    return stage


# ----------------------------------------------------------------------------- data


def read_texts_jsonl(path: Path | str) -> list[str]:
    """A user's MLM text: one JSON object per line with a non-empty ``text``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no MLM text file at {path}")
    texts = []
    for lineno, record in iter_jsonl(path):
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}:{lineno}: each line needs a non-empty 'text'")
        texts.append(text)
    if not texts:
        raise ValueError(f"{path}: no texts in the file")
    return texts


def mlm_corpus(data_dir: Path | str, held_out_articles: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """(training documents, held-out long texts) for stage I from the benchmark-safe sources.

    ``held_out_articles`` SQuAD articles, chosen with ``seed``, become one long text each (their
    paragraphs in order, 3,000-13,000 tokens); their paragraphs are removed from the training
    documents (``training.data.mlm_documents``: SQuAD dev and unused HotpotQA paragraphs).
    """
    documents = mlm_documents(data_dir)
    squad = read_json_file(Path(data_dir) / SQUAD_FILE)
    articles = sorted(squad["data"], key=lambda a: a["title"])
    random.Random(f"longembed-jina-mlm:{seed}").shuffle(articles)
    held = articles[:held_out_articles]
    held_paragraphs = {p["context"].strip() for a in held for p in a["paragraphs"]}
    held_texts = ["\n\n".join(p["context"].strip() for p in a["paragraphs"]) for a in held]
    return [d for d in documents if d not in held_paragraphs], held_texts


def recipe_pairs(
    data: RecipeData, data_dir: Path | str | None
) -> tuple[list[TrainingPair], list[TrainingPair], dict[str, int]]:
    """(training pairs, held-out pairs, counts): whole groups held out, the rest shuffled and capped.

    The pairs come from ``data.train_file`` if set, else from the allowed sources under ``data_dir``.
    """
    if data.train_file is None and data_dir is None:
        raise ValueError("pairs need --data-dir (../shared/data) or data.train_file in the config")
    sources = training_pairs(data_dir, data.sources, data.train_file, data.seed)
    pairs = [p for s in sources for p in s.pairs]
    train, held = split_held_out(pairs, data.held_out_fraction, data.seed)
    random.Random(f"longembed-jina-pairs:{data.seed}").shuffle(train)
    if data.max_pairs is not None:
        train = train[: data.max_pairs]
    counts = {s.name: len(s.pairs) for s in sources}
    counts.update(train=len(train), held_out=len(held))
    return train, held, counts


def held_out_retrieval(
    folder: Path | str,
    pairs: Sequence[TrainingPair],
    max_queries: int | None = None,
    batch_size: int = 32,
    device: str | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """nDCG@10, MRR@10, recall@10 and accuracy@1 (%) of query -> positive among all held-out positives.

    The model is opened as the benchmark opens it: ``load_encoder(folder, method="native")`` for
    ALiBi, "truncate" for an APE model.  A query with several positives (HotpotQA) has them all as
    relevant.  ``max_queries`` keeps a seeded subset of the queries (every positive stays a candidate).
    """
    if not pairs:
        raise ValueError("no held-out pairs to score")
    documents = list(dict.fromkeys(p.positive for p in pairs))
    doc_ids = {text: f"d{i}" for i, text in enumerate(documents)}
    qrels: dict[str, dict[str, int]] = {}
    for p in pairs:
        qrels.setdefault(p.query, {})[doc_ids[p.positive]] = 1
    queries = sorted(qrels)
    if max_queries is not None and len(queries) > max_queries:
        queries = sorted(random.Random(f"longembed-jina-eval:{seed}").sample(queries, max_queries))
    method = "native" if is_alibi_folder(_transformer_folder(folder)) else "truncate"
    encoder = load_encoder(folder, method=method, device=device)
    q = encoder.encode(queries, batch_size=batch_size, normalize_embeddings=True)
    d = encoder.encode(documents, batch_size=batch_size, normalize_embeddings=True)
    query_ids = [f"q{i}" for i in range(len(queries))]
    judged = {query_ids[i]: qrels[text] for i, text in enumerate(queries)}
    metrics = evaluate_scores(
        np.asarray(q) @ np.asarray(d).T, query_ids, [doc_ids[t] for t in documents], judged, (1, 10)
    )
    keep = ("ndcg@10", "mrr@10", "recall@10", "accuracy@1")
    return {name: round(100 * metrics[name], 2) for name in keep} | {
        "queries": len(queries),
        "documents": len(documents),
    }


def _transformer_folder(folder: Path | str) -> Path:
    """The folder that holds config.json (a sentence-transformers folder's Transformer module path)."""
    folder = Path(folder)
    modules = folder / "modules.json"
    if modules.is_file():
        for module in json.loads(modules.read_text()):
            if module.get("type", "").endswith("Transformer"):
                return folder / module.get("path", "")
    return folder


# ----------------------------------------------------------------------------- stages


def train_jina(
    stage: str,
    output: Path | str,
    init: Path | str | None = None,
    config: JinaRecipeConfig | None = None,
    data_dir: Path | str | None = None,
    max_steps: int | None = None,
    device: str | None = None,
    precision: str | None = None,
    overwrite: bool = False,
) -> StageResult:
    """Run one stage of the recipe into ``output`` (module docstring); ``init`` is the previous stage's folder.

    ``max_steps``, ``device`` and ``precision`` override the stage's section of ``config``.  Stage
    ``mlm`` starts from a new model (``config.model``) unless ``init`` names an MLM folder to continue;
    ``pairs`` and ``negatives`` need ``init``.  Returns the folder, the training summary and the record
    (also written to ``OUTPUT/longembed_jina.json``).
    """
    require_training_extra()
    check_stage(stage)
    config = (config or JinaRecipeConfig()).with_overrides(stage, max_steps, device, precision)
    output = Path(output)
    init = Path(init) if init is not None else None
    if init is not None and not (init / "config.json").is_file() and not (init / "modules.json").is_file():
        raise FileNotFoundError(f"--init {init} is not a model folder (no config.json)")
    if stage != "mlm" and init is None:
        raise ValueError(f"stage {stage!r} fine-tunes a model: give --init, the folder of the previous stage")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise FileNotFoundError(f"--data-dir {data_dir} is not a folder")
    _check_output(output, overwrite, [init] if init is not None else [])
    if stage == "mlm":
        return _train_mlm_stage(output, init, config, data_dir)
    return _train_contrastive_stage(stage, output, init, config, data_dir)


def _train_mlm_stage(
    output: Path, init: Path | None, config: JinaRecipeConfig, data_dir: Path | str | None
) -> StageResult:
    data, mlm = config.data, config.mlm
    if data.text_file is not None:
        texts, held_texts = read_texts_jsonl(data.text_file), []
        counts = {"text_file": len(texts)}
    elif data_dir is not None:
        texts, held_texts = mlm_corpus(data_dir, data.held_out_articles, data.seed)
        counts = {"documents": len(texts), "held_out_articles": len(held_texts)}
    else:
        raise ValueError(
            "stage mlm needs text: give --data-dir (../shared/data) or data.text_file in the config"
        )
    if init is not None:
        model = load_mlm_model(_transformer_folder(init))
        tokenizer = load_tokenizer(_transformer_folder(init))
    else:
        tokenizer = load_tokenizer(_tokenizer_folder(data.tokenizer))
        model = build_mlm_model(config.model, tokenizer, mlm.training_length, seed=mlm.seed)
    alibi = isinstance(model, JinaBertForMaskedLM)
    if not alibi and mlm.training_length > model.config.max_position_embeddings:
        raise ValueError(
            f"mlm.training_length {mlm.training_length} is longer than the model's "
            f"{model.config.max_position_embeddings}-position table"
        )
    identity = {
        "stage": "mlm",
        "model": dataclasses.asdict(config.model) if init is None else str(init.resolve()),
        "data": counts,
        "texts_sha256": _digest(texts),
    }
    held = _held_out_pairs(config.data, data_dir)
    summary = train_mlm(model, tokenizer, texts, output, mlm, run_identity=identity)
    if alibi:
        model.config.training_length = mlm.training_length
    tokenizer.model_max_length = _readable_length(model.config)
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    write_sentence_transformers_files(output, _device(mlm.device))
    record = {
        "stage": "mlm",
        "init": str(init) if init is not None else None,
        "positions": "alibi" if alibi else "absolute",
        "data": counts,
        "summary": summary.to_dict(),
    }
    return _finish(output, config, record, summary, held)


def _train_contrastive_stage(
    stage: str, output: Path, init: Path, config: JinaRecipeConfig, data_dir: Path | str | None
) -> StageResult:
    section: ContrastiveConfig = getattr(config, stage)
    train, held, counts = recipe_pairs(config.data, data_dir)
    transformer_folder = _transformer_folder(init)
    training_length = _training_length(json.loads((transformer_folder / "config.json").read_text()))
    st_model = sentence_model(init, section.max_seq_length or training_length, _device(section.device))
    identity = {
        "stage": stage,
        "init": str(init.resolve()),
        "pairs": counts,
        "pairs_sha256": _pairs_digest(train),
    }
    summary = train_contrastive(st_model, train, output, section, run_identity=identity)
    st_model.max_seq_length = _readable_length(st_model[0].auto_model.config)
    st_model.save(str(output))
    record = {
        "stage": stage,
        "init": str(init),
        "positions": "alibi" if is_alibi_folder(transformer_folder) else "absolute",
        "data": counts,
        "summary": summary.to_dict(),
    }
    return _finish(output, config, record, summary, held if config.data.evaluate else [])


def _held_out_pairs(data: RecipeData, data_dir: Path | str | None) -> list[TrainingPair]:
    """The held-out pairs to score after stage I, if pairs are available and evaluation is on."""
    if not data.evaluate or (data.train_file is None and data_dir is None):
        return []
    return recipe_pairs(data, data_dir)[1]


def _finish(
    output: Path,
    config: JinaRecipeConfig,
    record: dict[str, Any],
    summary: TrainingSummary,
    held: list[TrainingPair],
) -> StageResult:
    """Score the held-out pairs (when there are any), write the record, drop the checkpoints."""
    record = {**record, "config": config.to_dict(), "format_version": 1}
    if held:
        device = getattr(config, record["stage"]).device
        record["held_out"] = held_out_retrieval(output, held, config.data.max_held_out_queries, device=device)
    (output / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(output / CHECKPOINTS, ignore_errors=True)
    return StageResult(output, summary, record)


def sentence_model(folder: Path | str, max_seq_length: int, device: str = "cpu") -> SentenceTransformer:
    """``folder`` as a SentenceTransformer: a Transformer module over its weights + mean Pooling (section 5).

    A JinaBERT folder loads through ``AutoModel`` (``models.jina_bert`` registers the config and model),
    an MLM folder's head is left out.
    """
    require_training_extra()
    transformer_folder = _transformer_folder(folder)
    # BERT's CLS pooler is not part of the recipe (mean pooling); JinaBertModel has none
    model_kwargs = {} if is_alibi_folder(transformer_folder) else {"add_pooling_layer": False}
    transformer = Transformer(
        str(transformer_folder), max_seq_length=max_seq_length, model_kwargs=model_kwargs
    )
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    return SentenceTransformer(modules=[transformer, pooling], device=device)


def write_sentence_transformers_files(folder: Path, device: str = "cpu") -> None:
    """Add sentence-transformers' files (modules.json, mean pooling, ...) beside a model folder's own.

    sentence-transformers writes them itself (into a scratch folder, from which only its own files are
    copied), so they have the installed version's format; the model's weights (with the MLM head),
    config and tokenizer are left as they are.
    """
    model = sentence_model(folder, _readable_length_of(folder), device)
    with tempfile.TemporaryDirectory() as scratch:
        model.save(scratch)
        for name in SENTENCE_TRANSFORMERS_FILES:
            if (Path(scratch) / name).is_file():
                shutil.copy2(Path(scratch) / name, folder / name)
        shutil.rmtree(folder / POOLING_DIR, ignore_errors=True)
        shutil.copytree(Path(scratch) / POOLING_DIR, folder / POOLING_DIR)


def _readable_length(model_config: Any) -> int:
    """The longest input a model takes: an ALiBi model's declared maximum, an APE model's table."""
    return int(model_config.max_position_embeddings)


def _readable_length_of(folder: Path) -> int:
    return int(json.loads((folder / "config.json").read_text())["max_position_embeddings"])


def _training_length(model_config: dict[str, Any]) -> int:
    """The length a model was pre-trained at: JinaBERT's ``training_length``, an APE model's table."""
    return int(model_config.get("training_length") or model_config["max_position_embeddings"])


def _tokenizer_folder(name: str) -> Path:
    return default_model_path() if name == DEFAULT_TOKENIZER else Path(name)


def _device(device: str | None) -> str:
    if device is not None:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_output(output: Path, overwrite: bool, inputs: list[Path]) -> None:
    """A finished stage is never overwritten by accident, nor the stage's --init model ever; an
    unfinished one resumes."""
    refuse_overlap(output, inputs)
    if (output / RECORD_FILE).is_file():
        if not overwrite:
            raise FileExistsError(
                f"{output} holds a finished stage; pass overwrite=True (--overwrite) to retrain"
            )
        shutil.rmtree(output)
    elif output.exists() and any(p.name != CHECKPOINTS for p in output.iterdir()):
        raise FileExistsError(f"{output} exists and holds other files; choose an empty or new --output")


def _digest(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _pairs_digest(pairs: Sequence[TrainingPair]) -> str:
    digest = hashlib.sha256()
    for pair in pairs:
        digest.update(json.dumps([pair.query, pair.positive, list(pair.negatives)]).encode())
    return digest.hexdigest()
