"""Benchmarks by name: the built-ins, those registered through the entry-point group `hylo.benchmarks`, and `gym:<id>`
for any environment `gymnasium.make` accepts (through one generic adapter). A module of its own, so that the
`Benchmark` interface and the adapters it finds do not import each other.

A benchmark's options (`-E key=value` on `hylo eval`, a spec's `env_args`) are the keyword arguments of its factory
(or class), or for `gym:<id>` those of `gymnasium.make`; one it does not take is refused naming those it does. A
request (over HTTP) sets only those the benchmark declares (`Benchmark.request_options`), within their bounds.

A third-party package adds a benchmark with
`[project.entry-points."hylo.benchmarks"] mybench = "mypkg.bench:MyBenchmark"` (a `Benchmark` subclass, or a callable
returning one). `describe_benchmark` is what `hylo list benchmarks` and `GET /api/benchmarks` both show.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from hylo.core.errors import HyloError, UnknownChoice
from hylo.core.registry import Registry, RegistryError
from hylo.envs.benchmark import (
    Benchmark,
    BenchmarkFactory,
    BenchmarkOption,
    BenchmarkOptionError,
    check_request_options,
)
from hylo.envs.gym_adapter import GymBenchmark

ENTRY_POINT_GROUP = "hylo.benchmarks"
GYM_TARGET = "hylo.envs.gym_adapter:GymBenchmark"
"""What `gym:<id>` names: one adapter for every Gymnasium id."""

_BUILTIN: dict[str, str] = {
    "babyai": "hylo.envs.babyai:BabyAIBenchmark",
    "kinetix": "hylo.envs.kinetix:KinetixBenchmark",
    "libero": "hylo.envs.libero:LiberoBenchmark",
    "maniskill": "hylo.envs.maniskill:ManiSkillBenchmark",
    "metaworld": "hylo.envs.metaworld:MetaWorldBenchmark",
    "robomimic": "hylo.envs.robomimic:RobomimicBenchmark",
}


_BUILTIN_EXTRAS: dict[str, tuple[str, str]] = {
    "metaworld": ("metaworld", "metaworld"),
    "maniskill": ("mani_skill", "maniskill"),
    "kinetix": ("kinetix", "kinetix"),
    "robomimic": ("robosuite", "libero"),
}
"""Built-in benchmark → (the package it needs, the hylo extra that installs it)."""

GYM_EXTRAS = (
    "gym:gym_pusht/PushT-v0",
    "gym:gym_aloha/AlohaInsertion-v0",
    "gym:gym_aloha/AlohaTransferCube-v0",
    "gym:gym_hil/PandaPickCube-v0",
    "gym:gym_hil/PandaArrangeBoxes-v0",
)
"""The Gymnasium envs of hylo's extras (their namespaces are `gym_adapter.EXTRAS`), listed by `hylo list benchmarks`
and `GET /api/benchmarks` whether they are installed or not (then with the command that installs them)."""


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


def listed_benchmarks() -> list[str]:
    """What `hylo list benchmarks` and `GET /api/benchmarks` describe: the registered benchmarks, then the
    Gymnasium envs of hylo's extras (`GYM_EXTRAS`)."""
    return [*registered_benchmarks(), *GYM_EXTRAS]


