"""Putting a compiled graph to work in one worker (a batch worker, an interactive session): its runtime over the
worker's env, its server-mode nodesets, its runner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.core.errors import HyloError
from hylo.core.shield import SafetyShield
from hylo.core.types import NodesetMode
from hylo.envs.benchmark import Benchmark
from hylo.graph.agent_nodes import close_agents, graph_needs_images
from hylo.graph.compile import Plan
from hylo.graph.executor import GraphRunner
from hylo.graph.node import EnvCalls, Runtime


def env_in_server_mode(plan: Plan, benchmark: Benchmark) -> bool:
    """Whether the graph runs `benchmark`'s env nodeset in a subprocess (the worker's own env then only gives the
    spec)."""
    options = plan.graph.nodesets.get(benchmark.name)
    return options is not None and options.mode == NodesetMode.SERVER


def assemble_runner(
    plan: Plan,
    benchmark: Benchmark,
    env: Environment,
    *,
    worker: str,
    shield: SafetyShield,
    bus: EventBus,
    max_steps: int | None,
    act_timeout_s: float | None,
    agents: dict[str, Any],
    allow_import: bool = True,
    on_images: Callable[[], None] | None = None,
    render_images: bool = False,
    images_withheld: bool = False,
    env_calls: EnvCalls | None = None,
) -> GraphRunner:
    """The runner of `plan` in worker `worker`: its env nodes use `env`; each server-mode nodeset gets one
    subprocess, tagged with the worker's index. `agents` are those `build_agents` made for its reason nodes; the
    ones no node takes (a server-mode nodeset builds its own) are closed. `render_images`: a server-mode env nodeset
    renders camera frames even when no node of the graph asks for them (a live view shows them); `images_withheld`:
    no agent is given any (`--no-images`). `env_calls` sees the calls into a server-mode env nodeset's subprocess."""

    def envs(name: str) -> Environment:
        if name != benchmark.name:
            raise HyloError(f"this worker runs benchmark {benchmark.name!r}, not {name!r}")
        return env

    apart = env_in_server_mode(plan, benchmark)
    runtime = Runtime(
        worker=worker,
        on_images=on_images,
        envs=envs,
        benchmark=benchmark,
        env_spec=env.spec,
        env_capabilities=env.capabilities,
        privileged=env.privileged_state if env.capabilities.privileged_state and not apart else None,
        allow_import=allow_import,
        agents=agents,
        env_calls=env_calls,
    )
    remote = None
    if any(options.mode == NodesetMode.SERVER for options in plan.graph.nodesets.values()):
        from hylo.graph.remote import ServerNodesets  # start-up time: subprocess hosts, server mode only

        needed = graph_needs_images(plan, agents, withheld=images_withheld)
        remote = ServerNodesets(runtime, render_images=render_images or needed)
    try:
        return GraphRunner(
            plan,
            runtime,
            shield=shield,
            max_steps=max_steps,
            act_timeout_s=act_timeout_s,
            bus=bus,
            auto_episode_reset=False,
            remote=remote,
        )
    finally:
        close_agents(agents)
