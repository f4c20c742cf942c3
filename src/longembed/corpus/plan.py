"""Which shards a run must embed: every shard whose output is not already there, complete and current.

Resuming is the same as running: a shard counts as done when its output file reads back with the
recorded number of rows, was made from the same shard bytes (size, then sha256), and with the same
configuration.  A damaged output or a changed shard is embedded again (and said so); an output made
with another configuration is an error, because mixing two models' vectors in one folder is never what
anyone wants.  An id found in two shards is an error naming both (:mod:`~longembed.corpus.unique_ids`).

An output whose shard is no longer in the input (deleted or renamed since it was written) is reported
and left in place (``CorpusPlan.stray``), never deleted: the input may be one file of a larger corpus
written to the same folder, and vectors are not thrown away on a guess.  Reading the folder reads it
too, so the report says to delete it when its shard is gone for good.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from longembed.corpus.job import EmbedJob
from longembed.corpus.shards import Shard, find_shards
from longembed.corpus.unique_ids import check_unique_ids
from longembed.corpus.writer import output_file, read_written, stray_outputs
from longembed.errors import UserError, UserFileError
from longembed.results.files import unwritable_folder

logger = logging.getLogger(__name__)


@dataclass
class CorpusPlan:
    """The shards of an input, split into those to embed (``pending``) and those already done."""

    input: Path
    output: Path
    pending: list[tuple[Shard, Path]] = field(default_factory=list)
    done: list[tuple[Shard, Path]] = field(default_factory=list)
    redo: list[str] = field(default_factory=list)  # why an existing output is embedded again
    stray: list[Path] = field(default_factory=list)  # outputs of shards no longer in the input, left in place

    @property
    def n_shards(self) -> int:
        return len(self.pending) + len(self.done)

    def stray_note(self) -> str:
        """What the run says about :attr:`stray` outputs ("" when there are none)."""
        if not self.stray:
            return ""
        names = ", ".join(str(p.relative_to(self.output)) for p in self.stray[:5])
        more = f" and {len(self.stray) - 5} more" if len(self.stray) > 5 else ""
        return (
            f"{len(self.stray)} file(s) in {self.output} have no shard in {self.input} (deleted or renamed since "
            f"they were written): {names}{more}; left in place, and read with the rest of the folder: delete "
            "them if their shards are gone for good"
        )


def check_output_folder(input_path: Path, output: Path) -> Path:
    """``output`` as a folder to write vectors in: not a file, not a .npy name, not the input folder
    or inside it (its files would be read as shards on the next run), and one that takes new files
    (checked now, not after the first shard is encoded)."""
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise UserError(f"-o {output} is a file; a corpus is written to a folder of .parquet files")
    if output.suffix == ".npy":
        raise UserError(f"-o {output}: a corpus is written to a folder of .parquet files, not a .npy file")
    source = Path(input_path).resolve()
    target = output.resolve()
    if source.is_dir() and (target == source or source in target.parents):
        raise UserError(f"-o {output} is inside the input folder {input_path}; write the vectors elsewhere")
    problem = unwritable_folder(output)
    if problem:
        raise UserFileError(f"cannot write to -o {output}: {problem}")
    return output


def plan_corpus(input_path: Path, output: Path, job: EmbedJob) -> CorpusPlan:
    """Find the shards of ``input_path`` and decide, from the files in ``output``, which to embed.

    Errors before any work: a bad input or output folder, an output made with another configuration,
    an id in two shards."""
    output = check_output_folder(input_path, output)
    plan = CorpusPlan(Path(input_path), output)
    job.fingerprint()  # the options checked before any file is read
    shards = find_shards(input_path)
    configs = {kind: job.fingerprint(kind) for kind in {s.kind for s in shards}}
    targets: dict[Path, str] = {}
    for shard in shards:
        target = output_file(output, shard)
        if target in targets:
            raise UserError(f"shards {targets[target]} and {shard.name} would both be written to {target}")
        targets[target] = shard.name
        reason = _redo_reason(shard, target, configs[shard.kind])
        if reason is None:
            plan.done.append((shard, target))
        else:
            plan.pending.append((shard, target))
            if reason:
                plan.redo.append(f"{target}: {reason}")
    if plan.n_shards > 1:
        check_unique_ids([s for s, _ in plan.pending], plan.done, job.text_field, job.id_field, job.unit)
    plan.stray = stray_outputs(output, targets)
    for note in plan.redo:
        logger.warning("embedding again: %s", note)
    if plan.stray:
        logger.warning("%s", plan.stray_note())
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
        raise UserError(
            f"{target} holds vectors made with another configuration (different {', '.join(changed)}); "
            "write to a new -o folder, or delete the old one"
        )
    if written.rows != written.documents:
        return f"it holds {written.rows} rows of {written.documents} documents"
    if written.source_bytes != shard.size():
        return f"the shard changed ({written.source_bytes} -> {shard.size()} bytes)"
    if written.source_sha256 is None:
        return "it records no hash of its shard's content (written by an older longembed), so it may be stale"
    if written.source_sha256 != shard.sha256():
        return "the shard changed (same size, different content: its sha256 differs)"
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
