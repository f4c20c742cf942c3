"""SummScreenFD (Chen et al., 2022) as in LongEmbed: a TV-episode recap -> the episode's transcript.

LongEmbed uses the SCROLLS validation set: 336 summaries and 336 transcripts (5,582 words on
average). Not reachable offline: this task reads only the LongEmbed hub layout (``dwzhu/LongEmbed``,
config ``summ_screen_fd``). Offline, ``squality`` stands in for it.
"""

from __future__ import annotations

from longembed.tasks.base import TaskMetadata
from longembed.tasks.hf_hub import hub_source, hub_task_builder
from longembed.tasks.registry import register_task

CONFIG = "summ_screen_fd"

METADATA = TaskMetadata(
    name="summscreenfd",
    description="SummScreenFD: a human recap of a TV episode -> its transcript (336 episodes).",
    main_score="ndcg@10",
    lengths=None,
    source=hub_source(CONFIG),
    title="SFD",
    hub_config=CONFIG,
)

#: ``make_task(download=False)``: the task read from the hub layout.
make_task = register_task(METADATA, hub_task_builder(METADATA))
