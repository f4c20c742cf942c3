"""The Ray engine: a Ray Data pipeline of shards through a fixed pool of encoder actors.

The dataset has one row per shard to embed (its path, name and output file), one block per row, so
the shards spread over the actors.  ``map_batches`` runs :class:`~longembed.corpus.job.ShardEmbedder`
as a pool of ``actors`` actors (``ActorPoolStrategy``), each reserving ``cpus_per_actor`` CPUs (and
``gpus_per_actor`` GPUs: one actor per device) and building its encoder once.  Each actor reads its
shard, embeds it and writes the parquet file itself, so vectors never travel through the driver; the
driver only collects one small report row per shard, as the shards finish.  A shard is the unit of
work because it is the unit of resuming: its output is whole or absent.

Where it runs: a Ray already initialised in this process; else the cluster at ``address`` (or
``$RAY_ADDRESS``); else a local Ray started here with just the CPUs the actors reserve and no
dashboard.  On a cluster, every node needs longembed installed and the input and output folders
mounted at the same paths.

ray is the ``ray`` extra: without it this module imports, and running raises an ImportError that
says what to install.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from longembed.corpus.arrow import INSTALL_HINT
from longembed.corpus.job import LOAD_ERROR, EmbedJob, ShardEmbedder, ShardReport
from longembed.corpus.shards import Shard
from longembed.errors import MissingExtraError, UserError

try:  # the ``ray`` extra; ray.data is loaded by ray on first use
    import ray

    RAY_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    RAY_IMPORT_ERROR = exc
    ray = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)


@dataclass
class RaySettings:
    """The actor pool and where it runs (``address`` None: ``$RAY_ADDRESS``, else a local Ray)."""

    actors: int = 1
    cpus_per_actor: float = 1.0
    gpus_per_actor: float = 0.0
    address: str | None = None

    def __post_init__(self) -> None:
        if self.actors < 1:
            raise UserError(f"--actors must be at least 1, got {self.actors}")
        if self.cpus_per_actor <= 0 or self.gpus_per_actor < 0:
            raise UserError("--cpus-per-actor must be positive and --gpus-per-actor not negative")

    @property
    def torch_threads(self) -> int:
        """Threads each actor's torch uses: its whole CPUs (at least one)."""
        return max(1, math.floor(self.cpus_per_actor))


def require_ray() -> None:
    """Raise a clear ImportError when ray (the ``ray`` extra) is missing."""
    if RAY_IMPORT_ERROR is not None:
        raise MissingExtraError(f"--engine ray needs ray[data] ({RAY_IMPORT_ERROR}): {INSTALL_HINT}")


def connect(settings: RaySettings) -> bool:
    """Make sure this process is connected to Ray; True when it started Ray (and should shut it down)."""
    require_ray()
    if ray.is_initialized():
        return False
    address = settings.address or os.environ.get("RAY_ADDRESS")
    if address:
        logger.info("connecting to the Ray cluster at %s", address)
        ray.init(address=address, logging_level=logging.WARNING)
        return True
    cpus = math.ceil(settings.actors * settings.cpus_per_actor)
    if cpus > (os.cpu_count() or 1):
        warnings.warn(f"{settings.actors} actors x {settings.cpus_per_actor} CPUs reserve {cpus} CPUs; this "
                      f"machine has {os.cpu_count()}, so the actors share cores", stacklevel=2)
    logger.info("starting a local Ray with %d CPU(s)", cpus)
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)  # GPUs: as Ray detects them
    return True


def disconnect() -> None:
    """Shut down the Ray that :func:`connect` started."""
    ray.shutdown()


def check_resources(settings: RaySettings) -> None:
    """Refuse a pool the Ray cluster cannot hold (it would wait forever), unless an autoscaler may add nodes."""
    total = ray.cluster_resources()
    needs = {"CPU": settings.actors * settings.cpus_per_actor, "GPU": settings.actors * settings.gpus_per_actor}
    short = [f"{need:g} {name} (the cluster has {total.get(name, 0):g})"
             for name, need in needs.items() if need > total.get(name, 0) + 1e-9]
    if short:
        message = f"{settings.actors} actor(s) need {' and '.join(short)}; use fewer --actors or --cpus-per-actor"
        if settings.address or os.environ.get("RAY_ADDRESS"):
            warnings.warn(message + " (waiting for the cluster to grow)", stacklevel=2)
        else:
            raise UserError(message)


def embed_shards_on_ray(
    tasks: Sequence[tuple[Shard, Path]],
    job: EmbedJob,
    settings: RaySettings,
    on_report: Callable[[ShardReport], None],
) -> list[ShardReport]:
    """Embed each (shard, output file) of ``tasks`` on a pool of Ray actors; ``on_report`` sees each
    report as its shard finishes (in finishing order)."""
    require_ray()
    if not tasks:
        return []
    check_resources(settings)
    rows = [{"path": str(shard.path), "name": shard.name, "output": str(out)} for shard, out in tasks]
    actor_job = replace(job, torch_threads=settings.torch_threads)
    context = ray.data.DataContext.get_current()
    progress_bars = context.enable_progress_bars
    context.enable_progress_bars = False  # one line per shard instead (on_report)
    try:
        dataset = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            ShardEmbedder,
            fn_constructor_kwargs={"job": actor_job, "report_load_errors": True},
            batch_size=1,
            batch_format="numpy",
            # a task is a whole shard: queueing a second one on a busy actor would only unbalance the pool
            compute=ray.data.ActorPoolStrategy(size=settings.actors, max_tasks_in_flight_per_actor=1),
            num_cpus=settings.cpus_per_actor,
            **({"num_gpus": settings.gpus_per_actor} if settings.gpus_per_actor else {}),
        )
        reports = []
        for row in dataset.iter_rows():
            report = ShardReport.from_row(row)
            if not report.error.startswith(LOAD_ERROR):
                on_report(report)
            reports.append(report)
    finally:
        context.enable_progress_bars = progress_bars
    load_errors = sorted({r.error for r in reports if r.error.startswith(LOAD_ERROR)})
    if load_errors:  # the model or its options are wrong: one error, not one per shard
        raise UserError(f"on the Ray actors: {load_errors[0]}")
    return reports
