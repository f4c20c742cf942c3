"""``longembed task-dir --docs DIR --questions FILE --out DIR``: a task folder from a user's documents and
questions (:func:`longembed.tasks.task_dir_builder.build_task_dir`), and the commands that use it."""

from __future__ import annotations

import argparse
import shlex

from longembed.tasks.task_dir_builder import DEFAULT_GLOBS, build_task_dir


def run(args: argparse.Namespace) -> int:
    """Build the folder and print what it holds and how to evaluate on it; every problem of the input
    is raised at once (a ValueError: exit 2, nothing written)."""
    built = build_task_dir(args.docs, args.questions, args.out, globs=args.globs or DEFAULT_GLOBS,
                           overwrite=args.overwrite, judged=args.merge_judged or ())
    folder = shlex.quote(str(built.path))
    print(f"wrote {built.describe()}")
    print("next:")
    print(f"  longembed eval --task-dir {folder} --model default --output runs/{built.path.name}")
    print(f"  longembed advise --task-dir {folder} --model default --output advice/{built.path.name}")
    return 0
