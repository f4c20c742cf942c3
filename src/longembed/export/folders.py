"""Where an export may be written, and writing it so that a failure never loses what was there.

An export is written into a staging folder beside its destination and moved into place only once it
is complete: a failed or refused export leaves the previous folder as it was, and ``--overwrite``
replaces a folder in two renames.  A destination that holds the source model, or lies inside it, or
is not a model folder at all, is refused before anything is written or deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from longembed.durable import durable_replace_folder
from longembed.errors import OutputExistsError, UserError
from longembed.permissions import NEW_FOLDER_MODE, creation_mode, weights_follow_umask
from longembed.sentence_transformers_folder import MODULES_FILE

#: Files that make a folder a model folder (one ``--overwrite`` may replace).
MODEL_FOLDER_MARKERS = (MODULES_FILE, "config.json")


def check_destination(output: Path, protected: list[Path], overwrite: bool) -> None:
    """Refuse ``output`` when writing there could destroy the source model or an unrelated folder.

    ``protected`` are the source model's folders: the destination may be none of them, contain none
    of them, and lie inside none of them.  An existing non-empty destination needs ``overwrite`` and
    must itself be a model folder.
    """
    refuse_overlap(output, protected)
    if output.is_file():
        raise OutputExistsError(f"--output {output} is a file; give a folder")
    if output.is_dir() and any(output.iterdir()):
        if not overwrite:
            raise OutputExistsError(f"{output} exists and is not empty; pass overwrite=True (--overwrite) to replace it")
        if not any((output / marker).is_file() for marker in MODEL_FOLDER_MARKERS):
            raise UserError(
                f"{output} is not a model folder (no {' or '.join(MODEL_FOLDER_MARKERS)}); --overwrite replaces "
                "only a previous export: remove the folder yourself or choose another --output"
            )


def refuse_overlap(output: Path, protected: list[Path]) -> None:
    """A ValueError when ``output`` is, holds, or lies inside one of the ``protected`` model folders
    (replacing or writing into it would destroy the model the command reads)."""
    target = output.resolve()
    for folder in (p.resolve() for p in protected):
        if target == folder or target in folder.parents:
            raise UserError(f"--output {output} holds the source model {folder}; choose a folder outside it")
        if folder in target.parents:
            raise UserError(f"--output {output} is inside the source model {folder}; choose a folder outside it")


@contextlib.contextmanager
def staged_folder(output: Path) -> Iterator[Path]:
    """Yield an empty staging folder beside ``output``; on success it replaces ``output`` (the old
    folder is removed only after the new one is in place), on any error it is removed and ``output``
    is untouched.  The rename is durable (:func:`longembed.durable.durable_replace_folder`: the files are
    fsynced before it, the new name after it), so a power loss cannot leave a half-written folder under
    ``output``'s name.  The folder gets the permissions ordinary ``mkdir`` gives under the umask, and its weight
    files those ``open()`` gives (safetensors writes them owner-only)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.staging-", dir=output.parent))
    try:
        staging.chmod(creation_mode(NEW_FOLDER_MODE))
        yield staging
        weights_follow_umask(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    previous = None
    if output.exists():
        previous = Path(tempfile.mkdtemp(prefix=f".{output.name}.previous-", dir=output.parent))
        os.replace(output, previous / output.name)
    try:
        durable_replace_folder(staging, output)  # flushed before and after: a crash leaves all of it or none
    except BaseException:  # put the old folder back where it was
        if previous is not None:
            os.replace(previous / output.name, output)
            previous.rmdir()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
