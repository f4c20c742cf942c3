"""Where a task is found by name: every task module declares itself once, with :func:`register_task`.

As in mteb, where a task is found from its own ``TaskMetadata``, a task's module holds everything the
rest of the package needs to know about it: its :class:`~longembed.tasks.base.TaskMetadata` (name,
column title, kind: generated per length or real, where its data comes from, its config in the
``dwzhu/LongEmbed`` hub dataset if it has one) and how to build it. A new task is one module::

    METADATA = TaskMetadata(name="mytask", title="Mine", main_score="ndcg@10", lengths=None, ...)

    class MyTask:
        metadata = METADATA
        def load(self, data_dir, length=None) -> RetrievalData: ...

    register_task(METADATA, MyTask)

``longembed.tasks`` imports every module of its package, so a module placed there is registered;
a task declared elsewhere (a plugin, a test) is registered when its module is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from longembed.errors import UserError
from longembed.tasks.base import Task, TaskMetadata
from longembed.tasks.hub import HubTask, hub_task_builder


@dataclass(frozen=True)
class RegisteredTask:
    """A declared task: what it is, and how to build it with options (``build(**options)``)."""

    metadata: TaskMetadata
    build: Callable[..., Task]


_REGISTERED: dict[str, RegisteredTask] = {}

#: Every registered task by name, with default options (in the order the tasks registered).
TASKS: dict[str, Task] = {}

#: Hub config of every registered task that exists in ``dwzhu/LongEmbed`` (the stand-ins do not).
HUB_CONFIGS: dict[str, str] = {}


def register_task(metadata: TaskMetadata, build: Callable[..., Task]) -> Callable[..., Task]:
    """Declare the task ``metadata.name``, built by ``build(**options)``; returns ``build``.

    Registering the same name again with another builder is an error (two tasks would share a name).
    """
    known = _REGISTERED.get(metadata.name)
    if known is not None and known.build is not build:
        raise UserError(f"a task named {metadata.name!r} is already registered ({known.build.__qualname__})")
    _REGISTERED[metadata.name] = RegisteredTask(metadata, build)
    TASKS[metadata.name] = build()
    if metadata.hub_config is not None:
        HUB_CONFIGS[metadata.name] = metadata.hub_config
    return build


def unregister_task(name: str) -> None:
    """Forget the task ``name`` (a plugin's or a test's task); a KeyError if it is not registered."""
    del _REGISTERED[name]
    TASKS.pop(name)
    HUB_CONFIGS.pop(name, None)


def task_metadata(name: str) -> TaskMetadata | None:
    """The declared metadata of the task ``name``; None for a name no module registered (e.g. a task
    in an old results file)."""
    registered = _REGISTERED.get(name)
    return registered.metadata if registered is not None else None


def get_task(name: str, **options: Any) -> Task:
    """The task called ``name``, built with ``options``.

    ``source="hub"`` reads a LongEmbed task from the hub layout instead of building it from the
    original data (with ``download=True`` to fetch it from the hub when there is no local copy). Other
    options go to the task: ``seed`` (passkey, needle, hotpotqa), ``queries_per_length`` and
    ``haystack`` (passkey, needle), ``needles_path`` and ``haystacks`` (needle),
    ``max_summaries_per_story`` (squality), ``num_queries``/``doc_words`` (hotpotqa), ``download``
    (narrativeqa, summscreenfd, 2wikimqa). Raises ValueError for an unknown name or option.
    """
    registered = _REGISTERED.get(name)
    if registered is None:
        raise UserError(f"unknown task {name!r}; valid names: {', '.join(_REGISTERED)}")
    source = options.pop("source", "local")
    if source not in ("local", "hub"):
        raise UserError(f"source must be 'local' or 'hub', not {source!r}")
    if source == "hub":
        return _hub_task(registered.metadata, options)
    try:
        return registered.build(**options)
    except TypeError as exc:
        raise UserError(f"task {name!r} does not take the options {sorted(options)}: {exc}") from None


def _hub_task(metadata: TaskMetadata, options: dict[str, Any]) -> HubTask:
    """The task read from its config of the hub dataset; it takes only ``download``."""
    if metadata.hub_config is None:
        raise UserError(
            f"task {metadata.name!r} is an offline stand-in with no hub version; its hub tasks are "
            f"{', '.join(HUB_CONFIGS)}"
        )
    download = options.pop("download", False)
    if options:
        raise UserError(f"hub task {metadata.name!r} takes only the option 'download', not {sorted(options)}")
    return hub_task_builder(metadata)(download=download)
