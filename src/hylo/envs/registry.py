"""Benchmarks by name: the built-ins, those registered through the entry-point group `hylo.benchmarks`, and `gym:<id>`
for any environment `gymnasium.make` accepts (through one generic adapter). A module of its own, so that the
`Benchmark` interface and the adapters it finds do not import each other.

A third-party package adds a benchmark with
`[project.entry-points."hylo.benchmarks"] mybench = "mypkg.bench:MyBenchmark"` (a `Benchmark` subclass, or a callable
returning one). `describe_benchmark` is what `hylo list benchmarks` and `GET /api/benchmarks` both show.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from hylo.core.errors import HyloError, UnknownChoice
from hylo.core.registry import Registry, RegistryError
from hylo.envs.benchmark import Benchmark, BenchmarkFactory
from hylo.envs.gym_adapter import GymBenchmark

ENTRY_POINT_GROUP = "hylo.benchmarks"
GYM_TARGET = "hylo.envs.gym_adapter:GymBenchmark"
"""What `gym:<id>` names: one adapter for every Gymnasium id."""

_BUILTIN: dict[str, str] = {
    "babyai": "hylo.envs.babyai:BabyAIBenchmark",
    "libero": "hylo.envs.libero:LiberoBenchmark",
    "metaworld": "hylo.envs.metaworld:MetaWorldBenchmark",
}


def _factory(target: str, value: Any) -> BenchmarkFactory:
    if not callable(value):
        raise RegistryError(f"benchmark {target!r} is not a class or factory: {value!r}")
    factory: BenchmarkFactory = value
    return factory


BENCHMARK_REGISTRY: Registry[BenchmarkFactory] = Registry(
    "benchmark", ENTRY_POINT_GROUP, _BUILTIN, _factory, sort=True, forms=["gym:<id>"]
)


def registered_benchmarks() -> dict[str, str]:
    """Benchmark name → `module:attr`, sorted: the built-ins and the `hylo.benchmarks` entry points."""
    return BENCHMARK_REGISTRY.entries()


def get_benchmark(name: str, *, allow_import: bool = True) -> Benchmark:
    """A new instance of the benchmark called `name`: a registered name, or `gym:<id>` for any Gymnasium
    environment. Without `allow_import` (an HTTP request), a Gymnasium id that names a module to import
    (`gym:module:Env-v0`) is refused."""
    if name.startswith("gym:"):
        env_id = name.removeprefix("gym:")
        if not allow_import and ":" in env_id:
            raise UnknownChoice(
                "benchmark (only registered benchmarks and gym:<registered id> are accepted here)",
                name,
                [*registered_benchmarks(), "gym:<id>"],
            )
        return GymBenchmark(env_id)
    benchmark = BENCHMARK_REGISTRY.get(name)()
    if not isinstance(benchmark, Benchmark):
        raise HyloError(
            f"benchmark {name!r} ({BENCHMARK_REGISTRY.target(name)}) is not a hylo Benchmark: {benchmark!r}"
        )
    return benchmark


# -- describe ------------------------------------------------------------------------------------------------------


class TaskInfo(BaseModel):
    name: str
    step_budget: int | None = Field(description="the default step budget of an episode of the task")
    instruction: str | None = Field(default=None, description="the task's instruction when it is fixed per task")


class SplitInfo(BaseModel):
    name: str
    tasks: list[TaskInfo]


class BenchmarkInfo(BaseModel):
    """A registered benchmark. `available` is false, with the `reason`, when it cannot run here (a missing package);
    its splits are still listed when they can be."""

    name: str
    display_name: str
    target: str = Field(description="the registered `module:attr`")
    available: bool
    reason: str | None = None
    default_split: str | None = None
    splits: list[SplitInfo] = Field(default_factory=list)
    observation_keys: dict[str, str] = Field(default_factory=dict)


def describe_benchmark(name: str) -> BenchmarkInfo:
    """The registered benchmark `name` as `hylo list benchmarks` and `GET /api/benchmarks` show it: nothing is
    built, no env made; a benchmark that cannot load or list its splits here is described as unavailable."""
    target = BENCHMARK_REGISTRY.target(name)
    if target is None:
        raise UnknownChoice("benchmark", name, BENCHMARK_REGISTRY.names())
    try:
        bench = get_benchmark(name, allow_import=False)
    except Exception as exc:  # a registered benchmark whose module cannot load here
        return BenchmarkInfo(name=name, display_name=name, target=target, available=False, reason=str(exc))
    available, why = bench.available()
    info = BenchmarkInfo(
        name=name,
        display_name=bench.display_name or name,
        target=target,
        available=available,
        reason=None if available else why or "unavailable",
        observation_keys=dict(bench.observation_keys),
    )
    try:
        splits = bench.splits()
        info.default_split = bench.default_split or (splits[0] if splits else None)
        info.splits = [
            SplitInfo(name=split, tasks=[_task(bench, task) for task in bench.tasks(split)]) for split in splits
        ]
    except Exception as exc:
        info.available = False
        info.reason = info.reason or f"its splits cannot be listed: {exc}"
    return info


def _task(bench: Benchmark, task: str) -> TaskInfo:
    try:
        budget: int | None = int(bench.default_step_budget(task))
    except Exception:
        budget = None
    try:
        instruction = bench.instruction(task)
    except Exception:
        instruction = None
    return TaskInfo(name=task, step_budget=budget, instruction=instruction)
