"""The panel every benchmark gets with no extra code: the cascade benchmark → split → task → episode_index.

It is the one control plane for episode placement: the batch runner places every episode through it exactly as a
user would (`on_field_change("episode_index", i)`, then `on_action("play")`), and an interactive session does the
same from the canvas. A committed change of placement answers with the `episode_reset` signal intent.
"""

from __future__ import annotations

from typing import Any

from hylo.core.errors import UnknownChoice, shown
from hylo.core.signals import Signal
from hylo.core.types import MAX_SEED, TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.panels.base import PLAYBACK_ACTIONS, BaseEnvPanel, EnvPanelField, Placement, intent

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

    async def on_load(self) -> dict[str, Any]:
        available, why = self.benchmark.available()
        p = self.placement
        return {
            "available": available,
            "status": why or ("ready" if available else "unavailable"),
            "step_budget": self.default_step_budget or self.benchmark.default_step_budget(p.task),
            "benchmark": p.benchmark,
            "split": p.split,
            "task": p.task,
            "episode_index": p.episode_index,
            "seed": p.seed,
            "episode_id": self.task_instance().episode_id,
        }

    async def on_options(self, name: str) -> dict[str, Any]:
        if name == "task":
            return intent(options=self.benchmark.tasks(self.placement.split))
        return await super().on_options(name)

    async def on_field_change(self, name: str, value: Any) -> dict[str, Any]:
        p = self.placement
        try:
            if name == "benchmark":
                if value != self.benchmark.name:
                    raise UnknownChoice("benchmark of this panel", value, [self.benchmark.name])
                return intent()
            if name == "split":
                split = self.benchmark.check_split(str(value))
                if split == p.split:
                    return intent()
                tasks = self.benchmark.tasks(split)
                p.split, p.task = split, (p.task if p.task in tasks else tasks[0])
            elif name == "task":
                (task,) = self.benchmark.check_tasks(p.split, [str(value)])
                if task == p.task:
                    return intent()
                p.task = task
            elif name in ("episode_index", "seed"):
                number = _non_negative_int(name, value)
                if number == getattr(p, name):
                    return intent()
                setattr(p, name, number)
            else:
                return intent(ok=False, error=f"unknown field {name!r}; choose from: {[f.name for f in self.fields]}")
        except ValueError as exc:
            return intent(ok=False, error=str(exc))
        placed = self.task_instance()
        return intent(
            "signal",
            signal_name=Signal.EPISODE_RESET.value,
            signal_payload={"split": p.split, "task": p.task, "episode_index": p.episode_index, "seed": p.seed}
            | {"changed": name, "episode_id": placed.episode_id},
        )

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
