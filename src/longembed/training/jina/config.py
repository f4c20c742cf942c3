"""The recipe's settings: the model, one section per stage and the data; round-trips through JSON.

Plain data apart from the training stack: the stage defaults are the small reproduction's
(benchmarks/jina_recipe.py), with the paper's loss settings (tau = 0.05, bidirectional InfoNCE).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.errors import MissingFileError, UserError
from longembed.training.config import SOURCES, STAGES, ContrastiveConfig
from longembed.training.mlm.config import MLMConfig, MLMModelConfig

DEFAULT_TOKENIZER = "default"


def _recipe_stage(**schedule: Any) -> ContrastiveConfig:
    """A contrastive stage of the recipe: bidirectional InfoNCE, tau = 0.05, weight decay 0.01 (paper 5),
    with the stage's own batch, schedule and hard negatives."""
    return ContrastiveConfig(weight_decay=0.01, temperature=0.05, symmetric=True, **schedule)


def pairs_stage_defaults() -> ContrastiveConfig:
    """Stage II: eqs. (3)+(4), bidirectional InfoNCE, tau = 0.05, no hard negatives (small-reproduction steps)."""
    return _recipe_stage(
        batch_size=64, learning_rate=2e-4, warmup_steps=10, max_steps=100, hard_negatives=0, save_steps=25,
        logging_steps=10,
    )


def negatives_stage_defaults() -> ContrastiveConfig:
    """Stage III: eq. (5), NCE+ with 15 hard negatives per pair (paper 5.2), tau = 0.05."""
    return _recipe_stage(
        batch_size=16, learning_rate=1e-4, warmup_steps=3, max_steps=30, hard_negatives=15, save_steps=10,
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
            raise UserError(f"data.sources must be a non-empty list from {SOURCES}, got {self.sources}")
        if not 0 <= self.held_out_fraction < 1:
            raise UserError(f"data.held_out_fraction must be in [0, 1), got {self.held_out_fraction}")
        if self.held_out_articles < 0 or self.max_held_out_queries < 1:
            raise UserError("data.held_out_articles must be >= 0 and data.max_held_out_queries >= 1")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise UserError(f"data.max_pairs must be positive, got {self.max_pairs}")


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
            raise UserError(
                f"unknown recipe section(s) {unknown}; known: {[f.name for f in dataclasses.fields(cls)]}"
            )
        sections = {}
        for f in dataclasses.fields(cls):
            default = getattr(defaults, f.name)
            given = values.get(f.name) or {}
            if not isinstance(given, dict):
                raise UserError(f"recipe section {f.name!r} must be an object, got {type(given).__name__}")
            known = {x.name for x in dataclasses.fields(default)}
            wrong = sorted(set(given) - known)
            if wrong:
                raise UserError(
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
            raise MissingFileError(f"no recipe config file at {path}")
        try:
            values = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise UserError(f"{path} is not valid JSON ({exc})") from None
        if not isinstance(values, dict):
            raise UserError(f"{path}: a recipe config is a JSON object of sections")
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


def check_stage(stage: str) -> str:
    """``stage`` if it is one of the recipe's stages, else a ValueError listing them."""
    if stage not in STAGES:
        raise UserError(f"unknown stage {stage!r}; choose from {', '.join(STAGES)}")
    return stage
