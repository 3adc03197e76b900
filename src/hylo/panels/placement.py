"""The batch runner's side of an env panel: place each planned episode through the panel, at once, and carry out the
intents it answers.

`PanelDriver.place(task)` hands the planned `TaskInstance` to the panel's `place` (its own checks, no field-by-field
replay of what a user would do) and carries out the answer with `carry_out`, as an interactive session carries out
its hooks' answers: a `signal` intent reaches the Kernel (`episode_reset` clears the agent's episode-lifetime
containers), traced under the episode placed. The runner then runs the task it planned: the panel answers only
whether the placement moved.

The panel is any `PlacingPanel`: a local `BenchmarkPanel`, or the `RemoteEnvPanelProxy` of the panel living in a
server-mode env nodeset's subprocess.
"""

from __future__ import annotations

from typing import Any, Protocol

from hylo.core.bus import EventBus
from hylo.core.types import TaskInstance
from hylo.panels.base import PanelReply, SideEffect
from hylo.panels.intents import carry_out


class Signalled(Protocol):
    """What a panel's signal intents reach: the Kernel, or a graph's runner."""

    bus: EventBus

    def signal(self, signal: Any) -> None: ...


class PlacingPanel(Protocol):
    """What the driver places episodes through: a panel that places a planned episode at once."""

    name: str

    def place(self, task: TaskInstance) -> PanelReply:
        """Place `task`; answer `episode_reset` when the placement moved. Raises `PanelRefused` naming a bad value."""
        ...


class PanelDriver:
    """Places the episodes of one batch runner (a worker) through `panel`; `kernel` receives its signal intents."""

    def __init__(self, panel: PlacingPanel, kernel: Signalled | None = None) -> None:
        self.panel = panel
        self.kernel = kernel

    def place(self, task: TaskInstance) -> TaskInstance:
        """Place the planned episode `task` and deliver the signals its placement answers (`SignalFailed` when the
        agent fails on one); returns `task`, the episode to run. Raises `PanelRefused` naming a bad value."""
        carry_out(self.panel.place(task), _Signals(self.kernel, task))
        return task


class _Signals:
    """The batch runner as the target of a placement's intents: a signal reaches the Kernel, traced under the episode
    placed; a run intent is the runner's own business (it runs the episode it planned)."""

    def __init__(self, kernel: Signalled | None, placed: TaskInstance) -> None:
        self.kernel = kernel
        self.placed = placed

    def signal(self, name: str) -> None:
        if self.kernel is not None:
            self.kernel.bus.place(self.placed.episode_id)
            self.kernel.signal(name)

    def run(self, effect: SideEffect) -> None:
        pass
