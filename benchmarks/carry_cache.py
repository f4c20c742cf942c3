"""Carry cached vectors across a code change that kept every vector bit for bit.

The embedding cache keys its namespaces on the hash of longembed's vector code
(:func:`longembed.evaluation.provenance.code_fingerprint`), so any edit of the encoder, even one that
only adds a method, makes every cached vector unreachable, and hours of encoding are redone.  When
``benchmarks/golden_vectors.py --compare`` shows the old and the new code give the same bits on every
method, this script links each namespace written under the old code hash into the namespace the
current code computes (hard links: no copy; the old namespace stays as it was).

    python benchmarks/golden_vectors.py --models-dir /work/models --save /tmp/golden-old.npz  # old commit
    python benchmarks/golden_vectors.py --models-dir /work/models --compare /tmp/golden-old.npz  # new: exit 0
    python benchmarks/carry_cache.py --from-code <old longembed_code_sha256> [--cache-dir DIR] [--dry-run]

The old hash is in any results.json written by the old code (``versions.longembed_code_sha256``) and in
each namespace's ``fingerprint.json`` (``code``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from longembed.evaluation.cache import fingerprint_key
from longembed.evaluation.provenance import code_fingerprint

DEFAULT_CACHE = Path("~/.cache/longembed/embeddings").expanduser()


def carry(cache_dir: Path, old_code: str, new_code: str, dry_run: bool) -> list[tuple[str, str]]:
    """(old namespace, new namespace) for every namespace written under ``old_code``; linked unless
    ``dry_run``.  A namespace whose new name exists already is left alone (never overwritten)."""
    carried = []
    for fingerprint_file in sorted(cache_dir.glob("*/fingerprint.json")):
        fingerprint = json.loads(fingerprint_file.read_text())
        if fingerprint.get("code") != old_code:
            continue
        new_fingerprint = {**fingerprint, "code": new_code}
        source, target = fingerprint_file.parent, cache_dir / fingerprint_key(new_fingerprint)
        if target.exists():
            print(f"{source.name}: {target.name} exists already, left alone")
            continue
        carried.append((source.name, target.name))
        if not dry_run:
            link_tree(source, target)
            (target / "fingerprint.json").unlink()
            (target / "fingerprint.json").write_text(json.dumps(new_fingerprint, indent=2, sort_keys=True, default=str) + "\n")
    return carried


def link_tree(source: Path, target: Path) -> None:
    """``target`` as a copy of ``source`` whose files are hard links (a copy where links fail)."""
    for folder, _subfolders, files in os.walk(source):
        destination = target / Path(folder).relative_to(source)
        destination.mkdir(parents=True, exist_ok=True)
        for name in files:
            try:
                os.link(Path(folder) / name, destination / name)
            except OSError:
                shutil.copy2(Path(folder) / name, destination / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-code", required=True, help="the old code hash (longembed_code_sha256)")
    parser.add_argument("--cache-dir", type=Path, default=Path(os.environ.get("LONGEMBED_CACHE_DIR", DEFAULT_CACHE)))
    parser.add_argument("--dry-run", action="store_true", help="say what would be carried, link nothing")
    args = parser.parse_args()
    new_code = code_fingerprint()
    if new_code == args.from_code:
        raise SystemExit("the current code has that hash already: nothing to carry")
    carried = carry(args.cache_dir.expanduser(), args.from_code, new_code, args.dry_run)
    for old, new in carried:
        print(f"{'would carry' if args.dry_run else 'carried'} {old} -> {new}")
    print(f"{len(carried)} namespace(s) from code {args.from_code[:12]} to {new_code[:12]}")


if __name__ == "__main__":
    main()
