"""Benchmarks: suites of tasks and splits that yield `TaskInstance`s.

This module holds only the interface a benchmark implements (a third-party package subclasses `Benchmark` here);
`hylo.envs.registry` finds benchmarks by name, so that the adapters it knows (`gym:<id>`) and this interface do not
import each other.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hylo.core.conventions import ActionConvention
from hylo.core.environment import Environment
from hylo.core.errors import HyloError, UnknownChoice, shown
from hylo.core.types import TaskInstance

# UnknownChoice: where benchmarks have imported it from
__all__ = [
    "Benchmark",
    "BenchmarkFactory",
    "BenchmarkOption",
    "BenchmarkOptionError",
    "OptionRefused",
    "UnknownChoice",
    "check_request_options",
]


class BenchmarkOptionError(HyloError):
    """A benchmark option (a run's `env_args`) the benchmark does not take, or cannot be built with."""


class OptionRefused(BenchmarkOptionError):
    """An option a request may not set (undeclared), or set to a value outside its declared type and bounds."""


class BenchmarkOption(BaseModel):
    """An option a request (`env_args` over HTTP) may set on a benchmark, as data: a bounded number, a flag, or one
    of enumerated strings. The command line is the operator and passes any option the benchmark's factory takes; a
    request only what is declared, so that no request value reaches a constructor that would read a file, import a
    module or size an allocation beyond its bounds. Checked without building anything."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: Literal["int", "float", "bool", "str"]
    description: str = ""
    minimum: int | float | None = Field(default=None, description="the least value of an int or float option")
    maximum: int | float | None = Field(default=None, description="the greatest value of an int or float option")
    choices: tuple[str, ...] = Field(default=(), description="the values a str option may take")

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        if self.type in ("int", "float") and (self.minimum is None or self.maximum is None):
            raise ValueError(f"benchmark option {self.name!r}: an {self.type} option declares its minimum and maximum")
        if self.type == "str" and not self.choices:
            raise ValueError(f"benchmark option {self.name!r}: a str option declares its choices")
        return self

    @classmethod
    def integer(cls, name: str, minimum: int, maximum: int, description: str = "") -> BenchmarkOption:
        return cls(name=name, type="int", minimum=minimum, maximum=maximum, description=description)

    @classmethod
    def number(cls, name: str, minimum: float, maximum: float, description: str = "") -> BenchmarkOption:
        return cls(name=name, type="float", minimum=minimum, maximum=maximum, description=description)

    @classmethod
    def flag(cls, name: str, description: str = "") -> BenchmarkOption:
        return cls(name=name, type="bool", description=description)

    @classmethod
    def choice(cls, name: str, choices: Sequence[str], description: str = "") -> BenchmarkOption:
        return cls(name=name, type="str", choices=tuple(choices), description=description)

    def summary(self) -> str:
        """`name: int 16-4096` / `name: one of 'a', 'b'` / `name: bool`, as listings show it."""
        if self.type == "str":
            return f"{self.name}: one of {', '.join(repr(c) for c in self.choices)}"
        if self.type == "bool":
            return f"{self.name}: bool"
        return f"{self.name}: {self.type} {self._bounds('-')}"

    def _bounds(self, between: str) -> str:
        assert self.minimum is not None and self.maximum is not None  # `_bounded`
        if self.type == "int":
            return f"{int(self.minimum)}{between}{int(self.maximum)}"
        return f"{self.minimum:g}{between}{self.maximum:g}"

    def refusal(self, value: Any) -> str | None:
        """Why `value` is not one this option takes (None: it is), naming what it takes."""
        if self.type == "bool":
            return None if isinstance(value, bool) else f"must be true or false, got {shown(value)}"
        if self.type == "str":
            if isinstance(value, str) and value in self.choices:
                return None
            return f"must be one of {', '.join(repr(c) for c in self.choices)}, got {shown(value, 40)}"
        assert self.minimum is not None and self.maximum is not None  # `_bounded`
        what = "an integer" if self.type == "int" else "a number"
        number = isinstance(value, int) or (self.type == "float" and isinstance(value, float) and not math.isnan(value))
        fits = number and not isinstance(value, bool) and self.minimum <= value <= self.maximum  # exact for any int
        return None if fits else f"must be {what} from {self._bounds(' to ')}, got {shown(value, 40)}"


ANOTHER_ENV = frozenset({"env", "env_id", "id", "entry_point", "env_name", "env_type"})
"""Option names that name another environment to build (its module imported): never taken from a request."""
_PATH_WORDS = ("file", "path", "dir", "xml", "asset", "root", "url", "uri", "folder")


def _why_undeclared(name: str, value: Any) -> str:
    """Why an option is not one a request may set, from its name and value alone (never the filesystem)."""
    if name == "render_mode":
        return "hylo sets it itself"
    if name in ANOTHER_ENV:
        return "it names another environment to build; only the command line may"
    if any(word in name.lower() for word in _PATH_WORDS) or (
        isinstance(value, str) and ("/" in value or "\\" in value or value.startswith(("~", ".")))
    ):
        return "it names a file or path; only the command line may"
    return "the benchmark does not declare it; only the command line passes undeclared options"


def check_request_options(benchmark: str, declared: Sequence[BenchmarkOption], options: Mapping[str, Any]) -> None:
    """Refuse an option a request gives that `benchmark` does not declare, or a value outside its declaration,
    naming the option and why (`OptionRefused`). Only names and values are looked at: nothing is built, no path is
    touched, so a refusal says nothing about the machine."""
    by_name = {option.name: option for option in declared}
    for name, value in options.items():
        option = by_name.get(name)
        if option is None:
            takes = f"the options a request may set: {', '.join(by_name)}" if by_name else "a request may set none"
            raise OptionRefused(
                f"benchmark {benchmark!r}: option {name!r} is not accepted over HTTP ({_why_undeclared(name, value)}); "
                f"{takes}"
            )
        problem = option.refusal(value)
        if problem is not None:
            raise OptionRefused(f"benchmark {benchmark!r}: option {name!r} {problem}")


class Benchmark(abc.ABC):
    """A suite of tasks in splits.

    - `splits()` / `tasks(split)` list what can be placed; `default_split` (else the first split) is used when none
      is given
    - `make_env(render_images=...)` builds the benchmark's environment (once per worker process); its `reset(task)`
      places any task of any split. Frames are rendered only when `render_images` is true.
    - `task_instance(split, task, index, base_seed)` is a pure function: the episode's identity and seed depend on
      nothing else
    - `expert()` returns the benchmark's scripted expert agent, or None
    - `unavailable_tasks()` names the suite's tasks that cannot run here (assets fetched at run time), each with why
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
    - `observation_keys` documents what an observation carries; `feature_names` which of its keys carries each named
      feature of datasets and the policies trained on them (LeRobot's `observation.state`, ...: `hylo.core.features`);
      `action_convention` what an action's numbers mean (`hylo.core.conventions`). Its envs' `EnvSpec` carry both.
    - `result_packages` names the packages whose versions change the benchmark's results (a simulator's): their
      versions are part of a run's digest, so a run resumed on other versions is another run
    - `env_ram_gb` is the RAM one env of the benchmark holds (None: small enough not to count); `--workers` beyond
      what the machine's RAM holds is refused with the figure, and the job scheduler admits jobs by it
    - `episode_prefix(split, task)` is a shorter form of `<name>/<split>/<task>` in episode ids (empty: none);
      `long_episode_ids` set on an instance keeps the long form (a run logged before the benchmark had a short one)
    - `request_options` declares the options (keyword arguments of its factory) a request over HTTP may set, each
      with its type and bounds (`BenchmarkOption`); the command line may pass any its factory takes
    """

    name: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    default_split: ClassVar[str] = ""  # empty: the first of `splits()`
    default_per_step_budget_sec: ClassVar[float] = 0.5
    typical_reset_sec: ClassVar[float | None] = None
    typical_step_sec: ClassVar[float | None] = None
    typical_build_sec: ClassVar[float | None] = None
    observation_keys: ClassVar[dict[str, str]] = {}
    feature_names: tuple[tuple[str, str], ...] = ()
    action_convention: ActionConvention | None = None
    env_ram_gb: ClassVar[float | None] = None
    result_packages: ClassVar[tuple[str, ...]] = ()
    request_options: ClassVar[tuple[BenchmarkOption, ...]] = ()
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

    def unavailable_tasks(self) -> dict[str, str]:
        """Tasks of the suite that cannot run here (in no split) → why, and what would make them run."""
        return {}

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
