"""2WikiMultihopQA (Ho et al., 2020) as in LongEmbed: a multi-hop question -> its long document.

LongEmbed uses LongBench's length-balanced 2wikimqa test set: 300 questions, each with one document
of Wikipedia passages (6,132 words on average). Not reachable offline: this task (registered as
``2wikimqa``) reads only the LongEmbed hub layout (``dwzhu/LongEmbed``, config ``2wikimqa``).
Offline, ``hotpotqa`` stands in for it.
"""

from __future__ import annotations

from longembed.tasks.base import TaskMetadata
from longembed.tasks.hf_hub import hub_source, hub_task_builder
from longembed.tasks.registry import register_task

CONFIG = "2wikimqa"

METADATA = TaskMetadata(
    name="2wikimqa",
    description="2WikiMultihopQA: a multi-hop question -> the long document of Wikipedia passages that "
    "answers it (300 questions).",
    main_score="ndcg@10",
    lengths=None,
    source=hub_source(CONFIG),
    title="WQA",
    hub_config=CONFIG,
)

#: ``make_task(download=False)``: the task read from the hub layout.
make_task = register_task(METADATA, hub_task_builder(METADATA))
