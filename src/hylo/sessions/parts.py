"""What a session builds in its own thread and closes there: its env and the graph runner over it (the runner owns
the graph's agents and its server-mode nodesets' subprocesses)."""

from __future__ import annotations

import logging

from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.core.shield import SafetyShield
from hylo.graph.executor import GraphRunner
from hylo.sessions.state import SessionSetup

log = logging.getLogger(__name__)


class SessionParts:
    """A session's env and runner, each kept as soon as it exists, so that a build failing halfway closes what it
    had built."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.env: Environment | None = None
        self.runner: GraphRunner | None = None

    def build(self, setup: SessionSetup, *, number: int, bus: EventBus) -> GraphRunner:
        """Build the env and the runner of `setup`; its subprocesses are tagged `<nodeset>#<number>`."""
        from hylo.graph.agent_nodes import build_agents, close_agents, graph_needs_images
        from hylo.graph.assemble import assemble_runner, env_in_server_mode

        benchmark = setup.benchmark
        agents = build_agents(setup.plan, benchmark, allow_import=False)
        apart = env_in_server_mode(setup.plan, benchmark)
        # Frames for the live view, or for the nodes that get them (an agent that declares nothing does); a reason
        # node whose agent declares needs_images=False is handed its observations without them, as in `hylo eval`.
        render = not apart and (setup.render or graph_needs_images(setup.plan, agents))
        try:
            env = benchmark.make_env(render_images=render)
        except BaseException:
            close_agents(agents)
            raise
        self.env = env
        shield = SafetyShield() if setup.shield else SafetyShield.permissive()
        runner = assemble_runner(
            setup.plan,
            benchmark,
            env,
            worker=f"s{number}",
            shield=shield,
            bus=bus,
            max_steps=setup.step_budget or setup.plan.graph.step_budget or 1,  # set anew by each execution
            act_timeout_s=setup.act_timeout_s,
            agents=agents,
            allow_import=False,
            render_images=setup.render,
        )
        self.runner = runner
        return runner

    def close(self) -> None:
        """Close the runner (and its subprocesses), then the env; a failure to close is logged, not raised."""
        runner, env = self.runner, self.env
        try:
            if runner is not None:
                runner.close()
        except Exception as exc:
            log.warning("%s: its runner failed to close: %r", self.label, exc)
        try:
            if env is not None:
                env.close()
        except Exception as exc:
            log.warning("%s: its env failed to close: %r", self.label, exc)
