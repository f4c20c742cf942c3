"""Carry cached vectors across a code change that kept every vector bit for bit.

The embedding cache keys its namespaces on the hash of longembed's vector code
(:func:`longembed.evaluation.provenance.code_fingerprint`), so any edit of the encoder, even one that
only adds a method, makes every cached vector unreachable, and hours of encoding are redone.  When
``benchmarks/golden_vectors.py --compare`` shows the old and the new code give the same bits on every
method, this script links each namespace written under the old code hash into the namespace the
current code computes (hard links: no copy; the old namespace stays as it was).

    python benchmarks/golden_vectors.py --models-dir /work/models --save /tmp/golden-old.npz  # old commit
    python benchmarks/golden_vectors.py --models-dir /work/models --compare /tmp/golden-old.npz  # new: exit 0
    python benchmarks/carry_cache.py --from-code <old longembed_code_sha256> [--cache-dir DIR] [--dry-run] [--merge]

A new namespace that exists already (a run under the new code started encoding before the carry) is
left alone, unless ``--merge``: then the old namespace's parts it lacks are linked into it.  Parts are
named by the hash of their content, so a part of the same name is the same part, and a shard reads all
its parts as one (a text in two parts has the same vector in both: the code gives the same bits).

The old hash is in any results.json written by the old code (``versions.longembed_code_sha256``) and in
each namespace's ``fingerprint.json`` (``code``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from longembed.evaluation.cache.storage import fingerprint_key
from longembed.evaluation.provenance import code_fingerprint

DEFAULT_CACHE = Path("~/.cache/longembed/embeddings").expanduser()


def carry(cache_dir: Path, old_code: str, new_code: str, dry_run: bool, merge: bool = False) -> list[tuple[str, str]]:
    """(old namespace, new namespace) for every namespace written under ``old_code``; linked unless
    ``dry_run``.  A namespace whose new name exists already is left alone (never overwritten), or with
    ``merge`` given the old parts it lacks (:func:`merge_parts`)."""
    carried = []
    for fingerprint_file in sorted(cache_dir.glob("*/fingerprint.json")):
        fingerprint = json.loads(fingerprint_file.read_text())
        if fingerprint.get("code") != old_code:
            continue
        new_fingerprint = {**fingerprint, "code": new_code}
        source, target = fingerprint_file.parent, cache_dir / fingerprint_key(new_fingerprint)
        if target.exists():
            if not merge:
                print(f"{source.name}: {target.name} exists already, left alone (--merge adds the parts it lacks)")
                continue
            missing = merge_parts(source, target, dry_run)
            print(f"{source.name}: {target.name} exists already; {len(missing)} part(s) it lacks "
                  f"{'would be ' if dry_run else ''}linked in")
            if missing:
                carried.append((source.name, target.name))
            continue
        carried.append((source.name, target.name))
        if not dry_run:
            link_tree(source, target)
            (target / "fingerprint.json").unlink()
            (target / "fingerprint.json").write_text(json.dumps(new_fingerprint, indent=2, sort_keys=True, default=str) + "\n")
    return carried


def merge_parts(source: Path, target: Path, dry_run: bool) -> list[Path]:
    """The parts (``part-*.npz``, by shard folder and name) of ``source`` that ``target`` lacks, linked
    into the same shard folders of ``target`` unless ``dry_run``."""
    missing = [part.relative_to(source) for part in sorted(source.rglob("part-*.npz"))
               if not (target / part.relative_to(source)).exists()]
    for relative in [] if dry_run else missing:
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        link_file(source / relative, target / relative)
    return missing


def link_file(source: Path, destination: Path) -> None:
    """``destination`` as a hard link to ``source`` (a copy where links fail)."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def link_tree(source: Path, target: Path) -> None:
    """``target`` as a copy of ``source`` whose files are hard links (a copy where links fail)."""
    for folder, _subfolders, files in os.walk(source):
        destination = target / Path(folder).relative_to(source)
        destination.mkdir(parents=True, exist_ok=True)
        for name in files:
            link_file(Path(folder) / name, destination / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-code", required=True, help="the old code hash (longembed_code_sha256)")
    parser.add_argument("--cache-dir", type=Path, default=Path(os.environ.get("LONGEMBED_CACHE_DIR", DEFAULT_CACHE)))
    parser.add_argument("--dry-run", action="store_true", help="say what would be carried, link nothing")
    parser.add_argument("--merge", action="store_true",
                        help="into a new namespace that exists already, link the old parts it lacks")
    args = parser.parse_args()
    new_code = code_fingerprint()
    if new_code == args.from_code:
        raise SystemExit("the current code has that hash already: nothing to carry")
    carried = carry(args.cache_dir.expanduser(), args.from_code, new_code, args.dry_run, args.merge)
    for old, new in carried:
        print(f"{'would carry' if args.dry_run else 'carried'} {old} -> {new}")
    print(f"{len(carried)} namespace(s) from code {args.from_code[:12]} to {new_code[:12]}")


if __name__ == "__main__":
    main()
