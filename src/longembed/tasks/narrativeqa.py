"""NarrativeQA (Kočiský et al., 2018) as in LongEmbed: a question about a story -> the story.

LongEmbed uses the test split: 10,449 questions over 355 books and movie scripts (50,474 words on
average). The data cannot be rebuilt from anything available offline, so this task reads only the
LongEmbed hub layout (``dwzhu/LongEmbed``, config ``narrativeqa``; see :mod:`longembed.tasks.hf_hub`).
"""

from __future__ import annotations

from longembed.tasks.base import TaskMetadata
from longembed.tasks.hf_hub import hub_source, hub_task_builder
from longembed.tasks.registry import register_task

CONFIG = "narrativeqa"

METADATA = TaskMetadata(
    name="narrativeqa",
    description="NarrativeQA: a question about a book or movie script -> the full text (355 documents).",
    main_score="ndcg@10",
    lengths=None,
    source=hub_source(CONFIG),
    title="NQA",
    hub_config=CONFIG,
)

#: ``make_task(download=False)``: the task read from the hub layout.
make_task = register_task(METADATA, hub_task_builder(METADATA))
