"""Attention cost: every method's time per document against plain attention at the same length.

For each model and length n, one document of exactly n tokens (cut from the Paul Graham essays) is
embedded by every runner in turn, round after round (A B C A B C ...), in one process; the table
gives each runner's median seconds and its ratio to the baselines, as the median over rounds of
the per-round ratio (so a change in machine load between rounds hits both sides alike).

Runners and baselines by model:

- nomic-embed-text-v1.5 (RoPE): longembed's methods, and ``hf``: the unmodified transformers
  NomicBertModel with SDPA attention and its own positions 0..n-1 (RoPE has no position table; any
  rope scaling costs the same).  "x plain" is against longembed's ``ntk``, a plain-attention method.
- all-MiniLM-L6-v2 (absolute positions, Lo = 512): longembed's methods, and ``hf``: the unmodified
  BertModel with SDPA, given position_ids floor(p * 512 / n) beyond 512 tokens (a lookup in the
  same table costs the same as any other).  "x plain" is against ``pi``.
- jina (a JinaBERT with random weights, hidden 512, 8 layers, 8 heads): ``native`` (ALiBi through
  longembed) against ``no-bias`` (the same model and weights with the ALiBi slopes removed: plain
  attention through the same code), and ``hf``: the model's own SDPA attention with the full
  (H x n x n) bias materialized, up to --hf-alibi-max tokens.
- modernbert (random weights, hidden 512, 8 layers, a global layer every third, local window 128):
  ``truncate`` (no extension; its local layers through longembed's band path) against
  ``all-global`` (the same weights with every layer global, through longembed: plain attention)
  and ``hf``: transformers' ModernBertModel with SDPA (local layers with an n x n window mask).

    python benchmarks/bench_attention.py --models nomic,minilm,jina --lengths 2048,8192 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer, ModernBertConfig, ModernBertModel

from longembed import load_encoder
from longembed.models.jina_bert import JinaBertConfig, JinaBertModel

METHODS = {
    "nomic": ["truncate", "pcw", "gp", "pi", "ntk", "yarn", "selfextend"],
    "minilm": ["truncate", "pcw", "gp", "rp", "pi"],
    "jina": ["native", "no-bias"],
    "modernbert": ["truncate", "all-global"],
}
PLAIN = {"nomic": "ntk", "minilm": "pi", "jina": "no-bias", "modernbert": "all-global"}
ORIGINAL_LENGTH = {"nomic": 2048, "minilm": 512, "jina": 512, "modernbert": 16384}
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="nomic,minilm,jina,modernbert")
    parser.add_argument("--lengths", default="2048,8192,16384", help="document lengths in tokens")
    parser.add_argument("--methods", default=None, help="only these methods (baselines always run)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over all runners per length")
    parser.add_argument("--models-dir", type=Path, default=Path("/work/models"))
    parser.add_argument(
        "--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument(
        "--hf-alibi-max", type=int, default=8192, help="longest input for JinaBERT's own SDPA"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the measurements as JSON")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    lengths = [int(x) for x in args.lengths.split(",")]
    only = set(args.methods.split(",")) if args.methods else None
    text = " ".join(
        f.read_text()
        for f in sorted((args.data_dir / "paul_graham_essays" / "PaulGrahamEssays").glob("*.txt"))
    )
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        for model in args.models.split(","):
            folder = model_folder(model, args.models_dir, Path(scratch))
            tokenizer = AutoTokenizer.from_pretrained(folder)
            for n in lengths:
                runners = make_runners(model, folder, n, only, args.hf_alibi_max)
                found = measure(model, n, runners, document(tokenizer, text, n), args.repeats)
                print_table(found, header=not rows)
                rows += found
    print(f"\nthreads {torch.get_num_threads()}, repeats {args.repeats}, torch {torch.__version__}\n")
    print_table(rows)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1)
        )


def model_folder(model: str, models_dir: Path, scratch: Path) -> Path:
    """The model's folder: a checkpoint, or a randomly initialised model saved with MiniLM's tokenizer."""
    if model == "nomic":
        return models_dir / "nomic-embed-text-v1.5"
    if model == "minilm":
        return models_dir / "all-MiniLM-L6-v2"
    torch.manual_seed(0)
    folder = scratch / model
    if model == "jina":
        config = JinaBertConfig(
            vocab_size=30528,
            hidden_size=512,
            num_hidden_layers=8,
            num_attention_heads=8,
            intermediate_size=2048,
        )
        JinaBertModel(config).eval().save_pretrained(folder)
    elif model == "modernbert":
        modernbert_model(global_every=3).save_pretrained(folder)
    else:
        raise ValueError(f"unknown model {model!r}")
    for name in TOKENIZER_FILES:
        shutil.copy(models_dir / "all-MiniLM-L6-v2" / name, folder / name)
    return folder


def modernbert_model(global_every: int) -> torch.nn.Module:
    torch.manual_seed(0)
    config = ModernBertConfig(
        vocab_size=30522,
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=8,
        num_attention_heads=8,
        max_position_embeddings=ORIGINAL_LENGTH["modernbert"],
        local_attention=128,
        global_attn_every_n_layers=global_every,
        pad_token_id=0,
        cls_token_id=101,
        sep_token_id=102,
        bos_token_id=101,
        eos_token_id=102,
    )
    return ModernBertModel(config).eval()


def document(tokenizer, text: str, n: int) -> str:
    """A text that tokenizes to exactly n tokens with the special tokens."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][: n - 2]
    doc = tokenizer.decode(ids)
    got = len(tokenizer(doc)["input_ids"])
    if got != n:
        raise RuntimeError(f"the document has {got} tokens, not {n}")
    return doc


