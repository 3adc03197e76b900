"""Nodes: a class per node type, with typed input and output ports, an optional config model and one `forward`.

A node fails by raising. `forward` takes a dict of its input values (port name → value; an unfilled optional port is
absent) and returns a dict of output values; a result that lacks a required output or carries an undeclared one is
an error of that node, reported with its id. `forward` may be a coroutine function: nodes of one band level whose
inputs are ready run concurrently.

Lifecycle hooks (all optional): `setup(runtime)` once per worker, `start(run)` at each execution's run_start,
`after_step(result)` after each env step, `on_signal(signal)`, `finish(outcome)` at run_end, `close()` at shutdown.

A `Nodeset` (a named package of node types) is defined here too, so that the modules defining nodes and the registry
that finds nodesets by name (`hylo.graph.nodesets`) each import this module and not each other.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ValidationError

from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.core.errors import HyloError, HyloFailure
from hylo.core.signals import ContainerSet, Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import EnvCapabilities, EnvSpec, StepResult, TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.graph.wires import Wire


@dataclass(frozen=True, slots=True)
class Port:
    """One input or output of a node: its name (the edge handle), wire type, and whether it must be filled."""

    name: str
    wire: Wire = Wire.ANY
    required: bool = True
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "wire": self.wire.value, "required": self.required, "description": self.description}


class Role(StrEnum):
    """What the executor does with a node besides firing it."""

    PLAIN = "plain"
    RESET = "reset"  # the env's idempotent ensure-live; pre-loop, once per execution
    OBSERVE = "observe"  # a pure read of the env
    POLICY = "policy"  # produces action chunks; fires only when the execution's chunk executor is empty
    ACTUATOR = "actuator"  # advances the env; its `action` input is served by the chunk executor through the shield
    EVALUATE = "evaluate"  # the verdict: after-loop, once
    LOOP_IN = "loop_in"
    LOOP_OUT = "loop_out"


class Owner(StrEnum):
    """Whose fault a node's crash is: an env node's → `infra_invalid`, any other's → `error`."""

    ENV = "env"
    AGENT = "agent"
    GRAPH = "graph"


class NodeFailure(HyloFailure):
    """A node broke its contract (a result that is not a dict of its declared outputs)."""


class EnvCalls(Protocol):
    """Told when a call into a server-mode env nodeset's subprocess begins and ends, so that a worker counts its time
    as the env's, as it does its own env's calls. `begin` says whether it measures the call (then `end` follows);
    either may raise to end the execution (a limit passed)."""

    def begin(self, role: Role) -> bool: ...

    def end(self, role: Role) -> None: ...


@dataclass
class Runtime:
    """What a node may use when it is set up, once per worker: the env of a benchmark (built once and shared by the
    worker's env nodes), the placement's benchmark and env spec (an agent binds to them), and whether import paths
    are allowed (never over HTTP)."""

    worker: str = "main"
    envs: Callable[[str], Environment] | None = None
    benchmark: Benchmark | None = None
    env_spec: EnvSpec | None = None
    env_capabilities: EnvCapabilities | None = None
    privileged: Callable[[str], Any] | None = None
    allow_import: bool = True
    on_images: Callable[[], None] | None = None
    agents: dict[str, Any] = field(default_factory=dict)
    """Agents built already for `reason` nodes, by node id (a node takes its own; see `build_agents`)."""
    env_calls: EnvCalls | None = None
    """Sees the calls into a server-mode env nodeset's subprocess (a worker's meter)."""

    def env(self, benchmark: str) -> Environment:
        if self.envs is None:
            raise RuntimeError(f"no env of benchmark {benchmark!r} in this runtime")
        return self.envs(benchmark)

    def need_images(self, benchmark: str) -> None:
        """A node needs camera frames in the observations of `benchmark`'s env: turn its rendering on (through
        `on_images` when the worker manages it, e.g. beside a video recorder)."""
        if self.on_images is not None:
            self.on_images()
            return
        if self.envs is None:  # a subprocess without the env: whoever built the env decided (graph_needs_images)
            return
        self.env(benchmark).render_images = True  # an env that cannot render ignores it


@dataclass
class RunContext:
    """What a node sees of one execution: the placed task, its seed, the graph's state containers and the trace."""

    task: TaskInstance
    containers: ContainerSet = field(default_factory=ContainerSet)
    bus: EventBus = field(default_factory=EventBus)
    step: int = 0
    read_privileged: Callable[[str], Any] | None = None

    @property
    def seed(self) -> int:
        return self.task.seed


