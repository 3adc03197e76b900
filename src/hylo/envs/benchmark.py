"""Benchmarks: suites of tasks and splits that yield `TaskInstance`s.

This module holds only the interface a benchmark implements (a third-party package subclasses `Benchmark` here);
`hylo.envs.registry` finds benchmarks by name, so that the adapters it knows (`gym:<id>`) and this interface do not
import each other.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from hylo.core.environment import Environment
from hylo.core.errors import HyloError, UnknownChoice
from hylo.core.types import TaskInstance

# UnknownChoice: where benchmarks have imported it from
__all__ = ["Benchmark", "BenchmarkFactory", "BenchmarkOptionError", "UnknownChoice"]


class BenchmarkOptionError(HyloError):
    """A benchmark option (a run's `env_args`) the benchmark does not take, or cannot be built with."""


class Benchmark(abc.ABC):
    """A suite of tasks in splits.

    - `splits()` / `tasks(split)` list what can be placed; `default_split` (else the first split) is used when none
      is given
    - `make_env(render_images=...)` builds the benchmark's environment (once per worker process); its `reset(task)`
      places any task of any split. Frames are rendered only when `render_images` is true.
    - `task_instance(split, task, index, base_seed)` is a pure function: the episode's identity and seed depend on
      nothing else
    - `expert()` returns the benchmark's scripted expert agent, or None
    - `default_step_budget(task)` is the per-episode step budget when neither the request nor the panel gives one;
      `default_per_step_budget_sec` turns a budget into the agent's time allowance per episode (its time outside env
      calls: the env's own calls never count against it)
    - `typical_reset_sec` / `typical_step_sec` are how long the env's reset and step usually take (None: unknown);
      an env call's limit is a multiple of its measured mean, and of these figures until a worker has measured one.
      `typical_build_sec` is how much longer a worker's first reset takes (building the simulator, loading its
      assets and the libraries it imports on first use; None: nothing worth counting): that reset's limit is a
      multiple of the build and the reset together, and it is left out of the measured mean. Declare figures taken
      on a small machine under load (two cores shared with other work): the multiple covers the spread, not the
      machine
    - `observation_keys` documents what an observation carries
    - `result_packages` names the packages whose versions change the benchmark's results (a simulator's): their
      versions are part of a run's digest, so a run resumed on other versions is another run
    - `env_ram_gb` is the RAM one env of the benchmark holds (None: small enough not to count); `--workers` beyond
      what the machine's RAM holds is refused with the figure, and the job scheduler admits jobs by it
    - `episode_prefix(split, task)` is a shorter form of `<name>/<split>/<task>` in episode ids (empty: none);
      `long_episode_ids` set on an instance keeps the long form (a run logged before the benchmark had a short one)
    """

    name: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    default_split: ClassVar[str] = ""  # empty: the first of `splits()`
    default_per_step_budget_sec: ClassVar[float] = 0.5
    typical_reset_sec: ClassVar[float | None] = None
    typical_step_sec: ClassVar[float | None] = None
    typical_build_sec: ClassVar[float | None] = None
    observation_keys: ClassVar[dict[str, str]] = {}
    env_ram_gb: ClassVar[float | None] = None
    result_packages: ClassVar[tuple[str, ...]] = ()
    long_episode_ids: bool = False

    @abc.abstractmethod
    def splits(self) -> list[str]: ...

    @abc.abstractmethod
    def tasks(self, split: str) -> list[str]: ...

    @abc.abstractmethod
    def make_env(self, *, render_images: bool = False) -> Environment: ...

    @abc.abstractmethod
    def default_step_budget(self, task: str) -> int: ...

    def expert(self) -> Any | None:
        return None

    def instruction(self, task: str) -> str | None:
        """The task's instruction when it is fixed per task (else the env reports it on reset)."""
        return None

    def available(self) -> tuple[bool, str]:
        """Whether the benchmark can run here, and why not."""
        return True, ""

    def check_split(self, split: str | None) -> str:
        choices = self.splits()
        if split is None:
            split = self.default_split or choices[0]
        if split not in choices:
            raise UnknownChoice(f"split of benchmark {self.name!r}:", split, choices)
        return split

    def check_tasks(self, split: str, tasks: Sequence[str] | None) -> list[str]:
        """The tasks to run (all of the split's when none are named), each checked."""
        choices = self.tasks(split)
        if not tasks:
            return list(choices)
        for task in tasks:
            if task not in choices:
                raise UnknownChoice(f"task of {self.name!r} split {split!r}:", task, choices)
        return list(dict.fromkeys(tasks))

    def episode_prefix(self, split: str, task: str) -> str:
        """A shorter form of `<name>/<split>/<task>` for the task's episode ids; empty: the long form."""
        return ""

    def task_instance(self, split: str, task: str, index: int, base_seed: int = 0) -> TaskInstance:
        prefix = "" if self.long_episode_ids else self.episode_prefix(split, task)
        return TaskInstance(
            self.name,
            task,
            index,
            split=split,
            base_seed=base_seed,
            instruction=self.instruction(task),
            id_prefix=prefix,
        )


BenchmarkFactory = Callable[[], Benchmark]