def get_benchmark(
    name: str, *, allow_import: bool = True, options: Mapping[str, Any] | None = None, request: bool | None = None
) -> Benchmark:
    """A new instance of the benchmark called `name`: a registered name, or `gym:<id>` for any Gymnasium
    environment, built with `options` (`BenchmarkOptionError` for one it does not take). Without `allow_import` (an
    HTTP request), a Gymnasium id that names a module to import (`gym:module:Env-v0`), or whose namespace module is
    not imported yet and is not one of hylo's extras (`gym_pusht`, `gym_aloha`), is refused. With `request` (by
    default: without `allow_import`) only the options the benchmark declares are taken, within their bounds
    (`OptionRefused` otherwise, before anything is built), and the old-gym compatibility ids are refused."""
    options = dict(options or {})
    request = not allow_import if request is None else request
    if name.startswith("gym:"):
        env_id = name.removeprefix("gym:")
        if not allow_import and ":" in env_id:
            raise UnknownChoice(
                "benchmark (only registered benchmarks and gym:<registered id> are accepted here)",
                name,
                [*registered_benchmarks(), "gym:<id>"],
            )
        return GymBenchmark(env_id, allow_import=allow_import, make_kwargs=options, request=request)
    try:
        factory = BENCHMARK_REGISTRY.get(name)
    except RegistryError as exc:
        needs = _BUILTIN_EXTRAS.get(name)
        if needs is not None and _missing(needs[0]):
            raise HyloError(f"{exc}; install it with: pip install 'hylo[{needs[1]}]'") from None
        raise
    if request:
        check_request_options(name, declared_options(factory), options)
    _check_options(name, factory, options)
    try:
        benchmark = factory(**options)
    except (TypeError, ValueError) as exc:
        if not options:
            raise
        raise BenchmarkOptionError(f"benchmark {name!r} cannot be built with options {options}: {exc}") from None
    if not isinstance(benchmark, Benchmark):
        raise HyloError(
            f"benchmark {name!r} ({BENCHMARK_REGISTRY.target(name)}) is not a hylo Benchmark: {benchmark!r}"
        )
    return benchmark


def _missing(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is None
    except (ImportError, ValueError):
        return True


def declared_options(factory: BenchmarkFactory) -> tuple[BenchmarkOption, ...]:
    """The options a request may set on a registered benchmark: its class's `request_options` (a factory that is
    no `Benchmark` class declares them as an attribute, or declares none)."""
    declared = getattr(factory, "request_options", ())
    return tuple(option for option in declared if isinstance(option, BenchmarkOption))


def _check_options(name: str, factory: BenchmarkFactory, options: Mapping[str, Any]) -> None:
    """Refuse an option the benchmark's factory does not take, naming it and those it does."""
    if not options:
        return
    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = [p.name for p in parameters if p.kind in kinds]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = f"its options: {', '.join(accepted)}" if accepted else "it takes none"
        raise BenchmarkOptionError(f"benchmark {name!r} takes no option {unknown[0]!r}; {takes}")


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
    unavailable_tasks: dict[str, str] = Field(
        default_factory=dict, description="the suite's tasks that cannot run here → why, and what would make them run"
    )
    observation_keys: dict[str, str] = Field(default_factory=dict)
    feature_names: dict[str, str] = Field(
        default_factory=dict,
        description="observation key → the named feature of datasets and policies trained on them (LeRobot's) it "
        "carries; `*` stands for any camera, `[a:b]` for a slice of a vector",
    )
    action_convention: dict[str, Any] | None = Field(
        default=None, description="what an action's numbers mean (control, rotation, gripper, frame, units, labels)"
    )
    options: list[BenchmarkOption] = Field(
        default_factory=list,
        description="the options (`env_args`) a request may set, each with its type and bounds or its values; the "
        "command line may pass any the benchmark takes",
    )


def describe_benchmark(name: str) -> BenchmarkInfo:
    """The registered benchmark `name` (or a Gymnasium env of hylo's extras, `GYM_EXTRAS`) as `hylo list benchmarks`
    and `GET /api/benchmarks` show it: nothing is built, no env made; a benchmark that cannot load or list its splits
    here is described as unavailable, saying why (and what to install, for a package of hylo's extras)."""
    target = GYM_TARGET if name in GYM_EXTRAS else BENCHMARK_REGISTRY.target(name)
    if target is None:
        raise UnknownChoice("benchmark", name, [*BENCHMARK_REGISTRY.names(), *GYM_EXTRAS])
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
        feature_names=dict(bench.feature_names),
        action_convention=None if bench.action_convention is None else bench.action_convention.to_json(),
        options=list(bench.request_options),
    )
    try:
        splits = bench.splits()
        info.default_split = bench.default_split or (splits[0] if splits else None)
        info.splits = [
            SplitInfo(name=split, tasks=[_task(bench, task) for task in bench.tasks(split)]) for split in splits
        ]
        info.unavailable_tasks = dict(bench.unavailable_tasks())
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
