"""The framework side of an env panel (001 §6): push field values, carry out the intents the hooks return.

The batch runner places every episode through the panel, exactly as a user would: field changes in cascade order
(split → task → seed → episode_index), then `on_action("play")`, their intents carried out by `carry_out` (as an
interactive session's are). A `signal` intent reaches the Kernel
(`episode_reset` clears the agent's episode-lifetime containers); `play` must answer `run_start`.

The panel is any `PlacingPanel`: a local `BenchmarkPanel`, or the `RemoteEnvPanelProxy` of the panel living in a
server-mode env nodeset's subprocess (then the current values come from its `on_load()`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from hylo.core.bus import EventBus
from hylo.core.errors import HyloError
from hylo.core.loops import run_to_end
from hylo.core.types import TaskInstance
from hylo.panels.base import BaseEnvPanel, Placement, SideEffect
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.intents import UnknownIntent, carry_out

T = TypeVar("T")


class PlacementError(HyloError):
    """A panel refused a placement (its message names the bad value)."""


class Signalled(Protocol):
    """What a panel's signal intents reach: the Kernel, or a graph's runner."""

    bus: EventBus

    def signal(self, signal: Any) -> None: ...


class PlacingPanel(Protocol):
    """What the driver places episodes through: a benchmark panel's hooks and the task it places. A panel with a
    `placement` (a local `BenchmarkPanel`) has its current values read from it; any other from `on_load()`."""

    name: str

    async def on_load(self) -> dict[str, Any]: ...

    async def on_field_change(self, name: str, value: Any) -> dict[str, Any]: ...

    async def on_action(self, name: str) -> dict[str, Any]: ...

    async def on_options(self, name: str) -> dict[str, Any]: ...

    def task_instance(self) -> TaskInstance: ...


class PanelDriver:
    """Drives one panel for its owner (the batch runner of one worker); `kernel` receives its signal intents."""

    def __init__(self, panel: PlacingPanel, kernel: Signalled | None = None) -> None:
        self.panel = panel
        self.kernel = kernel
        self._loop = asyncio.new_event_loop()
        self._eager = _never_suspends(panel)

    def close(self) -> None:
        self._loop.close()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` to its end: at once when the panel's hooks never suspend (a local `BenchmarkPanel`, whose
        hooks are async only by contract), else on the driver's event loop (`run_to_end`: from inside a running
        loop too, as a notebook's)."""
        if not self._eager:
            return run_to_end(self._loop, work)
        try:
            work.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        work.close()
        raise RuntimeError(f"panel {self.panel.name!r} suspended in a hook declared never to suspend")

    def _call(self, hook: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
        return self._run(self._checked(hook))

    async def _checked(self, hook: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
        result = await hook
        if not result.get("ok", True):
            raise PlacementError(str(result.get("error") or f"panel {self.panel.name!r} refused: {result}"))
        return result

    def load(self) -> dict[str, Any]:
        return self._call(self.panel.on_load())

    def set_field(self, name: str, value: Any) -> dict[str, Any]:
        return self._run(self._set_field(name, value))

    async def _set_field(self, name: str, value: Any) -> dict[str, Any]:
        result = await self._checked(self.panel.on_field_change(name, value))
        self._apply(result)
        return result

    def preset(self, **values: Any) -> None:
        """Set fields before the first placement, in the order given, without carrying out their intents: where the
        panel starts (nothing runs yet, so there is no episode to signal). Raises `PlacementError` on a refusal."""
        for name, value in values.items():
            self._call(self.panel.on_field_change(name, value))

    def _apply(self, result: dict[str, Any]) -> None:
        self._carry_out(result, _Signals(self, deliver=True))

    def _carry_out(self, result: dict[str, Any], target: _Signals) -> SideEffect | None:
        try:
            return carry_out(result, target)
        except UnknownIntent as exc:
            raise PlacementError(f"panel {self.panel.name!r}: {exc}") from None

    def _signal(self, name: str, placed: TaskInstance) -> None:
        """Forward a signal intent to the Kernel, traced under the episode now placed. Raises `SignalFailed` when
        the agent fails on it."""
        if self.kernel is not None:
            self.kernel.bus.place(placed.episode_id)
            self.kernel.signal(name)

    def place(self, split: str, task: str, index: int, seed: int) -> TaskInstance:
        """Place one episode and press Play; returns the placed task."""
        return self._run(self._place(split, task, index, seed))

    async def _current(self) -> dict[str, Any]:
        """The panel's current field values."""
        placement = getattr(self.panel, "placement", None)
        if isinstance(placement, Placement):
            return {"split": placement.split, "task": placement.task, "seed": placement.seed}
        return await self._checked(self.panel.on_load())

    async def _place(self, split: str, task: str, index: int, seed: int) -> TaskInstance:
        current = await self._current()
        signals = _Signals(self, deliver=False)
        for name, value in (("split", split), ("task", task), ("seed", seed), ("episode_index", index)):
            # the cascade fields a user would touch, then the episode, which is picked on the panel every time
            if name == "episode_index" or current.get(name) != value:
                result = await self._checked(self.panel.on_field_change(name, value))
                moved = self._carry_out(result, signals) is SideEffect.SIGNAL
                if moved and name != "episode_index":  # a committed change may move the fields after it (split → task)
                    current = await self._current()
        # One committed change, however many fields moved: each signal is delivered once, for the placed episode.
        placed = self.panel.task_instance()
        for name in dict.fromkeys(signals.pending):
            self._signal(name, placed)
        play = await self._checked(self.panel.on_action("play"))
        if play.get("side_effect") != SideEffect.RUN_START:  # the episode Play placed is run by the caller
            raise PlacementError(f"panel {self.panel.name!r} answered play with {play.get('side_effect')!r}")
        return placed


def _never_suspends(panel: PlacingPanel) -> bool:
    """Whether every hook the driver calls is `BenchmarkPanel`'s own: plain code behind `async def`, which never
    awaits anything that suspends (a subclass that overrides one, or a remote proxy, runs on the event loop)."""
    if not isinstance(panel, BenchmarkPanel):
        return False
    kind = type(panel)
    return (
        kind.on_load is BenchmarkPanel.on_load
        and kind.on_field_change is BenchmarkPanel.on_field_change
        and kind.on_action is BaseEnvPanel.on_action
    )


class _Signals:
    """The batch runner's side of a panel's intents: a signal reaches the Kernel, at once (`deliver`) or once the
    episode is placed (`pending`); a run intent is the runner's own business (it runs the episode Play placed)."""

    def __init__(self, driver: PanelDriver, *, deliver: bool) -> None:
        self.driver = driver
        self.deliver = deliver
        self.pending: list[str] = []

    def signal(self, name: str) -> None:
        if not self.deliver:
            self.pending.append(name)
        elif self.driver.kernel is not None:
            self.driver._signal(name, self.driver.panel.task_instance())

    def run(self, effect: SideEffect) -> None:
        pass
