"""Task registry: spec ``task.name`` -> task object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workers.tasks.arithmetic import ArithmeticTask
from workers.tasks.bandit import BanditTask
from workers.tasks.base import Problem, Task
from workers.tasks.dataset import dataset_task
from workers.tasks.jsonl import JsonlTask

TASKS: dict[str, Callable[..., Task]] = dict(arithmetic=ArithmeticTask, bandit=BanditTask, jsonl=JsonlTask, dataset=dataset_task)


def make_task(spec: dict[str, Any]) -> Task:
    """Build a task from its spec mapping (``{"name": ..., **options}``).

    Raises:
        ValueError: unknown task name (the message lists the valid names).
    """
    options = dict(spec)
    name = options.pop("name")
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(sorted(TASKS))}")
    return TASKS[name](**options)


__all__ = ["TASKS", "Problem", "Task", "make_task"]
