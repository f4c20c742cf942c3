"""Shared fixtures: tiny models of every position family, built and saved inside the tests."""

from __future__ import annotations

import importlib
import os
import string
from pathlib import Path

import pytest
import torch
from transformers import (
    BertConfig,
    BertModel,
    BertTokenizer,
    LlamaConfig,
    LlamaModel,
    ModernBertConfig,
    ModernBertModel,
    NomicBertConfig,
    NomicBertModel,
    XLMRobertaConfig,
    XLMRobertaModel,
)

from longembed.models.jina_bert import JinaBertConfig, JinaBertModel

SHARED = Path(__file__).resolve().parents[2] / "shared"
#: The shared data folder (``../shared/data``; ``$LONGEMBED_TEST_DATA_DIR`` moves it, e.g. to show that
#: a missing file fails the suite under CI).
DATA_DIR = Path(os.environ.get("LONGEMBED_TEST_DATA_DIR") or SHARED / "data")

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "it",
    "that",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
    "this",
    "from",
]
VOCAB = (
    SPECIALS + list(string.ascii_lowercase) + [f"##{c}" for c in string.ascii_lowercase] + WORDS + [".", ","]
)

# Lo = 32 for every tiny model, so "long" inputs are cheap.
TINY = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=len(VOCAB)
)
LO = 32


def _save(model: torch.nn.Module, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB))
    # transformers 5 ignores BertTokenizer(vocab_file=...): give the vocabulary itself
    tokenizer = BertTokenizer(vocab={piece: i for i, piece in enumerate(VOCAB)})
    assert tokenizer.convert_tokens_to_ids("the") == VOCAB.index("the"), "tiny tokenizer lost its vocabulary"
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder


def build_tiny(family: str, folder: Path, **overrides) -> Path:
    """Save a randomly initialised tiny model of ``family`` with a word-piece tokenizer."""
    torch.manual_seed(0)
    if family == "bert":
        model = BertModel(
            BertConfig(**TINY, max_position_embeddings=LO, **overrides), add_pooling_layer=False
        )
    elif family == "xlmr":  # positions start at padding_idx + 1
        model = XLMRobertaModel(
            XLMRobertaConfig(**TINY, max_position_embeddings=LO + 1, pad_token_id=0, **overrides),
            add_pooling_layer=False,
        )
    elif family == "nomic":
        config = NomicBertConfig(**TINY, max_position_embeddings=LO, **overrides)
        model = NomicBertModel(config)
    elif family == "llama":  # causal decoder with grouped-query attention
        model = LlamaModel(
            LlamaConfig(**TINY, num_key_value_heads=2, max_position_embeddings=LO, **overrides)
        )
    elif family == "modernbert":  # alternating global / local (sliding-window) layers, two rope bases
        special = dict(pad_token_id=0, bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3)
        config = ModernBertConfig(
            **TINY,
            max_position_embeddings=LO,
            local_attention=8,
            global_attn_every_n_layers=2,
            **special,
            **overrides,
        )
        model = ModernBertModel(config)
    elif family == "jina":
        model = JinaBertModel(JinaBertConfig(**TINY, **overrides))
    else:
        raise ValueError(family)
    with torch.no_grad():  # make the random model less degenerate: larger attention logits
        for name, p in model.named_parameters():
            if any(k in name for k in ("query", "key", "q_proj", "k_proj", "Wqkv")) and p.dim() == 2:
                p.mul_(4.0)
    return _save(model.eval(), folder)


FAMILIES = ("bert", "xlmr", "nomic", "modernbert", "llama", "jina")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {family: build_tiny(family, root / family) for family in FAMILIES}


def words(n: int, seed: int = 0) -> str:
    """A text of n words drawn from the tiny vocabulary (deterministic)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(WORDS), (n,), generator=g).tolist()
    return " ".join(WORDS[i] for i in idx)


# ----------------------------------------------------------------------------- real model folders
REAL_MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small", "nomic-embed-text-v1.5")


def real_models_dir() -> Path:
    """Where materialize.py puts the real models: $LONGEMBED_MODELS_DIR, else ~/.cache/longembed/models."""
    configured = os.environ.get("LONGEMBED_MODELS_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "longembed" / "models"


def missing(reason: str) -> None:
    """A test that cannot run here: it fails under CI (the environment variable CI is set), so CI
    never passes by skipping, and is skipped elsewhere; both with ``reason``."""
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_data(relative: str | Path) -> Path:
    """``DATA_DIR / relative`` (a file or folder of the shared data), or :func:`missing` naming it."""
    path = DATA_DIR / relative
    if not path.exists():
        missing(f"shared data {path} is missing (the tests read ../shared/data, or $LONGEMBED_TEST_DATA_DIR)")
    return path


def require_package(name: str):
    """Import ``name`` (a package of the ``test`` extra), or :func:`missing` with the install command."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"{name} is not installed ({exc}): pip install -c constraints.txt -e '.[test,default-model]'")


def real_model_folder(name: str) -> Path:
    """The folder of a real model built by ../shared/models/materialize.py.

    When it is missing the test fails in CI (the environment variable CI is set) and is skipped
    elsewhere, both with the command that builds it.
    """
    if name not in REAL_MODELS:
        raise ValueError(f"unknown real model {name!r}; choose from {REAL_MODELS}")
    folder = real_models_dir() / name
    if not (folder / "config.json").is_file():
        reason = (
            f"real model folder {folder} is missing: run `python ../shared/models/materialize.py` "
            f"(or set LONGEMBED_MODELS_DIR to the folder that holds {name})"
        )
        missing(reason)
    return folder
