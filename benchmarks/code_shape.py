"""The shape of the code, for architecture issues: the largest functions in src, and which modules
one ``evaluate_model`` run enters (and how often), with their sizes.

    python benchmarks/code_shape.py                 # largest functions, modules entered by a passkey run
    python benchmarks/code_shape.py --functions 25

"Entries" count calls into a module's functions from another module (``sys.setprofile``), on the
packaged all-MiniLM-L6-v2 + PI to 1024 over passkey at 256 and 1024 tokens (a fresh cache, so every
text is encoded).  Sizes are lines, docstrings included.  Issue 24's before/after numbers came from
this script's two parts (then kept in /tmp), run on 9ebbcc4 and on the merged tree.
"""

from __future__ import annotations

import argparse
import ast
import collections
import sys
import tempfile
from pathlib import Path

import longembed
from longembed import load_encoder
from longembed.evaluation import evaluate_model

SRC = Path(longembed.__file__).resolve().parent


def largest_functions(count: int) -> list[tuple[int, str]]:
    """(lines, "module:line name") of the ``count`` longest functions, longest first."""
    rows = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                rows.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(SRC)}:{node.lineno} {node.name}"))
    return sorted(rows, reverse=True)[:count]


def modules_entered() -> collections.Counter:
    """Module (relative to the package) -> calls into it from other modules during one run."""
    encoder = load_encoder("default", method="pi", max_length=1024)
    entries: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event == "call" and str(SRC) in frame.f_code.co_filename:
            caller = frame.f_back.f_code.co_filename if frame.f_back else ""
            if caller != frame.f_code.co_filename:
                entries[str(Path(frame.f_code.co_filename).relative_to(SRC))] += 1

    with tempfile.TemporaryDirectory() as folder:
        sys.setprofile(profile)
        try:
            evaluate_model(encoder, ["passkey"], lengths=[256, 1024], output_dir=folder,
                           cache_dir=f"{folder}/cache", show_progress=False, log=None)
        finally:
            sys.setprofile(None)
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--functions", type=int, default=20, help="how many of the largest functions to list")
    args = parser.parse_args()
    rows = largest_functions(10**6)
    for lines, name in rows[: args.functions]:
        print(f"{lines:5d}  {name}")
    print(f"functions over 80 lines: {sum(1 for lines, _ in rows if lines > 80)}")
    entries = modules_entered()
    print(f"\nevaluate_model entered {len(entries)} modules:")
    for module, n in entries.most_common():
        print(f"{n:6d} entries  {len((SRC / module).read_text().splitlines()):4d} lines  {module}")


if __name__ == "__main__":
    main()
