"""``longembed embed`` on a corpus: a folder of shards, a .parquet file, or any input with ``--engine ray``.

Writes one ``OUT/<shard>.parquet`` (id, vector, truncated) per shard, in-process (``--engine local``)
or on a pool of Ray actors (``--engine ray --actors N``), and resumes: a rerun embeds only the shards
whose output is missing.  A single .txt or .jsonl file with the local engine keeps the plain
``OUT.npy`` behaviour of :mod:`longembed.cli.embed`.
"""

from __future__ import annotations

import argparse

from longembed.cli.options import encoder_options
from longembed.corpus import CorpusResult, EmbedJob, RaySettings, embed_corpus
from longembed.errors import UserError

RAY_FLAGS = {"actors": "--actors", "cpus_per_actor": "--cpus-per-actor", "gpus_per_actor": "--gpus-per-actor",
             "ray_address": "--ray-address"}




def is_corpus_run(args: argparse.Namespace) -> bool:
    """A folder, a .parquet file, or the Ray engine: parquet files out; else the single-file .npy path."""
    return args.engine == "ray" or args.input.is_dir() or args.input.suffix.lower() == ".parquet"


def run_corpus(args: argparse.Namespace) -> int:
    """Embed the shards of ``args.input`` into the folder ``args.output``; print a summary."""
    settings = _ray_settings(args)
    job = EmbedJob(
        model=args.model,
        method=args.method,
        max_length=args.max_length,
        options=encoder_options(args),
        device=args.device,
        batch_size=args.batch_size,
        prompt=args.prompt,
        prompt_name=args.prompt_name,
        normalize=False if args.no_normalize else None,
        text_field=args.field,
        id_field=args.id_field,
        unit=args.unit,
    )
    result = embed_corpus(args.input, args.output, job, engine=args.engine, ray=settings)
    _print_summary(args, settings, result)
    if result.failed:
        lines = "\n".join(f"  {r.shard}: {r.error}" for r in result.failed)
        raise UserError(
            f"{len(result.failed)} of {len(result.reports)} shard(s) failed and were not written; the others "
            f"were. Fix these and rerun: only they will be embedded.\n{lines}"
        )
    return 0


def reject_ray_flags(args: argparse.Namespace) -> None:
    """A ValueError when a Ray flag is given without ``--engine ray`` (it would silently do nothing)."""
    given = [flag for name, flag in RAY_FLAGS.items() if getattr(args, name) is not None]
    if args.engine != "ray" and given:
        raise UserError(f"{', '.join(given)} only apply with --engine ray")


def _ray_settings(args: argparse.Namespace) -> RaySettings | None:
    reject_ray_flags(args)
    if args.engine != "ray":
        return None
    return RaySettings(
        actors=1 if args.actors is None else args.actors,
        cpus_per_actor=1.0 if args.cpus_per_actor is None else args.cpus_per_actor,
        gpus_per_actor=0.0 if args.gpus_per_actor is None else args.gpus_per_actor,
        address=args.ray_address,
    )


def _print_summary(args: argparse.Namespace, settings: RaySettings | None, result: CorpusResult) -> None:
    plan = result.plan
    engine = "local" if settings is None else (
        f"ray, {settings.actors} actor(s) x {settings.cpus_per_actor:g} CPU"
        + (f" + {settings.gpus_per_actor:g} GPU" if settings.gpus_per_actor else "")
    )
    done = f"; {len(plan.done)} shard(s) already done, skipped" if plan.done else ""
    if not plan.pending:
        print(f"nothing to embed: all {plan.n_shards} shard(s) of {plan.input} are already in {plan.output}")
        return
    rate = result.documents / result.seconds if result.seconds else 0.0
    print(
        f"embedded {result.documents} documents from {len(result.embedded)} shard(s) -> {plan.output} "
        f"in {result.seconds:.1f}s ({rate:.1f} docs/s; engine {engine}){done}"
    )
    if result.truncated:
        limit = args.max_length if args.max_length is not None else "(the model's)"
        print(
            f"truncated: {result.truncated} document(s) exceeded --max-length {limit} tokens (column "
            "'truncated' marks them); raise --max-length or use --on-overflow error"
        )
    else:
        print("truncated: none")
