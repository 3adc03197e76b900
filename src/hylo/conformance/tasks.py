"""The tasks the checks run on, and how they are named in messages."""

from __future__ import annotations

import dataclasses

from hylo.core.types import EnvSpec, TaskInstance, derive_seed


def label(task: TaskInstance) -> str:
    return f"{task.episode_id} (seed {task.seed})"


def reseeded(task: TaskInstance, k: int) -> TaskInstance:
    """The same task under another seed: a different episode that the env must treat as one."""
    return dataclasses.replace(task, seed=derive_seed("conformance", task.seed, k))


def default_tasks(spec: EnvSpec) -> tuple[TaskInstance, ...]:
    return tuple(TaskInstance(benchmark=spec.name, task="conformance", index=i) for i in range(2))
