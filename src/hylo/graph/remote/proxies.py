"""The worker's side of server-mode nodesets: a proxy `Node` for each node of a subprocess, and `ServerNodesets`,
the subprocesses of one runner."""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable
from typing import Any, cast

from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import EnvCapabilities, EnvSpec, StepResult
from hylo.graph.compile import PlannedNode
from hylo.graph.executor import GraphSetupError
from hylo.graph.node import EnvCalls, Node, NodeFailure, Owner, Role, RunContext, Runtime
from hylo.graph.remote.processes import START_TIMEOUT_S, STOP_GRACE_S, Launch, NodesetServer, replica_index
from hylo.panels.remote import RemoteEnvPanelProxy

log = logging.getLogger("hylo.graph.remote")


class NodeProxy(Node):
    """A node of a server-mode nodeset as the executor sees it: each hook is a call to the nodeset's subprocess.
    Its class (one per node type) implements the optional hooks the node's own class does, and `start` always (the
    first execution after a crash restarts the subprocess there)."""

    _type: type[Node]
    split_forward = True

    def __init__(self, planned: PlannedNode, server: NodesetServer, calls: EnvCalls | None = None) -> None:
        super().__init__(planned.id, planned.config)
        self._server = server
        self._raw_config = planned.config.model_dump(mode="json") if planned.config is not None else {}
        self._pending: int | None = None
        self._run: RunContext | None = None
        self._calls = calls  # an env node's: its calls are the env's time
        self._measured = False  # a call `_calls` measures is out
        self.set_up = False

    @property
    def tag(self) -> str:
        """The replica tag of the subprocess this node lives in (`<nodeset>#<k>`)."""
        return self._server.tag

    def setup_request(self) -> dict[str, Any]:
        return {"node": self.id, "type": self._type.type_name, "config": self._raw_config}

    def setup(self, runtime: Runtime) -> None:
        """Build the node in the subprocess and set it up there (with the subprocess' own runtime); it says which of
        its hooks it wants (an agent without `on_step` costs no call per step)."""
        wants = self._server.call("setup", **self.setup_request())
        if isinstance(wants, dict):
            self.wants_signals = bool(wants.get("wants_signals", True))
            self.wants_steps = bool(wants.get("wants_steps", True))
        self.set_up = True

    def start(self, run: RunContext) -> None:
        """Restart the subprocess if it died; send the task (the graph's containers and bus stay here)."""
        self._run = run
        self._server.ensure_live()
        if self._type.start is not Node.start:
            self._call("start", Role.PLAIN, node=self.id, task=run.task)

    def begin(self, inputs: dict[str, Any]) -> None:
        """Send the forward request (the executor collects the replies of one level's nodes with `end`)."""
        if self._pending is not None:
            self._server.discard(self._pending)
            self._pending = None
        step = self._run.step if self._run is not None else 0
        self._measure(self.role)
        try:
            self._pending = self._server.send("forward", node=self.id, inputs=inputs, step=step)
        except Exception:
            self._measured_end(self.role)
            raise

    def end(self) -> dict[str, Any]:
        """The reply to the last `begin`: the node's outputs, or its exception raised again."""
        request, self._pending = self._pending, None
        if request is None:
            raise NodeFailure(f"node {self.id!r}: end() without begin()")
        try:
            result: dict[str, Any] = self._server.receive(request)
        except Exception:  # past its limit, the call is the env's timeout whatever it raised
            self._measured_end(self.role)
            raise
        self._measured_end(self.role)
        return result

    def _call(self, op: str, role: Role, **fields: Any) -> Any:
        self._measure(role)
        try:
            value = self._server.call(op, **fields)
        except Exception:
            self._measured_end(role)
            raise
        self._measured_end(role)
        return value

    def _measure(self, role: Role) -> None:
        if self._calls is not None and not self._measured:
            self._measured = self._calls.begin(role)

    def _measured_end(self, role: Role) -> None:
        if self._measured:
            self._measured = False
            assert self._calls is not None
            self._calls.end(role)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        self.begin(inputs)
        return self.end()

    def _hook(self, name: str, value: Any) -> None:
        server = self._server
        if name == "on_signal" and value in (Signal.EPISODE_RESET, Signal.RUN_START):
            server.ensure_live()
        elif server.dead is not None:
            return  # its crash was reported by the call that found it: this execution's nodes are gone
        self._call(name, Role.PLAIN, node=self.id, value=value)


def _after_step(self: NodeProxy, result: StepResult) -> None:
    self._hook("after_step", result)


def _on_signal(self: NodeProxy, signal: Signal) -> None:
    self._hook("on_signal", signal)


def _finish(self: NodeProxy, outcome: EpisodeOutcome) -> None:
    self._hook("finish", outcome)


def _close(self: NodeProxy) -> None:
    if self._server.alive and self.set_up:
        self._server.call("close", node=self.id)


_HOOKS: dict[str, Callable[..., None]] = {
    "after_step": _after_step,
    "on_signal": _on_signal,
    "finish": _finish,
    "close": _close,
}


_PROXY_CLASSES: dict[type[Node], type[NodeProxy]] = {}


def _proxy_class(cls: type[Node]) -> type[NodeProxy]:
    """The proxy class of a node type: its ports and role, and the optional hooks it implements."""
    made = _PROXY_CLASSES.get(cls)
    if made is not None:
        return made
    hooks = {name: hook for name, hook in _HOOKS.items() if getattr(cls, name) is not getattr(Node, name)}
    attrs = {"type_name": cls.type_name, "nodeset": cls.nodeset, "description": cls.description, "inputs": cls.inputs,
             "outputs": cls.outputs, "config_model": cls.config_model, "role": cls.role, "owner": cls.owner,
             "_type": cls, "__module__": __name__, **hooks}  # fmt: skip
    made = _PROXY_CLASSES[cls] = cast(type[NodeProxy], type(f"Remote[{cls.__name__}]", (NodeProxy,), attrs))
    return made


