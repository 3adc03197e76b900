"""Benchmarks whose resets sleep, for the first-reset limit (`typical_build_sec`): a test registers them as entry
points and runs them inline, where a reset's time is its sleep."""

from __future__ import annotations

import time

from hylo.core.types import Observation, TaskInstance
from hylo.envs import GridGoal
from hylo.envs.benchmark import Benchmark


class SleepyGrid(GridGoal):
    """A grid whose resets of the episodes in `slow` take `seconds` more."""

    def __init__(self, slow: frozenset[int], seconds: float) -> None:
        super().__init__()
        self.slow = slow
        self.seconds = seconds

    def reset(self, task: TaskInstance) -> Observation:
        if task.index in self.slow:
            time.sleep(self.seconds)
        return super().reset(task)


class SlowFirstReset(Benchmark):
    """Declares a build of 1 s beside a reset of 0.05 s: a worker's first reset may take 10 × 1.05 s. The resets of
    episodes 0 (the worker's first: its build) and 2 (a later one) take 1 s."""

    name = "slow_first_reset"
    typical_reset_sec = 0.05
    typical_build_sec = 1.0
    slow = frozenset({0, 2})
    seconds = 1.0

    def splits(self) -> list[str]:
        return ["test"]

    def tasks(self, split: str) -> list[str]:
        return ["grid"]

    def make_env(self, *, render_images: bool = False) -> SleepyGrid:
        return SleepyGrid(self.slow, self.seconds)

    def default_step_budget(self, task: str) -> int:
        return 5


class SlowerThanItsBuild(SlowFirstReset):
    """Declares a build of 0.05 s: a worker's first reset may take 10 × 0.1 s, and it takes 1.5 s."""

    name = "slower_than_its_build"
    typical_build_sec = 0.05
    slow = frozenset({0})
    seconds = 1.5
