"""The panel every benchmark gets with no extra code: the cascade benchmark → split → task → episode_index.

It is the one control plane for episode placement. An interactive session moves it field by field from the canvas
(`on_field_change`); the batch runner places each planned episode at once (`place`), through the same checks. A
committed change of placement answers with the `episode_reset` signal intent, however it was made.

Its hooks are `async` by contract and plain code inside: each answers what its synchronous twin (`state`, `change`,
`options`) does, so that code which owns no event loop (resolving a run) reads the panel directly.
"""

from __future__ import annotations

from typing import Any

from hylo.core.errors import UnknownChoice, shown
from hylo.core.signals import Signal
from hylo.core.types import MAX_SEED, TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.panels.base import (
    PLAYBACK_ACTIONS,
    BaseEnvPanel,
    EnvPanelField,
    PanelRefused,
    PanelReply,
    PanelState,
    Placement,
    SideEffect,
)

PLACEMENT_FIELDS = ("split", "task", "episode_index", "seed")


class BenchmarkPanel(BaseEnvPanel):
    """Placement panel of one benchmark (`env_<benchmark>`)."""

    def __init__(
        self,
        benchmark: Benchmark,
        *,
        split: str | None = None,
        task: str | None = None,
        default_step_budget: int | None = None,
    ) -> None:
        """`default_step_budget`: the budget of what runs on this panel when the request gives none (a graph's own
        `step_budget`); None reports the benchmark's default for the placed task."""
        super().__init__()
        self.benchmark = benchmark
        self.default_step_budget = default_step_budget
        self.name = f"env_{benchmark.name}"
        self.display_name = benchmark.display_name or benchmark.name
        split = benchmark.check_split(split)
        tasks = benchmark.tasks(split)
        if task is None:
            task = tasks[0]
        benchmark.check_tasks(split, [task])
        self.placement = Placement(benchmark.name, split, task)
        self.fields = (
            EnvPanelField("benchmark", "select", "Benchmark", options=[benchmark.name]),
            EnvPanelField("split", "select", "Split", options=benchmark.splits()),
            EnvPanelField("task", "select", "Task", dynamic=True),
            EnvPanelField("episode_index", "number", "Episode", min=0, step=1),
            EnvPanelField("seed", "number", "Base seed", min=0, step=1),
        )
        self.actions = PLAYBACK_ACTIONS

    # -- the hooks ------------------------------------------------------------------------------------------------

    async def on_load(self) -> PanelState:
        return self.state()

    async def on_options(self, name: str) -> PanelReply:
        return self.options(name)

    async def on_field_change(self, name: str, value: Any) -> PanelReply:
        return self.change(name, value)

    # -- the same, synchronous ----------------------------------------------------------------------------------

    def state(self) -> PanelState:
        """What `on_load` answers: availability, the placed task's step budget and the current placement."""
        available, why = self.benchmark.available()
        p = self.placement
        return PanelState(
            available=available,
            status=why or ("ready" if available else "unavailable"),
            step_budget=self.default_step_budget or self.benchmark.default_step_budget(p.task),
            values={
                "benchmark": p.benchmark,
                "split": p.split,
                "task": p.task,
                "episode_index": p.episode_index,
                "seed": p.seed,
                "episode_id": self.task_instance().episode_id,
            },
        )

    def options(self, name: str) -> PanelReply:
        """What `on_options` answers: the tasks of the current split for `task`, a fixed select's options."""
        if name == "task":
            return PanelReply(options=tuple(self.benchmark.tasks(self.placement.split)))
        spec = self.field(name)
        if spec is None:
            raise self.unknown_field(name)
        return PanelReply(options=tuple(spec.options or ()))

    def change(self, name: str, value: Any) -> PanelReply:
        """What `on_field_change` answers: set one field (a split that lacks the task moves it to the split's
        first); `episode_reset` when the placement moved, nothing when the value is the current one. Raises
        `PanelRefused` naming a bad value, and then changes nothing."""
        p = self.placement
        try:
            if name == "benchmark":
                if value != self.benchmark.name:
                    raise UnknownChoice("benchmark of this panel", value, [self.benchmark.name])
                return PanelReply()
            if name == "split":
                split = self.benchmark.check_split(str(value))
                if split == p.split:
                    return PanelReply()
                tasks = self.benchmark.tasks(split)
                p.split, p.task = split, (p.task if p.task in tasks else tasks[0])
            elif name == "task":
                (task,) = self.benchmark.check_tasks(p.split, [str(value)])
                if task == p.task:
                    return PanelReply()
                p.task = task
            elif name in ("episode_index", "seed"):
                number = _non_negative_int(name, value)
                if number == getattr(p, name):
                    return PanelReply()
                setattr(p, name, number)
            else:
                raise self.unknown_field(name)
        except ValueError as exc:
            raise PanelRefused(str(exc)) from None
        return self._moved(name, self.task_instance())

    def place(self, task: TaskInstance) -> PanelReply:
        """Place the planned episode `task` at once: the batch runner's way, with no field-by-field replay. The same
        checks and the same answer as the last of the field changes that would move the panel there, in cascade
        order: `episode_reset` when the placement moved, nothing when `task` is the episode placed already. Raises
        `PanelRefused` naming a bad value, and then changes nothing."""
        p = self.placement
        if task.benchmark != self.benchmark.name:
            refused = UnknownChoice("benchmark of this panel", task.benchmark, [self.benchmark.name])
            raise PanelRefused(str(refused))
        moved = [
            name
            for name, now, then in (
                ("split", p.split, task.split),
                ("task", p.task, task.task),
                ("seed", p.seed, task.base_seed),
                ("episode_index", p.episode_index, task.index),
            )
            if now != then
        ]
        if not moved:
            return PanelReply()
        try:
            split = self.benchmark.check_split(task.split) if moved[0] == "split" else p.split
            if moved[0] in ("split", "task"):
                self.benchmark.check_tasks(split, [task.task])
            seed = _non_negative_int("seed", task.base_seed)
            index = _non_negative_int("episode_index", task.index)
        except ValueError as exc:
            raise PanelRefused(str(exc)) from None
        p.split, p.task, p.seed, p.episode_index = split, task.task, seed, index
        return self._moved(moved[-1], task)

    def _moved(self, changed: str, placed: TaskInstance) -> PanelReply:
        """The `episode_reset` intent of a committed move to `placed` (`changed`: the field that moved it)."""
        p = self.placement
        payload = {"split": p.split, "task": p.task, "episode_index": p.episode_index, "seed": p.seed}
        payload |= {"changed": changed, "episode_id": placed.episode_id}
        return PanelReply(SideEffect.SIGNAL, Signal.EPISODE_RESET.value, payload)

    def task_instance(self) -> TaskInstance:
        """The episode the panel currently places."""
        p = self.placement
        return self.benchmark.task_instance(p.split, p.task, p.episode_index, p.seed)


def _non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {shown(value)}")
    if value > MAX_SEED:
        raise ValueError(f"{name} must be at most {MAX_SEED}, got {shown(value)}")
    return value