class ServerNodesets:
    """The server-mode nodesets of one runner (a `RemoteNodesets`): one subprocess per nodeset, tagged with the
    worker's index, started by the nodeset's first `proxy`.

    - `runtime`: the worker's runtime (its `worker` name gives the replica index, `allow_import` passes on)
    - `placement_benchmark`, `env_spec`, `env_capabilities`: what a non-env nodeset's subprocess binds to (an agent);
      by default the runtime's benchmark name, env spec and capabilities
    - `start_timeout_s`: how long a subprocess may take to connect and build its runtime
    - `stop_grace_s`: how long `close()` lets a subprocess close its nodes before killing it
    - `render_images`: an env nodeset's subprocess builds its env rendering camera frames (the graph needs them)
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        placement_benchmark: str | None = None,
        env_spec: EnvSpec | None = None,
        env_capabilities: EnvCapabilities | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        stop_grace_s: float = STOP_GRACE_S,
        render_images: bool = False,
    ) -> None:
        if not start_timeout_s > 0:
            raise ValueError(f"start_timeout_s must be > 0, got {start_timeout_s!r}")
        if placement_benchmark is None and runtime.benchmark is not None:
            placement_benchmark = runtime.benchmark.name
        self.index = replica_index(runtime.worker)
        self._launch = Launch(
            worker=runtime.worker,
            placement=placement_benchmark,
            env_spec=env_spec if env_spec is not None else runtime.env_spec,
            env_capabilities=env_capabilities if env_capabilities is not None else runtime.env_capabilities,
            allow_import=runtime.allow_import,
            start_timeout_s=start_timeout_s,
            stop_grace_s=stop_grace_s,
            render_images=render_images,
        )
        self._env_calls = runtime.env_calls
        self._servers: dict[str, NodesetServer] = {}
        self._panels: dict[str, RemoteEnvPanelProxy] = {}
        self._close = weakref.finalize(self, _shutdown, self._servers, self._launch)

    def proxy(self, planned: PlannedNode) -> Node:
        """The proxy of a planned node; starts its nodeset's subprocess if this is the nodeset's first node."""
        if not self._close.alive:
            raise RuntimeError("these server-mode nodesets are closed")
        containers = planned.cls.uses_containers(planned.config)
        if containers:
            raise GraphSetupError(f"node {planned.id!r} uses the graph's containers {list(containers)}, which do not "
                                  f"reach nodeset {planned.nodeset.name!r} in server mode")  # fmt: skip
        server = self._servers.get(planned.nodeset.name)
        if server is None:
            server = NodesetServer(planned.nodeset, f"{planned.nodeset.name}#{self.index}", self._launch)
            server.start()
            self._servers[planned.nodeset.name] = server
        calls = self._env_calls if planned.nodeset.owner is Owner.ENV else None
        proxy = _proxy_class(planned.cls)(planned, server, calls)
        server.proxies.append(proxy)
        return proxy

    def env_panel(self, nodeset: str) -> RemoteEnvPanelProxy | None:
        """The proxy of the env panel living in `nodeset`'s subprocess, named `<panel>#<k>` (`env_babyai#1`); None when
        that nodeset has no subprocess here (none of its nodes is in this graph) or hosts no panel (it is not a
        benchmark's env nodeset). Built on first use, the same proxy after; call it from the thread that drives the
        runner (see `RemoteEnvPanelProxy`)."""
        proxy = self._panels.get(nodeset)
        if proxy is not None:
            return proxy
        server = self._servers.get(nodeset)
        if server is None or not server.has_env_panel:
            return None
        # the transport holds no reference to these nodesets: dropping them still stops their subprocesses
        request = functools.partial(_panel_request, self._close, server, self._env_calls)
        proxy = RemoteEnvPanelProxy(request, server.tag)
        self._panels[nodeset] = proxy
        return proxy

    @property
    def replicas(self) -> dict[str, int]:
        """Tag → pid of each subprocess started (the latest one after a restart)."""
        return {server.tag: server.pid for server in self._servers.values()}

    def close(self) -> None:
        """Stop every subprocess (each closes its nodes and env); idempotent."""
        self._close()


def _panel_request(
    open_: weakref.finalize[Any, Any], server: NodesetServer, calls: EnvCalls | None, op: str, **fields: Any
) -> Any:
    """One request to the env panel in `server`'s subprocess (`open_`: its `ServerNodesets`' close), its time the
    env's (`calls`). A subprocess that died is restarted first, its nodes set up again, as the next execution would
    do; its panel then starts from the panel's defaults."""
    if not open_.alive:
        raise RuntimeError(f"nodeset {server.tag} is closed: its runner was closed")
    if calls is None or not calls.begin(Role.RESET):
        server.ensure_live()
        return server.call(op, **fields)
    try:
        server.ensure_live()
        answer = server.call(op, **fields)
    except Exception:
        calls.end(Role.RESET)
        raise
    calls.end(Role.RESET)
    return answer


def _shutdown(servers: dict[str, NodesetServer], launch: Launch) -> None:
    for server in servers.values():
        try:
            server.stop(launch.stop_grace_s)
        except Exception as exc:  # one stuck subprocess must not keep the others alive
            log.warning("nodeset %s: failed to stop: %r", server.tag, exc)
