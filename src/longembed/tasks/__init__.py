"""The LongEmbed tasks and their offline stand-ins.

==============  ===========  ===============================================================
name            main score   data
==============  ===========  ===============================================================
passkey         accuracy@1   generated (8 lengths, 50 queries x 100 documents, or N x 2N)
needle          accuracy@1   Paul Graham essays + packaged needles (8 lengths)
qmsum           ndcg@10      QMSum train+val (exactly LongEmbed's)
qmsum_passages  ndcg@10      QMSum specific queries -> answering passages of their meeting
squality        ndcg@10      SQuALITY: stand-in for SummScreenFD
hotpotqa        ndcg@10      HotpotQA dev distractor: stand-in for 2WikiMultihopQA
narrativeqa     ndcg@10      LongEmbed hub layout only
summscreenfd    ndcg@10      LongEmbed hub layout only
2wikimqa        ndcg@10      LongEmbed hub layout only
==============  ===========  ===============================================================

Your own retrieval data (BEIR's corpus/queries/qrels layout) is a task too: ``TaskDirTask(folder)``
(:mod:`longembed.tasks.task_dir`, ``longembed eval --task-dir``); ``write_task_dir`` writes any task's
data in that layout.

``DEFAULT_TASKS`` are the six that can run offline with ``../shared/data``. Every LongEmbed task
(passkey, needle, qmsum, narrativeqa, summscreenfd, 2wikimqa) can also be read from the hub layout:
``get_task("passkey", source="hub")``.

Each task's module declares it (its ``TaskMetadata``: name, title, kind, hub config) and registers it
(:mod:`longembed.tasks.registry`); importing this package imports every module in it, so a new task is
one new module here.
"""

from __future__ import annotations

import importlib
import pkgutil

from longembed.tasks.base import (
    SYNTHETIC_LENGTHS,
    Blocks,
    Passage,
    RetrievalData,
    Task,
    TaskDataMissing,
    TaskMetadata,
    word_budget,
)
from longembed.tasks.hf_hub import HubTask
from longembed.tasks.registry import (
    HUB_CONFIGS,
    TASKS,
    get_task,
    register_task,
    task_metadata,
    unregister_task,
)
from longembed.tasks.task_dir import TaskDirTask, write_task_dir

# Every module of this package that declares a task registers it when imported.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

#: The tasks a default run evaluates: the six that run offline (two stand-ins included).
DEFAULT_TASKS: tuple[str, ...] = ("passkey", "needle", "qmsum", "squality", "hotpotqa", "narrativeqa")

__all__ = [
    "DEFAULT_TASKS",
    "HUB_CONFIGS",
    "SYNTHETIC_LENGTHS",
    "TASKS",
    "Blocks",
    "HubTask",
    "Passage",
    "RetrievalData",
    "Task",
    "TaskDataMissing",
    "TaskDirTask",
    "TaskMetadata",
    "get_task",
    "register_task",
    "task_metadata",
    "unregister_task",
    "word_budget",
    "write_task_dir",
]
