"""The small reproduction of Jina Embeddings v2 (issue 10): the three-stage recipe and Figure 2.

    python benchmarks/jina_recipe.py --data-dir ../shared/data --out runs/jina           # everything
    python benchmarks/jina_recipe.py --data-dir ../shared/data --out runs/jina --steps accuracy
    python benchmarks/jina_recipe.py --data-dir ../shared/data --out /tmp/jina-smoke --smoke

Steps (each skipped when its output exists; a killed training step resumes from its checkpoint):

1. ``mlm-alibi``, ``mlm-ape``: stage I for JinaBERT and its twin with learned absolute positions,
   the same steps, data and optimizer (``OUT/alibi.json``, ``OUT/ape.json``: ``JinaRecipeConfig``).
2. ``accuracy``: masked-token accuracy on held-out SQuAD articles (never trained on) at 1x, 2x, 4x,
   8x and 16x the training length; the twin up to its table, then with PI and RP position ids
   (``OUT/mlm_accuracy.{json,md,png}``, the paper's Figure 2).
3. ``pairs``, ``negatives``: stages II and III on the JinaBERT (held-out pair retrieval after each
   stage in ``OUT/retrieval.md``).
4. ``passkey``: the benchmark's passkey and needle at 256..8192 tokens with ``method="native"``,
   against the same model truncated to its training length (``OUT/eval-*``).

The same runs as commands (``longembed train jina`` / ``longembed eval``):

    python benchmarks/jina_recipe.py --out runs/jina --write-configs
    longembed train jina --stage mlm --config runs/jina/alibi.json --output runs/jina/alibi-mlm --data-dir ../shared/data
    longembed train jina --stage mlm --config runs/jina/ape.json --output runs/jina/ape-mlm --data-dir ../shared/data
    longembed train jina --stage pairs --config runs/jina/alibi.json --init runs/jina/alibi-mlm \\
        --output runs/jina/alibi-pairs --data-dir ../shared/data
    longembed train jina --stage negatives --config runs/jina/alibi.json --init runs/jina/alibi-pairs \\
        --output runs/jina/alibi-negatives --data-dir ../shared/data
    longembed eval --model runs/jina/alibi-negatives --method native --tasks passkey needle \\
        --lengths 256,512,1024,2048,4096,8192 --data-dir ../shared/data --output runs/jina/eval-native
    longembed eval --model runs/jina/alibi-negatives --method truncate --max-length 128 --tasks passkey needle \\
        --lengths 256,512,1024,2048,4096,8192 --data-dir ../shared/data --output runs/jina/eval-truncate

Sizes (``JinaRecipeConfig()``'s defaults): 4 layers, hidden 256, 4 heads, GEGLU intermediate 1024
(Jina-small's depth and 4x feed-forward ratio at half its width: 12.1M parameters, 7.8M of them the
30,522 x 256 word embedding), trained at 128 tokens (a quarter of Jina's 512, so 16x is 2048 where
Jina's is 8192), batch 32, 600 steps with 10% warm-up (the paper's 10k of 100k), eta 1e-3 (Jina
small's).  Stage II: batch 64, 100 steps; stage III: batch 16 with 15 hard negatives, 30 steps.

Cost on this machine (measured on short runs while other jobs held about one of the two cores):
stage I ~600 training tokens per CPU-second (~106 tokens per sequence: 600 steps = 2.0M tokens,
~30 min per model with both cores, ~55 min with one); stage II ~14 s per step with one core; stage
III ~32 s per step with one core; encoding one 8192-token document ~12 s with one core (passkey +
needle: 200 documents per length).  With both cores free the whole script is about 1 h 50 min, most
of it stage I (two models) and the 4k/8k passkey and needle documents.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from matplotlib.figure import Figure

from longembed import load_encoder
from longembed.evaluation.runner import evaluate_model
from longembed.training.contrastive import ContrastiveConfig
from longembed.training.jina import RECORD_FILE, JinaRecipeConfig, RecipeData, mlm_corpus, train_jina
from longembed.training.mlm import MLMConfig, MLMModelConfig, mlm_accuracy_by_length

STEPS = ("mlm-alibi", "mlm-ape", "accuracy", "pairs", "negatives", "passkey")
FACTORS = (1, 2, 4, 8, 16)
EVAL_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)


def recipe(smoke: bool) -> JinaRecipeConfig:
    """The small reproduction's config, or (``smoke``) tiny sizes and a few steps to check the pipeline."""
    if not smoke:
        return JinaRecipeConfig()
    contrastive = dict(temperature=0.05, symmetric=True, warmup_steps=1, save_steps=2, logging_steps=1)
    return JinaRecipeConfig(
        model=MLMModelConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128
        ),
        mlm=MLMConfig(
            training_length=32, batch_size=8, max_steps=4, warmup_steps=1, save_steps=2, logging_steps=1
        ),
        pairs=ContrastiveConfig(batch_size=8, max_steps=2, hard_negatives=0, **contrastive),
        negatives=ContrastiveConfig(batch_size=4, max_steps=2, hard_negatives=3, **contrastive),
        data=RecipeData(held_out_articles=2, max_pairs=64, max_held_out_queries=32),
    )


def write_configs(out: Path, config: JinaRecipeConfig) -> tuple[Path, Path]:
    alibi = config.save(out / "alibi.json")
    twin = dataclasses.replace(config, model=dataclasses.replace(config.model, positions="absolute"))
    return alibi, twin.save(out / "ape.json")


