"""What a session builds in its own thread and closes there: its episode's parts (`hylo.eval.assembly`, as a run's
worker builds its own), for interactive use: the env and the graph runner over it (the runner owns the graph's agents
and its server-mode nodesets' subprocesses), and the subprocess' panel when the env nodeset runs apart."""

from __future__ import annotations

import logging

from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.eval.assembly import EpisodeParts, Panel, Use, assemble
from hylo.graph.executor import GraphRunner
from hylo.sessions.state import SessionSetup

log = logging.getLogger(__name__)


class SessionParts:
    """A session's parts, once built (`build`), until closed (`close`)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._parts: EpisodeParts | None = None
        self.runner: GraphRunner | None = None

    @property
    def env(self) -> Environment | None:
        return self._parts.env if self._parts is not None else None

    @property
    def panel(self) -> Panel | None:
        """The panel of the subprocess the session's env nodeset runs in; None when it runs here."""
        return self._parts.panel if self._parts is not None else None

    def build(self, setup: SessionSetup, *, number: int, bus: EventBus) -> GraphRunner:
        """Build the env and the runner of `setup` (a failure closes what was built); its subprocesses are tagged
        `<nodeset>#<number>`. The live view (`setup.render`) is rendered where the env steps."""
        parts = assemble(
            setup.benchmark,
            Use.INTERACTIVE,
            worker=f"s{number}",
            bus=bus,
            max_steps=setup.step_budget or setup.plan.graph.step_budget or 1,  # set anew by each execution
            plan=setup.plan,
            shield=setup.shield,
            act_timeout_s=setup.act_timeout_s,
            allow_import=False,
            render=setup.render,
        )
        runner = parts.executor
        assert isinstance(runner, GraphRunner)  # a plan's parts run on its runner
        self._parts, self.runner = parts, runner
        return runner

    def close(self) -> None:
        """Close the runner (and its subprocesses), then the env; a failure to close is logged, not raised."""
        parts, self._parts = self._parts, None
        if parts is None:
            return
        try:
            parts.close()
        except Exception as exc:
            log.warning("%s: its runner or env failed to close: %r", self.label, exc)
