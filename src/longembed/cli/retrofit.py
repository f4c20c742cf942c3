"""``longembed retrofit``: a BERT made natively long, by ALiBi in place of its position table and distillation.

    longembed retrofit --model PATH/all-MiniLM-L6-v2 --positions alibi --output minilm-alibi \\
        --data-dir ../shared/data [--max-steps N --batch-size B --max-seq-length L --learning-rate LR \\
        --token-weight W --device D --precision bf16] [--pairs [--pairs-file F --pairs-weight W]] [--resume]

Writes a JinaBERT folder (``load_encoder(DIR, method="native")``, ``SentenceTransformer(DIR)``).  A killed
run continues with the same command and ``--resume``.
"""

from __future__ import annotations

import argparse
import json

from longembed.cli.options import existing_folder
from longembed.evaluation.runner import default_data_dir
from longembed.training.retrofit import RECORD_FILE, retrofit_alibi


def run(args: argparse.Namespace) -> int:
    """Run the retrofit and print what it did."""
    use_pairs = args.pairs or args.pairs_file is not None
    data_dir = None
    if args.text_file is None or (use_pairs and args.pairs_file is None):
        data_dir = existing_folder(args.data_dir if args.data_dir is not None else default_data_dir(), "--data-dir")
    result = retrofit_alibi(
        args.model,
        args.output,
        data_dir=data_dir,
        text_file=args.text_file,
        pairs_file=args.pairs_file,
        positions=args.positions,
        cache_dir=args.cache_dir,
        resume=args.resume,
        overwrite=args.overwrite,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        min_seq_length=args.min_seq_length,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        token_weight=args.token_weight,
        slope_scale=args.slope_scale,
        pairs_weight=args.pairs_weight if use_pairs else 0.0,
        pairs_batch_size=args.pairs_batch_size,
        pairs_temperature=args.pairs_temperature,
        hard_negatives=args.hard_negatives,
        held_out_articles=args.held_out_articles,
        evaluate=not args.no_evaluate,
        save_steps=args.save_steps,
        logging_steps=args.logging_steps,
        seed=args.seed,
        device=args.device,
        precision=args.precision,
    )
    s = result.summary
    print(json.dumps({"output": str(result.folder), "steps": s.steps, "seconds": s.seconds,
                      "teacher_seconds": s.teacher_seconds, "texts_per_second": s.examples_per_second,
                      "tokens_per_second": s.tokens_per_second, "final_loss": s.final_loss}, indent=2))
    if "fidelity" in result.record:
        print(json.dumps({"fidelity": result.record["fidelity"]}, indent=2))
    print(f"wrote {result.folder} ({RECORD_FILE}); open it with load_encoder({str(result.folder)!r}, method='native')")
    return 0
