"""``longembed tune``: LongEmbed's further tuning of an APE model's added position rows.

    longembed tune --model PATH --method pi --max-length 4096 --output DIR --data-dir ../shared/data \\
        [--train-file PAIRS.jsonl] [--max-steps N] [--batch-size B] [--learning-rate LR]

Defaults are the paper's (Appendix B: lr 5e-4, 100 warm-up steps, 3 epochs, batch 512, tau 0.01,
7 hard negatives); on a CPU give --max-steps, --batch-size and --hard-negatives that fit.  Writes a
sentence-transformers folder that ``load_encoder(DIR)`` opens with the method and Lt recorded in it.
A killed run resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import json

from longembed.evaluation.runner import default_data_dir
from longembed.training.tune import default_tuning_config, tune_positions


def run(args: argparse.Namespace) -> int:
    config = default_tuning_config(
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        epochs=args.epochs,
        max_steps=args.max_steps,
        hard_negatives=args.hard_negatives,
        temperature=args.loss_temperature,
        max_seq_length=args.max_seq_length,
        save_steps=args.save_steps,
        seed=args.seed,
        device=args.device,
        precision=args.precision,
    )
    data_dir = None if args.train_file is not None else (args.data_dir or default_data_dir())
    result = tune_positions(
        args.model,
        args.method,
        args.max_length,
        args.output,
        data_dir=data_dir,
        train_file=args.train_file,
        sources=tuple(args.sources),
        config=config,
        max_pairs=args.max_pairs,
        overwrite=args.overwrite,
        objective=args.objective,
        distill_weight=args.distill_weight,
    )
    s = result.summary
    print(json.dumps({"output": str(result.folder), "steps": s.steps, "seconds": s.seconds,
                      "examples_per_second": s.examples_per_second, "final_loss": s.final_loss}, indent=2))
    return 0