class Node:
    """Base of every node type. Subclasses set `type_name`, `inputs`, `outputs` (or override `ports` when the ports
    depend on the config), optionally `config_model`, and implement `forward`."""

    type_name: ClassVar[str] = ""
    nodeset: ClassVar[str] = ""
    description: ClassVar[str] = ""
    inputs: ClassVar[tuple[Port, ...]] = ()
    outputs: ClassVar[tuple[Port, ...]] = ()
    config_model: ClassVar[type[BaseModel] | None] = None
    role: ClassVar[Role] = Role.PLAIN
    owner: ClassVar[Owner] = Owner.GRAPH
    wants_signals: bool = True
    wants_steps: bool = True
    """A node that implements `on_signal` / `after_step` may turn them off per instance (an agent without the hook):
    the executor then skips the call."""
    split_forward: ClassVar[bool] = False
    """True for a node whose `forward` is `begin(inputs)` then `end() -> outputs` (a request to another process):
    the executor sends the requests of one level before it waits for any reply."""

    def __init__(self, node_id: str, config: BaseModel | None = None) -> None:
        self.id = node_id
        self.config = config

    # -- the type ------------------------------------------------------------------------------------------------

    @classmethod
    def parse_config(cls, raw: Mapping[str, Any]) -> BaseModel | None:
        """The node's config, validated; raises ValueError naming the bad field."""
        if cls.config_model is None:
            if raw:
                raise ValueError(f"node type {cls.type_name!r} takes no config, got keys {sorted(raw)}")
            return None
        try:
            return cls.config_model.model_validate(dict(raw))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}" for err in exc.errors()
            )
            raise ValueError(f"bad config for {cls.type_name!r}: {problems}") from None

    @classmethod
    def ports(cls, config: BaseModel | None) -> tuple[tuple[Port, ...], tuple[Port, ...]]:
        """The input and output ports of a node of this type with `config`."""
        return cls.inputs, cls.outputs

    @classmethod
    def uses_containers(cls, config: BaseModel | None) -> tuple[str, ...]:
        """The names of the graph's state containers a node with `config` reads or writes (checked when the graph
        is validated)."""
        return ()

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The type's description for the canvas: ports, config schema, role."""
        config = cls.config_model.model_json_schema() if cls.config_model is not None else None
        try:
            inputs, outputs = cls.ports(cls.config_model.model_validate({}) if cls.config_model else None)
            dynamic = cls.ports is not Node.ports.__func__  # type: ignore[attr-defined]
        except (ValidationError, ValueError):
            inputs, outputs, dynamic = cls.inputs, cls.outputs, True
        return {
            "type": cls.type_name,
            "nodeset": cls.nodeset,
            "description": cls.description or (inspect.getdoc(cls) or "").split("\n\n")[0],
            "role": cls.role.value,
            "owner": cls.owner.value,
            "inputs": [p.to_json() for p in inputs],
            "outputs": [p.to_json() for p in outputs],
            "dynamic_ports": dynamic,
            "config": config,
            "async": inspect.iscoroutinefunction(cls.forward),
        }

    # -- the instance ---------------------------------------------------------------------------------------------

    def setup(self, runtime: Runtime) -> None:
        """Once per worker, before the first execution (bind the env, build an agent)."""

    def start(self, run: RunContext) -> None:
        """At each execution's start, after run_start."""

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        raise NodeFailure(f"node type {self.type_name!r} does not implement forward")

    def after_step(self, result: StepResult) -> None:
        """After each env step of the execution (an agent's `on_step`)."""

    def on_signal(self, signal: Signal) -> None:
        """A lifecycle signal reached the execution (the graph's containers are cleared by the executor)."""

    def finish(self, outcome: EpisodeOutcome) -> None:
        """At run_end, with the execution's outcome."""

    def close(self) -> None:
        """Once, when the worker shuts down."""


def overrides(node: Node, hook: str) -> bool:
    """Whether `node`'s class implements `hook` (the executor skips hooks nobody implements)."""
    return getattr(type(node), hook) is not getattr(Node, hook)


class NodesetError(HyloError):
    """A nodeset that cannot be loaded or is malformed (its message names it and why)."""


@dataclass(frozen=True)
class Nodeset:
    """A named package of node types. `owner` says whose fault a crash of the nodeset is when it runs in a
    subprocess of its own: an env nodeset's → `infra_invalid`, an agent's → `error`."""

    name: str
    nodes: tuple[type[Node], ...]
    description: str = ""
    owner: Owner = Owner.GRAPH
    source: str | None = None
    """`module:attr` of this nodeset when it is defined in code rather than registered: how a server-mode subprocess
    finds it."""

    def __post_init__(self) -> None:
        for cls in self.nodes:
            if not cls.type_name:
                raise NodesetError(f"nodeset {self.name!r}: node class {cls.__name__} has no type_name")

    @functools.cached_property
    def types(self) -> dict[str, type[Node]]:
        return {cls.type_name: cls for cls in self.nodes}
