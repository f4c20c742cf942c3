"""Which shards a run must embed: every shard whose output is not already there, complete and current.

Resuming is the same as running: a shard counts as done when its output file reads back with the
recorded number of rows, was made from a shard of the same size, and with the same configuration.
A damaged output or a changed shard is embedded again (and said so); an output made with another
configuration is an error, because mixing two models' vectors in one folder is never what anyone wants.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from longembed.corpus.job import EmbedJob
from longembed.corpus.shards import Shard, find_shards
from longembed.corpus.writer import output_file, read_written

logger = logging.getLogger(__name__)


@dataclass
class CorpusPlan:
    """The shards of an input, split into those to embed (``pending``) and those already done."""

    input: Path
    output: Path
    pending: list[tuple[Shard, Path]] = field(default_factory=list)
    done: list[tuple[Shard, Path]] = field(default_factory=list)
    redo: list[str] = field(default_factory=list)  # why an existing output is embedded again

    @property
    def n_shards(self) -> int:
        return len(self.pending) + len(self.done)


def check_output_folder(input_path: Path, output: Path) -> Path:
    """``output`` as a folder to write vectors in: not a file, not a .npy name, not the input folder
    or inside it (its files would be read as shards on the next run)."""
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise ValueError(f"-o {output} is a file; a corpus is written to a folder of .parquet files")
    if output.suffix == ".npy":
        raise ValueError(f"-o {output}: a corpus is written to a folder of .parquet files, not a .npy file")
    source = Path(input_path).resolve()
    target = output.resolve()
    if source.is_dir() and (target == source or source in target.parents):
        raise ValueError(f"-o {output} is inside the input folder {input_path}; write the vectors elsewhere")
    return output


def plan_corpus(input_path: Path, output: Path, job: EmbedJob) -> CorpusPlan:
    """Find the shards of ``input_path`` and decide, from the files in ``output``, which to embed."""
    output = check_output_folder(input_path, output)
    plan = CorpusPlan(Path(input_path), output)
    config = job.fingerprint()
    targets: dict[Path, str] = {}
    for shard in find_shards(input_path):
        target = output_file(output, shard)
        if target in targets:
            raise ValueError(f"shards {targets[target]} and {shard.name} would both be written to {target}")
        targets[target] = shard.name
        reason = _redo_reason(shard, target, config)
        if reason is None:
            plan.done.append((shard, target))
        else:
            plan.pending.append((shard, target))
            if reason:
                plan.redo.append(f"{target}: {reason}")
    for note in plan.redo:
        logger.warning("embedding again: %s", note)
    return plan


def _redo_reason(shard: Shard, target: Path, config: dict) -> str | None:
    """None when ``target`` is a complete, current output of ``shard``; "" when there is none yet;
    otherwise why it must be embedded again."""
    if not target.exists():
        return ""
    written = read_written(target)
    if written is None:
        return "the file cannot be read back (damaged)"
    if written.config != config:
        changed = differences(config, written.config)
        raise ValueError(
            f"{target} holds vectors made with another configuration (different {', '.join(changed)}); "
            "write to a new -o folder, or delete the old one"
        )
    if written.rows != written.documents:
        return f"it holds {written.rows} rows of {written.documents} documents"
    if written.source_bytes != shard.size():
        return f"the shard changed ({written.source_bytes} -> {shard.size()} bytes)"
    return None


def differences(new: dict, old: dict) -> list[str]:
    """The keys whose values differ between two fingerprints, nested keys as their last name
    (``{"encoder": {"method": ...}}`` -> ``method``)."""
    found = []
    for key in sorted(set(new) | set(old)):
        a, b = new.get(key), old.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += differences(a, b)
        elif a != b:
            found.append(key)
    return found
