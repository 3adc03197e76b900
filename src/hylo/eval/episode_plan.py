"""A run's episodes as index arithmetic: which episode the i-th is, without a list of them.

An episode's `TaskInstance` is a pure function of (seed, task, index) (`Benchmark.task_instance`), so a run of
seeds × tasks × episodes is planned by its three sizes alone: the runner walks it one episode at a time and holds
only what runs or waits for a retry, whatever the run's size (`MAX_RUN_EPISODES` bounds it, not memory).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from hylo.core.types import TaskInstance
from hylo.envs.benchmark import Benchmark


@dataclass(frozen=True)
class EpisodePlan:
    """The episodes of a run in the order they are handed out: seed by seed, task by task, index by index."""

    benchmark: Benchmark
    split: str
    tasks: Sequence[str]
    seeds: Sequence[int]
    episodes: int

    def __len__(self) -> int:
        return len(self.seeds) * len(self.tasks) * self.episodes

    def __iter__(self) -> Iterator[TaskInstance]:
        for seed in self.seeds:
            for task in self.tasks:
                for index in range(self.episodes):
                    yield self.instance(task, index, seed)

    def instance(self, task: str, index: int, seed: int) -> TaskInstance:
        """The episode (`task`, `index`) under base seed `seed`, under the ids the benchmark logs now (its
        `long_episode_ids`)."""
        return self.benchmark.task_instance(self.split, task, index, seed)
