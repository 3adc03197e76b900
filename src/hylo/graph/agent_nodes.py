"""The `agents` nodeset: `reason` makes any agent a node that produces action chunks.

`reason` fires only when the execution's chunk executor is empty (as the Kernel calls `act`), and carries the
agent's whole lifecycle: `reset(ctx)` before its first act of an execution (after the env's reset), `on_step` after
every env step, `on_signal`, `on_episode_end` and `close`. The agent's own state containers join the graph's, so
signals clear them exactly as in the Kernel.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hylo.agents.registry import AgentSpecError, make_agent, vet_agent
from hylo.core.agent import AgentBase, check_compatible, gets_images, requires_images
from hylo.core.chunk import as_chunk
from hylo.core.context import EpisodeContext
from hylo.core.errors import IncompatibleComponents
from hylo.core.imageless import spec_without_images, without_images
from hylo.core.signals import ContainerSpec, Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import Observation, StepResult
from hylo.envs.benchmark import Benchmark
from hylo.graph.compile import Plan
from hylo.graph.env_nodes import EnvObserveImage
from hylo.graph.node import Node, NodeFailure, Nodeset, Owner, Port, Role, RunContext, Runtime
from hylo.graph.wires import Wire


class ReasonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, description="a registered agent, 'expert', or module:Class (not over HTTP)")
    args: dict[str, Any] = Field(default_factory=dict, description="the agent's keyword arguments")
    remember: str | None = Field(
        default=None, description="a state container this node appends each decision to (step, actions)"
    )


class Reason(Node):
    """An agent as a node: observation in, an action chunk out. Wire `memory` to give the agent a container's
    value as the observation's `memory` key."""

    type_name = "reason"
    nodeset = "agents"
    role = Role.POLICY
    owner = Owner.AGENT
    config_model = ReasonConfig
    inputs = (
        Port("observation", Wire.OBSERVATION),
        Port("memory", Wire.JSON, required=False, description="shown to the agent as observation['memory']"),
    )
    outputs = (Port("chunk", Wire.CHUNK),)

    @classmethod
    def uses_containers(cls, config: BaseModel | None) -> tuple[str, ...]:
        return (config.remember,) if isinstance(config, ReasonConfig) and config.remember else ()

    def setup(self, runtime: Runtime) -> None:
        config = self.config
        assert isinstance(config, ReasonConfig)
        if runtime.env_spec is None:
            raise NodeFailure(f"node {self.id!r}: an agent needs the env it acts in, and this graph has none")
        built = runtime.agents.pop(self.id, None)
        self.agent = (
            built
            if built is not None
            else make_agent(config.agent, config.args, runtime.benchmark, allow_import=runtime.allow_import)
        )
        check_compatible(runtime.env_spec, self.agent, runtime.env_capabilities)
        requirements = getattr(self.agent, "requirements", None)
        if requirements is not None and requirements.privileged_state and runtime.privileged is None:
            raise IncompatibleComponents(
                f"node {self.id!r}: agent {config.agent!r} reads privileged simulator state, which it can only do "
                "beside the env it reads (here the agents nodeset or the env nodeset runs in server mode)"
            )
        if requires_images(self.agent) and runtime.benchmark is not None:
            runtime.need_images(runtime.benchmark.name)
        # An agent that gets no images sees none, whatever else renders (a live view, an observe_image node)
        self._imageless = not gets_images(self.agent)
        self._spec = spec_without_images(runtime.env_spec) if self._imageless else runtime.env_spec
        self._privileged = runtime.privileged
        self._act = self.agent.act
        self._reset = getattr(self.agent, "reset", None)
        self._on_step = getattr(self.agent, "on_step", None)
        self._on_signal = getattr(self.agent, "on_signal", None)
        self._on_end = getattr(self.agent, "on_episode_end", None)
        self._remember = config.remember
        self.wants_signals = self._on_signal is not None
        self.wants_steps = (
            self._on_step is not None and getattr(self._on_step, "__func__", None) is not AgentBase.on_step
        )

    @property
    def container_specs(self) -> tuple[ContainerSpec, ...]:
        """The agent's own state containers, which join the graph's."""
        return tuple(getattr(self.agent, "containers", ()) or ())

    def start(self, run: RunContext) -> None:
        self._run = run
        self._ctx = EpisodeContext(
            seed=run.seed,
            env_spec=self._spec,
            task=run.task,
            containers=run.containers,
            bus=run.bus,
            read_privileged=self._privileged,
        )
        self._pending_reset = self._reset is not None
        self._memory = run.containers[self._remember] if self._remember else None

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        if self._pending_reset:
            self._pending_reset = False
            self._reset(self._ctx)  # type: ignore[misc]
        obs = inputs["observation"]
        if self._imageless:
            obs = without_images(obs)
        if "memory" in inputs:
            obs = Observation(obs, memory=inputs["memory"])
        chunk = as_chunk(self._act(obs))
        if self._memory is not None:
            self._memory.write({"step": self._run.step, "actions": [_plain(a) for a in chunk.actions]})
        return {"chunk": chunk}

    def after_step(self, result: StepResult) -> None:
        if self._on_step is not None:
            self._on_step(result)

    def on_signal(self, signal: Signal) -> None:
        if self._on_signal is not None:
            self._on_signal(signal)

    def finish(self, outcome: EpisodeOutcome) -> None:
        if self._on_end is not None:
            self._on_end(outcome)

    def close(self) -> None:
        close = getattr(getattr(self, "agent", None), "close", None)
        if callable(close):
            close()