def stage(name: str, folder: Path, **kwargs) -> None:
    if (folder / RECORD_FILE).is_file():
        print(f"{name}: {folder} is done")
        return
    start = time.perf_counter()
    result = train_jina(output=folder, **kwargs)
    summary = result.summary
    extra = f", {summary.tokens_per_second} tokens/s" if hasattr(summary, "tokens_per_second") else ""
    print(
        f"{name}: {summary.steps} steps, {summary.seconds} s{extra}, wall {time.perf_counter() - start:.0f} s"
    )
    if "held_out" in result.record:
        print(f"  held-out pairs: {result.record['held_out']}")


def accuracy(out: Path, data_dir: Path, config: JinaRecipeConfig) -> None:
    """MLM accuracy by length for both models (and the twin with PI / RP), as JSON, a table and a plot."""
    _, held_texts = mlm_corpus(data_dir, config.data.held_out_articles, config.data.seed)
    length = config.mlm.training_length
    lengths = [f * length for f in FACTORS]
    runs = {
        "JinaBERT (ALiBi)": (out / "alibi-mlm", None),
        "APE twin": (out / "ape-mlm", None),
        "APE twin + PI": (out / "ape-mlm", "pi"),
        "APE twin + RP": (out / "ape-mlm", "rp"),
    }
    table = {}
    for label, (folder, method) in runs.items():
        start = time.perf_counter()
        rows = mlm_accuracy_by_length(folder, held_texts, lengths, position_method=method)
        table[label] = [r.to_dict() for r in rows]
        print(
            f"{label}: {[None if r.accuracy is None else round(100 * r.accuracy, 1) for r in rows]} "
            f"({time.perf_counter() - start:.0f} s)"
        )
    (out / "mlm_accuracy.json").write_text(json.dumps({"lengths": lengths, "runs": table}, indent=2) + "\n")
    header = "| model | " + " | ".join(f"{f}x ({n})" for f, n in zip(FACTORS, lengths, strict=True)) + " |"
    lines = [header, "|---" * (len(lengths) + 1) + "|"]
    for label, rows in table.items():
        cells = ["-" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}" for r in rows]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    masked = [r["masked_tokens"] for r in table["JinaBERT (ALiBi)"]]
    lines.append(f"\nmasked tokens per length: {masked}")
    (out / "mlm_accuracy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for label, rows in table.items():
        points = [(r["length"], 100 * r["accuracy"]) for r in rows if r["accuracy"] is not None]
        ax.plot(*zip(*points, strict=True), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("MLM accuracy (%)")
    ax.axvline(length, color="grey", linestyle=":", linewidth=1)
    ax.legend()
    ax.set_title(f"MLM accuracy, trained at {length} tokens")
    fig.tight_layout()
    fig.savefig(out / "mlm_accuracy.png", dpi=120)


def retrieval_table(out: Path) -> None:
    lines = ["| stage | nDCG@10 | MRR@10 | recall@10 | accuracy@1 | queries |", "|---|---|---|---|---|---|"]
    for name in ("alibi-mlm", "alibi-pairs", "alibi-negatives", "ape-mlm"):
        record_file = out / name / RECORD_FILE
        if record_file.is_file() and "held_out" in (record := json.loads(record_file.read_text())):
            h = record["held_out"]
            lines.append(
                f"| {name} | {h['ndcg@10']} | {h['mrr@10']} | {h['recall@10']} | {h['accuracy@1']} | {h['queries']} |"
            )
    (out / "retrieval.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def passkey(out: Path, data_dir: Path, config: JinaRecipeConfig, lengths: list[int]) -> None:
    """Passkey and needle: ALiBi native at every length against truncation to the training length."""
    folder = out / "alibi-negatives"
    runs = {
        "native": load_encoder(folder, method="native"),
        "truncate": load_encoder(folder, method="truncate", max_length=config.mlm.training_length),
    }
    for name, encoder in runs.items():
        start = time.perf_counter()
        results = evaluate_model(encoder, ["passkey", "needle"], data_dir, lengths, out / f"eval-{name}")
        by_length = {task: results.tasks[task].by_length for task in results.tasks}
        print(f"{name}: {by_length} ({time.perf_counter() - start:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/jina"))
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {STEPS}")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes and a few steps (checks the pipeline)"
    )
    parser.add_argument(
        "--write-configs", action="store_true", help="write OUT/alibi.json and OUT/ape.json, exit"
    )
    parser.add_argument("--lengths", default=None, help="passkey/needle lengths (default 256..8192)")
    args = parser.parse_args()
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown step(s) {unknown}; choose from {STEPS}")
    config = recipe(args.smoke)
    alibi_config, ape_config = write_configs(args.out, config)
    if args.write_configs:
        print(f"wrote {alibi_config} and {ape_config}")
        return
    twin = JinaRecipeConfig.load(ape_config)
    data = args.data_dir
    if "mlm-alibi" in steps:
        stage("mlm-alibi", args.out / "alibi-mlm", stage="mlm", config=config, data_dir=data)
    if "mlm-ape" in steps:
        stage("mlm-ape", args.out / "ape-mlm", stage="mlm", config=twin, data_dir=data)
    if "accuracy" in steps:
        accuracy(args.out, data, config)
    if "pairs" in steps:
        stage(
            "pairs",
            args.out / "alibi-pairs",
            stage="pairs",
            init=args.out / "alibi-mlm",
            config=config,
            data_dir=data,
        )
    if "negatives" in steps:
        stage(
            "negatives",
            args.out / "alibi-negatives",
            stage="negatives",
            init=args.out / "alibi-pairs",
            config=config,
            data_dir=data,
        )
    retrieval_table(args.out)
    if "passkey" in steps:
        lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else list(EVAL_LENGTHS)
        passkey(args.out, data, config, lengths)


if __name__ == "__main__":
    main()