Runner = Callable[[str], np.ndarray]


def make_runners(
    model: str, folder: Path, n: int, only: set[str] | None, hf_alibi_max: int
) -> dict[str, Runner]:
    """Name -> a function that embeds one document (baselines included), set up for n tokens."""
    runners: dict[str, Runner] = {}
    if model != "jina" or n <= hf_alibi_max:
        runners["hf"] = hf_runner(model, folder)
    for method in METHODS[model]:
        if only is not None and method not in only and method != PLAIN[model]:
            continue
        if method == "truncate" and n > ORIGINAL_LENGTH[model]:
            continue  # truncate embeds Lo tokens: not the same length
        runners[method] = encoder_runner(folder, method, n)
    for run in runners.values():  # warm up on a short text: first-call costs out of the timings
        run("a short text to warm up")
    return runners


def encoder_runner(folder: Path, method: str, n: int) -> Runner:
    if method == "no-bias":  # JinaBERT without its ALiBi slopes: plain attention, same code and weights
        encoder = load_encoder(folder, method="native", max_length=n)
        for module in encoder.model.modules():
            if getattr(module, "alibi_slopes", None) is not None:
                module.alibi_slopes = None
    elif method == "all-global":  # the same ModernBERT weights with every layer global
        global_folder = folder.parent / "modernbert-all-global"
        if not global_folder.exists():
            all_global = modernbert_model(global_every=1)
            all_global.load_state_dict(AutoModel.from_pretrained(folder).state_dict())
            all_global.save_pretrained(global_folder)
            for name in TOKENIZER_FILES:
                shutil.copy(folder / name, global_folder / name)
        encoder = load_encoder(global_folder, method="truncate", max_length=n)
    else:
        encoder = load_encoder(folder, method=method, max_length=n)
    return lambda doc: encoder.encode([doc])


def hf_runner(model: str, folder: Path) -> Runner:
    """The unmodified transformers model with SDPA (JinaBERT: its own SDPA path), mean-pooled."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if model == "jina":
        hf = JinaBertModel.from_pretrained(folder, attn_implementation="sdpa").eval()
    else:
        hf = AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval()

    def run(doc: str) -> np.ndarray:
        inputs = tokenizer([doc], return_tensors="pt")
        n = inputs["input_ids"].shape[1]
        if model == "minilm" and n > ORIGINAL_LENGTH["minilm"]:
            inputs["position_ids"] = torch.arange(n).unsqueeze(0) * ORIGINAL_LENGTH["minilm"] // n
        return hf(**inputs).last_hidden_state.mean(1).numpy()

    return run


def measure(model: str, n: int, runners: dict[str, Runner], doc: str, repeats: int) -> list[dict]:
    """Each runner on ``doc``, ``repeats`` rounds in turn; medians and per-round ratios."""
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            run(doc)
            times[name].append(time.perf_counter() - start)

    def ratio(name: str, base: str) -> float | None:
        if base not in times or name == base:
            return None
        return round(statistics.median(a / b for a, b in zip(times[name], times[base], strict=True)), 3)

    return [
        {
            "model": model,
            "tokens": n,
            "runner": name,
            "median_s": round(statistics.median(t), 2),
            "runs_s": [round(x, 2) for x in t],
            "x_hf": ratio(name, "hf"),
            "x_plain": ratio(name, PLAIN[model]),
        }
        for name, t in times.items()
    ]


def print_table(rows: list[dict], header: bool = True) -> None:
    if header:
        print("| model | tokens | runner | median s | x hf | x plain | runs s |")
        print("|---|---|---|---|---|---|---|")
    for r in rows:
        fmt = lambda x: "" if x is None else f"{x:.3f}"  # noqa: E731
        runs = ", ".join(f"{x:.1f}" for x in r["runs_s"])
        print(
            f"| {r['model']} | {r['tokens']} | {r['runner']} | {r['median_s']:.2f} | {fmt(r['x_hf'])} | "
            f"{fmt(r['x_plain'])} | {runs} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
