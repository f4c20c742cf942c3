"""``longembed train jina``: the Jina Embeddings v2 recipe, one stage per call; ``longembed train contextual``:
late-chunking fine-tuning (:func:`run_contextual`).

    longembed train jina --stage mlm --output runs/jina/mlm --config recipe.json --data-dir ../shared/data
    longembed train jina --stage pairs --init runs/jina/mlm --output runs/jina/pairs --config recipe.json
    longembed train jina --stage negatives --init runs/jina/pairs --output runs/jina/negatives --config recipe.json
    longembed train jina --stage mlm --config recipe.json --write-config full.json   # the effective config

The model size and every hyperparameter live in the config file (``JinaRecipeConfig``: sections model,
mlm, pairs, negatives, data; a file may give only some of them); --max-steps, --device and --precision
override the stage's section.  Calling a stage again with the same arguments resumes it from its last
checkpoint.  The output folder opens with ``load_encoder(DIR, method="native")``.
"""

from __future__ import annotations

import argparse
import json

from longembed.cli.options import existing_folder
from longembed.errors import UserError
from longembed.evaluation.runner import default_data_dir
from longembed.training.contextual import RECORD_FILE as CONTEXTUAL_RECORD
from longembed.training.contextual import train_contextual
from longembed.training.jina import RECORD_FILE, JinaRecipeConfig, train_jina


def run_jina(args: argparse.Namespace) -> int:
    """Run one stage (or write the effective config) and print what it did."""
    config = JinaRecipeConfig.load(args.config) if args.config is not None else JinaRecipeConfig()
    config = config.with_overrides(args.stage, args.max_steps, args.device, args.precision)
    if args.write_config is not None:
        print(f"wrote {config.save(args.write_config)}")
        return 0
    if args.output is None:
        raise UserError("give --output, the folder to write the stage to")
    existing_folder(args.init, "--init")
    data_dir = existing_folder(
        args.data_dir if args.data_dir is not None else default_data_dir(), "--data-dir"
    )
    result = train_jina(
        args.stage, args.output, init=args.init, config=config, data_dir=data_dir, overwrite=args.overwrite
    )
    summary = result.summary
    print(
        f"\nstage {args.stage}: {summary.steps} steps in {summary.seconds} s, final loss {summary.final_loss}"
    )
    if "held_out" in result.record:
        print(f"held-out pairs: {json.dumps(result.record['held_out'])}")
    method = "native" if result.record.get("positions") == "alibi" else "truncate"
    print(
        f"wrote {result.folder} ({RECORD_FILE}); open it with load_encoder({str(result.folder)!r}, method={method!r})"
    )
    return 0


def run_contextual(args: argparse.Namespace) -> int:
    """Fine-tune for late chunking and print what the run did.

        longembed train contextual --model PATH/all-MiniLM-L6-v2 --method pi --max-length 4096 --doc-tokens 2048 \\
            --output minilm-contextual --data-dir ../shared/data [--max-steps N --distill-weight W] [--resume]
    """
    data_dir = existing_folder(args.data_dir if args.data_dir is not None else default_data_dir(), "--data-dir")
    if data_dir is None:
        raise UserError("give --data-dir (or set $LONGEMBED_DATA_DIR): the folder holding SQuAD and HotpotQA, "
                        "which contextual training reads")
    result = train_contextual(
        args.model, args.output, data_dir=data_dir, sources=tuple(args.sources), cache_dir=args.cache_dir,
        resume=args.resume, overwrite=args.overwrite, evaluate=not args.no_evaluate, method=args.method, max_length=args.max_length,
        doc_tokens=args.doc_tokens, temperature=args.temperature, in_sequence_weight=args.in_sequence_weight,
        distill_weight=args.distill_weight, max_steps=args.max_steps, documents_per_step=args.documents_per_step,
        queries_per_document=args.queries_per_document, squad_share=args.squad_share, learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps, gradient_checkpointing=not args.no_gradient_checkpointing,
        held_out_articles=args.held_out_articles, save_steps=args.save_steps, logging_steps=args.logging_steps,
        seed=args.seed, device=args.device, precision=args.precision,
    )
    s = result.summary
    print(json.dumps({"output": str(result.folder), "steps": s.steps, "seconds": s.seconds,
                      "seconds_per_step": s.seconds_per_step, "final_loss": s.final_loss,
                      "held_out_titles": result.record["data"]["held_out_titles"]}, indent=2))
    if "fidelity" in result.record:
        print(json.dumps({"short_text_check": result.record["fidelity"]}, indent=2))
    encoder = result.record["encoder"]
    print(f"wrote {result.folder} ({CONTEXTUAL_RECORD}); open it with load_encoder({str(result.folder)!r}) "
          f"(method {encoder['method']!r}, max_length {encoder['max_length']}) and embed with "
          "encode_chunks(..., late=True)")
    return 0