def reason_agents(plan: Plan) -> dict[str, ReasonConfig]:
    """The agent (name and arguments) of each `reason` node of a graph, by node id."""
    return {node.id: node.config for node in plan.nodes.values() if isinstance(node.config, ReasonConfig)}


def vet_agents(plan: Plan, benchmark: Benchmark | None, *, allow_import: bool = True) -> list[str]:
    """Check every `reason` node's agent and arguments as `hylo.agents.registry.vet_agent` does (without building
    those that declare their `Args`); returns the URLs they would connect to."""
    urls: list[str] = []
    for node_id, config in reason_agents(plan).items():
        try:
            urls += vet_agent(config.agent, config.args, benchmark, allow_import=allow_import)
        except AgentSpecError as exc:
            raise AgentSpecError(f"node {node_id!r}: {exc}") from None
    return urls


def build_agents(plan: Plan, benchmark: Benchmark | None, *, allow_import: bool = True) -> dict[str, Any]:
    """The agent of each `reason` node of a graph, by node id, built once: a worker asks them what they need
    before it builds its env, and hands them on to their nodes (`Runtime.agents`)."""
    built: dict[str, Any] = {}
    try:
        for node_id, config in reason_agents(plan).items():
            built[node_id] = make_agent(config.agent, config.args, benchmark, allow_import=allow_import)
    except BaseException:
        close_agents(built)
        raise
    return built


def close_agents(agents: dict[str, Any]) -> None:
    """Close the agents no node took (those of a server-mode nodeset build their own in its subprocess)."""
    for agent in agents.values():
        close = getattr(agent, "close", None)
        if callable(close):
            close()
    agents.clear()


def graph_needs_images(plan: Plan, agents: dict[str, Any], *, withheld: bool = False) -> bool:
    """Whether a graph's nodes need camera frames, so that its env is built rendering them: an `observe_image` node,
    or a `reason` node whose agent (of `agents`, see `build_agents`) gets images (`gets_images`: it declares
    `needs_images` True, or nothing). `withheld` (a run's `--no-images`): none does, and a graph with a node that
    requires them is refused."""
    observers = [node.id for node in plan.nodes.values() if issubclass(node.cls, EnvObserveImage)]
    if not withheld:
        return bool(observers) or any(gets_images(agent) for agent in agents.values())
    needing = observers + [node_id for node_id, agent in agents.items() if requires_images(agent)]
    if needing:
        raise IncompatibleComponents(
            f"graph {plan.graph.name!r}: node {needing[0]!r} needs camera images, and --no-images withholds them"
        )
    return False


def _plain(action: Any) -> Any:
    tolist = getattr(action, "tolist", None)
    return tolist() if callable(tolist) else action


AGENTS = Nodeset("agents", (Reason,), "Any agent as a reason node producing action chunks.", Owner.AGENT)
