"""The LongEmbed tasks and their offline stand-ins.

==============  ===========  ===============================================================
name            main score   data
==============  ===========  ===============================================================
passkey         accuracy@1   generated (8 lengths, 50 queries x 100 documents each)
needle          accuracy@1   Paul Graham essays + packaged needles (8 lengths)
qmsum           ndcg@10      QMSum train+val (exactly LongEmbed's)
qmsum_passages  ndcg@10      QMSum specific queries -> answering passages of their meeting
squality        ndcg@10      SQuALITY: stand-in for SummScreenFD
hotpotqa        ndcg@10      HotpotQA dev distractor: stand-in for 2WikiMultihopQA
narrativeqa     ndcg@10      LongEmbed hub layout only
summscreenfd    ndcg@10      LongEmbed hub layout only
2wikimqa        ndcg@10      LongEmbed hub layout only
==============  ===========  ===============================================================

``DEFAULT_TASKS`` are the six that can run offline with ``../shared/data``. Every LongEmbed task
(passkey, needle, qmsum, narrativeqa, summscreenfd, 2wikimqa) can also be read from the hub layout:
``get_task("passkey", source="hub")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from longembed.tasks import (
    hotpotqa,
    narrativeqa,
    needle,
    passkey,
    qmsum,
    qmsum_passages,
    squality,
    summscreenfd,
    wikimqa,
)
from longembed.tasks.base import (
    SYNTHETIC_LENGTHS,
    Passage,
    RetrievalData,
    Task,
    TaskDataMissing,
    TaskMetadata,
    word_budget,
)
from longembed.tasks.hub import HubTask

_FACTORIES: dict[str, Callable[..., Task]] = {
    "passkey": passkey.PasskeyTask,
    "needle": needle.NeedleTask,
    "qmsum": qmsum.QMSumTask,
    "qmsum_passages": qmsum_passages.QMSumPassagesTask,
    "squality": squality.SQuALITYTask,
    "hotpotqa": hotpotqa.HotpotQATask,
    "narrativeqa": narrativeqa.make_task,
    "summscreenfd": summscreenfd.make_task,
    "2wikimqa": wikimqa.make_task,
}

#: Hub config of every task that exists in ``dwzhu/LongEmbed`` (the stand-ins do not).
HUB_CONFIGS: dict[str, str] = {
    "passkey": "passkey",
    "needle": "needle",
    "qmsum": "qmsum",
    "narrativeqa": narrativeqa.CONFIG,
    "summscreenfd": summscreenfd.CONFIG,
    "2wikimqa": wikimqa.CONFIG,
}

_METADATA: dict[str, TaskMetadata] = {
    "passkey": passkey.METADATA,
    "needle": needle.METADATA,
    "qmsum": qmsum.METADATA,
    "narrativeqa": narrativeqa.METADATA,
    "summscreenfd": summscreenfd.METADATA,
    "2wikimqa": wikimqa.METADATA,
}

#: Every task by name, with default options.
TASKS: dict[str, Task] = {name: factory() for name, factory in _FACTORIES.items()}

#: The tasks a default run evaluates: the six that run offline (two stand-ins included).
DEFAULT_TASKS: tuple[str, ...] = ("passkey", "needle", "qmsum", "squality", "hotpotqa", "narrativeqa")


def get_task(name: str, **options: Any) -> Task:
    """The task called ``name``, built with ``options``.

    ``source="hub"`` reads a LongEmbed task from the hub layout instead of building it from the
    original data (with ``download=True`` to fetch it from the hub when there is no local copy). Other
    options go to the task: ``seed`` (passkey, needle, hotpotqa), ``needles_path`` (needle),
    ``max_summaries_per_story`` (squality), ``num_queries``/``doc_words`` (hotpotqa), ``download``
    (narrativeqa, summscreenfd, 2wikimqa). Raises ValueError for an unknown name or option.
    """
    if name not in _FACTORIES:
        raise ValueError(f"unknown task {name!r}; valid names: {', '.join(_FACTORIES)}")
    source = options.pop("source", "local")
    if source not in ("local", "hub"):
        raise ValueError(f"source must be 'local' or 'hub', not {source!r}")
    if source == "hub" and name in ("passkey", "needle", "qmsum"):
        download = options.pop("download", False)
        if options:
            raise ValueError(f"hub task {name!r} takes only the option 'download', not {sorted(options)}")
        return HubTask(_METADATA[name], HUB_CONFIGS[name], download=download)
    if source == "hub" and name not in HUB_CONFIGS:
        raise ValueError(f"task {name!r} is an offline stand-in with no hub version; its hub tasks are "
                         f"{', '.join(HUB_CONFIGS)}")
    try:
        return _FACTORIES[name](**options)
    except TypeError as exc:
        raise ValueError(f"task {name!r} does not take the options {sorted(options)}: {exc}") from None


__all__ = [
    "DEFAULT_TASKS",
    "HUB_CONFIGS",
    "SYNTHETIC_LENGTHS",
    "TASKS",
    "HubTask",
    "Passage",
    "RetrievalData",
    "Task",
    "TaskDataMissing",
    "TaskMetadata",
    "get_task",
    "word_budget",
]
