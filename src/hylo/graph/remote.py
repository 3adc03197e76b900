"""Server mode for nodesets: a nodeset the graph sets to `{"mode": "server"}` runs in a subprocess of its own
(`python -m hylo.graph.host`), one per worker, tagged `<nodeset>#<k>` where k is the worker's index (`w1` and its
replacements `w1.2`, `w1.3` → 1; `main` → 0).

The worker reaches it over a unix-domain socket in a private temporary directory (removed as soon as the
subprocess has connected): length-prefixed msgpack frames,
each request answered by one reply, in order. Arrays of bool, integer and float dtypes travel raw (the vla-eval
codec's encoding); tuples, numpy scalars, observations, action chunks, tasks, step results, outcomes and signals keep
their types; anything else travels pickled (both ends are this worker and its own child).

Each node of the nodeset gets a proxy in the worker, a `Node` that forwards the node's hooks:

- `setup`: the node is built and set up in the subprocess, with a runtime of the subprocess' own: an env nodeset
  builds its benchmark's env there (shared by its env nodes); any other nodeset gets the placement's benchmark and
  the worker's env spec and capabilities. Privileged simulator state never reaches a subprocess.
- `start`: the task only. The graph's state containers and its trace bus stay in the worker, so a node that uses a
  container cannot run in server mode; the subprocess keeps its nodes' own containers (an agent's), cleared by the
  signals its nodes receive.
- `forward` (as `begin` + `end`, which the executor overlaps across the nodes of one level), `after_step`,
  `on_signal`, `finish` and `close`, each only if the node's class implements it.

A node's exception comes back with its type name and message, the subprocess' traceback as its cause;
`InvalidAction`, `SimulationDiverged`, `AgentTimeout`, `IncompatibleComponents` and `NodeFailure` come back as
themselves, so the executor gives the statuses it gives a local node. A subprocess that dies during a call
(a segfault, `os._exit`, SIGKILL) raises `NodesetCrashed` naming how it died, and the executor ends the episode
(`infra_invalid` for an env nodeset, `error` for any other); the next execution starts a new subprocess and sets its
nodes up in it again.

An env nodeset that is a benchmark's also hosts its benchmark's env panel in the subprocess, beside the env:
`ServerNodesets.env_panel(nodeset)` gives the worker a `RemoteEnvPanelProxy` of it, named `<panel>#<k>`
(`env_babyai#1`), whose hooks travel over the same connection (one request in flight, as ever). A panel request to
a subprocess that died restarts it first, as the next execution would; the new subprocess' panel starts from its
defaults.

A subprocess dies with its worker (Linux: PR_SET_PDEATHSIG, which the kernel sends when the *thread* that started it
ends, so start it from a thread that outlives the runner) and when its socket closes; `close()` asks each to stop,
kills the ones that do not within `stop_grace_s`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import pickle
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NoReturn, cast

import msgpack
import numpy as np

from hylo.bridges.vlaeval_protocol import decode_array, encode_array
from hylo.core.chunk import ActionChunk
from hylo.core.errors import AgentTimeout, IncompatibleComponents, InvalidAction, SimulationDiverged
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.graph.compile import PlannedNode
from hylo.graph.executor import GraphSetupError, NodesetCrashed
from hylo.graph.node import EnvCalls, Node, NodeFailure, Nodeset, Owner, Role, RunContext, Runtime
from hylo.panels.remote import RemoteEnvPanelProxy

log = logging.getLogger(__name__)

START_TIMEOUT_S = 300.0
"""How long a subprocess may take to connect and build its nodeset's runtime (an env, say) before it counts as
failed."""

STOP_GRACE_S = 5.0
"""How long a subprocess may take to close its nodes and env when asked to stop before it is killed."""

POLL_S = 1.0
"""While the worker waits for a reply, how often it checks that the subprocess still lives (a grandchild that
inherited the socket would otherwise hide its death)."""

CRASH_WAIT_S = 5.0
"""How long the worker waits for a subprocess whose connection broke to exit, to learn how it died."""

_HEADER = struct.Struct(">I")
_TAG = "__hylo__"
_ARRAY_KINDS = frozenset("biuf")


# -- the wire ---------------------------------------------------------------------------------------------------------


def _encode(obj: Any) -> Any:
    """msgpack's `default` (with `strict_types`, so subclasses and tuples come here too)."""
    if isinstance(obj, np.ndarray) and obj.dtype.kind in _ARRAY_KINDS:
        return encode_array(obj)
    if isinstance(obj, np.generic) and obj.dtype.kind in _ARRAY_KINDS:
        return {_TAG: "scalar", "v": encode_array(np.asarray(obj))}
    kind = type(obj)
    if kind is tuple:
        return {_TAG: "tuple", "v": list(obj)}
    if kind is MappingProxyType:
        return dict(obj)
    if kind is Observation:
        return {_TAG: "obs", "v": dict(obj)}
    if kind is ActionChunk:
        return {_TAG: "chunk", "v": list(obj.actions), "n": obj.execution_steps}
    if kind is StepResult:
        return {_TAG: "step", "v": list(obj)}
    if kind is TaskInstance or kind is EpisodeOutcome:
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        if kind is EpisodeOutcome:
            fields["status"] = obj.status.value
        return {_TAG: kind.__name__, "v": fields}
    if kind is Signal:
        return {_TAG: "signal", "v": obj.value}
    try:
        return {_TAG: "pickle", "v": pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)}
    except Exception as exc:
        raise TypeError(f"a {kind.__name__} cannot travel to or from a server-mode nodeset: {exc}") from None


_DECODERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "scalar": lambda m: m["v"][()],
    "tuple": lambda m: tuple(m["v"]),
    "obs": lambda m: Observation(m["v"]),
    "chunk": lambda m: ActionChunk(m["v"], m["n"]),
    "step": lambda m: StepResult(*m["v"]),
    "TaskInstance": lambda m: TaskInstance(**m["v"]),
    "EpisodeOutcome": lambda m: EpisodeOutcome(**{**m["v"], "status": EpisodeStatus(m["v"]["status"])}),
    "signal": lambda m: Signal(m["v"]),
    "pickle": lambda m: pickle.loads(m["v"]),
}


def _decode(obj: dict[Any, Any]) -> Any:
    tag = obj.get(_TAG)
    return decode_array(obj) if tag is None else _DECODERS[tag](obj)


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """One frame: a 4-byte big-endian length, then the msgpack body. Raises TypeError naming a value that cannot
    travel (nothing is sent then)."""
    body: bytes = msgpack.packb(message, default=_encode, use_bin_type=True, strict_types=True)
    if len(body) >= 1 << 32:
        raise ValueError(f"a {message.get('op', 'reply')!r} frame of {len(body)} bytes is over the 4 GiB limit")
    return _HEADER.pack(len(body)) + body


def read_frame(sock: socket.socket, wait: Callable[[], None] | None = None) -> dict[str, Any] | None:
    """The next frame's message, or None once the other end has closed the connection (also in the middle of a
    frame). `wait` is called before each read and returns once the socket is readable (or raises)."""
    header = _read(sock, _HEADER.size, wait)
    if header is None:
        return None
    body = _read(sock, _HEADER.unpack(header)[0], wait)
    if body is None:
        return None
    message: dict[str, Any] = msgpack.unpackb(body, object_hook=_decode, raw=False, strict_map_key=False)
    return message


def _read(sock: socket.socket, size: int, wait: Callable[[], None] | None) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        if wait is not None:
            wait()
        try:
            n = sock.recv_into(view[got:])
        except (ConnectionResetError, BrokenPipeError):
            return None
        if n == 0:
            return None
        got += n
    return bytes(buffer)


_MAPPED: dict[str, tuple[type[Exception], tuple[str, ...]]] = {
    "InvalidAction": (InvalidAction, ()),
    "SimulationDiverged": (SimulationDiverged, ("warning", "detail")),
    "AgentTimeout": (AgentTimeout, ("latency_s", "limit_s", "call")),
    "IncompatibleComponents": (IncompatibleComponents, ("problems",)),
    "NodeFailure": (NodeFailure, ()),
}


def error_payload(exc: BaseException) -> dict[str, Any]:
    """What travels of an exception raised in the subprocess: its type, message and traceback, and for the
    exceptions that decide an episode's status, what rebuilds them."""
    kind = type(exc)
    try:
        message = str(exc)
    except Exception:
        message = f"<{kind.__name__} whose message cannot be shown>"
    payload: dict[str, Any] = {
        "type": kind.__qualname__,
        "module": kind.__module__,
        "message": message,
        "traceback": "".join(traceback.format_exception(exc)),
    }
    for name, (base, attrs) in _MAPPED.items():
        if isinstance(exc, base):
            payload["as"] = name
            payload["attrs"] = {attr: getattr(exc, attr, None) for attr in attrs}
            break
    return payload


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a server-mode nodeset's subprocess: the cause of its copy raised in
    the worker."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


class RemoteNodeError(Exception):
    """An exception raised by a node in a server-mode nodeset's subprocess, raised again in the worker. Its class is
    named after the original's (`ValueError`) and `remote_type` is the original's qualified name; its message is
    the original's."""

    remote_type: str = ""


@functools.cache
def _remote_class(module: str, name: str) -> type[RemoteNodeError]:
    attrs = {"remote_type": f"{module}.{name}", "__module__": module, "__qualname__": name}
    return cast(type[RemoteNodeError], type(name.rpartition(".")[2], (RemoteNodeError,), attrs))


def rebuild_error(payload: Mapping[str, Any]) -> Exception:
    """The worker's copy of an exception the subprocess sent (see `error_payload`)."""
    message = str(payload.get("message", ""))
    attrs = payload.get("attrs") or {}
    exc: Exception
    match payload.get("as"):
        case "InvalidAction":
            exc = InvalidAction(message)
        case "SimulationDiverged":
            exc = SimulationDiverged(str(attrs.get("warning")), str(attrs.get("detail") or ""))
        case "AgentTimeout":
            exc = AgentTimeout(attrs.get("latency_s"), float(attrs.get("limit_s") or 0.0), str(attrs.get("call")))
        case "IncompatibleComponents":
            exc = IncompatibleComponents(attrs.get("problems") or message)
        case "NodeFailure":
            exc = NodeFailure(message)
        case _:
            exc = _remote_class(str(payload.get("module")), str(payload.get("type")))(message)
    exc.__cause__ = RemoteTraceback(str(payload.get("traceback", "")))
    return exc


def exit_cause(pid: int, code: int | None) -> str:
    """How a subprocess ended, from its exit code (None: still running)."""
    if code is None:
        return f"process {pid} broke its connection"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"process {pid} died of {name}"
    return f"process {pid} exited with code {code}"


_WORKER = re.compile(r"^\D*(\d+)(?:\.\d+)?$")


def replica_index(worker: str) -> int:
    """The index a worker's subprocesses are tagged with: `w1` and its replacement `w1.2` → 1, `main` → 0."""
    match = _WORKER.match(worker)
    return int(match.group(1)) if match else 0


# -- the worker's side ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Launch:
    """What every subprocess of one `ServerNodesets` is started with, and where their sockets live."""

    worker: str
    placement: str | None
    env_spec: EnvSpec | None
    env_capabilities: EnvCapabilities | None
    allow_import: bool
    start_timeout_s: float
    stop_grace_s: float
    render_images: bool = False
    directory: str | None = None
    sockets: int = 0

    def socket_path(self) -> str:
        """A fresh socket path in a private (0700) temporary directory."""
        if self.directory is None:
            self.directory = tempfile.mkdtemp(prefix="hylo-nodesets-")
        self.sockets += 1
        return os.path.join(self.directory, f"{self.sockets}.sock")

    def release(self, path: str) -> None:
        """Remove a socket path and its directory once the subprocess has connected (or failed to)."""
        with contextlib.suppress(OSError):
            os.unlink(path)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def init(self) -> dict[str, Any]:
        return {"path": list(sys.path), "worker": self.worker, "benchmark": self.placement,
                "env_spec": self.env_spec, "env_capabilities": self.env_capabilities,
                "allow_import": self.allow_import, "render_images": self.render_images}  # fmt: skip


class _Server:
    """One nodeset's subprocess as the worker sees it: started with the nodeset's first proxy, restarted (its nodes
    set up again) by the first hook of an execution after it died."""

    def __init__(self, nodeset: Nodeset, tag: str, launch: _Launch) -> None:
        self.nodeset = nodeset
        self.tag = tag
        self.launch = launch
        self.proxies: list[NodeProxy] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.pid = 0
        self.dead: str | None = None  # how it died, once a call found out (and raised NodesetCrashed)
        self.has_env_panel = False  # it hosts its benchmark's env panel (an env nodeset's subprocess)
        self._poller: select.poll | None = None
        self._next = 0
        self._in_flight: int | None = None  # the request whose reply has not been read yet
        self._replies: dict[int, dict[str, Any]] = {}  # replies read early, by request id

    # -- lifecycle --------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the subprocess, accept its connection and have it build the nodeset's runtime; raises
        `GraphSetupError` naming the nodeset when it cannot."""
        launch = self.launch
        path = launch.socket_path()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            listener.listen(1)
            command = [sys.executable, "-m", "hylo.graph.host", "--socket", path, "--nodeset", self.nodeset.name,
                       "--tag", self.tag, "--parent", str(os.getpid())]  # fmt: skip
            if self.nodeset.source:
                command += ["--source", self.nodeset.source]
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=2)  # a node's prints go to stderr
            self.pid = self.process.pid
            self.dead = None
            deadline = time.monotonic() + launch.start_timeout_s
            self.sock = self._accept(listener, deadline)
        finally:
            listener.close()
            launch.release(path)  # a connected socket needs no path: nothing is left on disk once it is up
        self._poller = select.poll()
        self._poller.register(self.sock, select.POLLIN)
        try:
            started = self.receive(self.send("init", **launch.init()), deadline=deadline)
            self.has_env_panel = isinstance(started, dict) and bool(started.get("env_panel"))
        except NodesetCrashed:
            self.stop(0.0)
            raise GraphSetupError(f"nodeset {self.nodeset.name!r} ({self.tag}) could not start: {self.dead}") from None
        except Exception as exc:
            self.stop(0.0)
            raise GraphSetupError(
                f"nodeset {self.nodeset.name!r} ({self.tag}) could not start: {type(exc).__name__}: {exc}"
            ) from exc

    def _accept(self, listener: socket.socket, deadline: float) -> socket.socket:
        assert self.process is not None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop(0.0)
                raise GraphSetupError(f"nodeset {self.nodeset.name!r} ({self.tag}): its subprocess did not connect "
                                      f"within {self.launch.start_timeout_s:g} s")  # fmt: skip
            listener.settimeout(min(0.1, remaining))
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                code = self.process.poll()
                if code is not None:
                    self.stop(0.0)
                    raise GraphSetupError(f"nodeset {self.nodeset.name!r} ({self.tag}): its subprocess ended before "
                                          f"it connected ({exit_cause(self.pid, code)})") from None  # fmt: skip
                continue
            conn.settimeout(None)
            return conn

    def ensure_live(self) -> None:
        """Restart the subprocess if it died, and set up every node it had again."""
        if self.dead is None and self.process is not None and self.process.poll() is None:
            return
        why = self.dead or (exit_cause(self.pid, self.process.poll()) if self.process is not None else "not running")
        log.warning("nodeset %s: starting a new subprocess (the last one: %s)", self.tag, why)
        self.stop(0.0)
        try:
            self.start()
            for proxy in self.proxies:
                if proxy.set_up:
                    self.call("setup", **proxy.setup_request())
        except NodesetCrashed:
            raise
        except Exception as exc:
            self.dead = f"it could not be restarted: {exc}"
            raise NodesetCrashed(self.tag, self.nodeset.owner, self.dead) from exc

    def stop(self, grace: float) -> None:
        """Ask the subprocess to close its nodes and exit (within `grace` seconds, else kill it); reap it."""
        process, sock = self.process, self.sock
        self.process = self.sock = self._poller = None
        self._replies.clear()
        self._in_flight = None
        if sock is not None:
            if grace > 0 and process is not None and process.poll() is None:
                with contextlib.suppress(OSError):
                    sock.sendall(encode_frame({"id": -1, "op": "shutdown"}))
                try:
                    process.wait(grace)
                except subprocess.TimeoutExpired:
                    log.warning("nodeset %s: its subprocess did not stop within %g s; killing it", self.tag, grace)
            sock.close()
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()

    @property
    def alive(self) -> bool:
        return self.dead is None and self.process is not None and self.process.poll() is None

    # -- calls ------------------------------------------------------------------------------------------------------

    def send(self, op: str, **fields: Any) -> int:
        """Send a request; returns its id (for `receive`). One request is in flight at a time: the reply to the one
        before is read (and kept) first, so that neither side can block writing into a full socket."""
        if self.sock is None:
            self._crashed()
        while self._in_flight is not None:
            self._read(None)
        self._next += 1
        data = encode_frame({"id": self._next, "op": op, **fields})
        try:
            self.sock.sendall(data)
        except OSError:
            self._crashed()
        self._in_flight = self._next
        return self._next

    def receive(self, request: int, *, deadline: float | None = None) -> Any:
        """The reply to `request`: its value, or the node's exception raised again."""
        while request not in self._replies:
            if self._in_flight != request:
                raise RuntimeError(f"nodeset {self.tag}: no request {request} is waiting for a reply")
            self._read(deadline)
        reply = self._replies.pop(request)
        if "error" in reply:
            raise rebuild_error(reply["error"])
        return reply.get("value")

    def call(self, op: str, **fields: Any) -> Any:
        return self.receive(self.send(op, **fields))

    def discard(self, request: int) -> None:
        """Forget a request whose reply nobody will wait for (its episode ended first)."""
        if self._in_flight == request:
            self._read(None)
        self._replies.pop(request, None)

    def _read(self, deadline: float | None) -> None:
        if self.sock is None:
            self._crashed()
        message = read_frame(self.sock, functools.partial(self._wait, deadline))
        if message is None:
            self._crashed()
        got = int(message.get("id", -1))
        if got == self._in_flight:
            self._in_flight = None
        self._replies[got] = message

    def _wait(self, deadline: float | None) -> None:
        assert self._poller is not None and self.process is not None
        while not self._poller.poll(POLL_S * 1000):
            if self.process.poll() is not None:
                self._crashed()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"no answer within {self.launch.start_timeout_s:g} s")

    def _crashed(self) -> NoReturn:
        """The connection broke or the process ended: learn how it died, mark it dead, raise `NodesetCrashed`."""
        if self.dead is None:
            code: int | None = None
            if self.process is not None:
                try:
                    code = self.process.wait(CRASH_WAIT_S)
                except subprocess.TimeoutExpired:
                    code = None
            self.dead = exit_cause(self.pid, code)
        raise NodesetCrashed(self.tag, self.nodeset.owner, self.dead)


class NodeProxy(Node):
    """A node of a server-mode nodeset as the executor sees it: each hook is a call to the nodeset's subprocess.
    Its class (one per node type) implements the optional hooks the node's own class does, and `start` always (the
    first execution after a crash restarts the subprocess there)."""

    _type: type[Node]
    split_forward = True

    def __init__(self, planned: PlannedNode, server: _Server, calls: EnvCalls | None = None) -> None:
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
        self._launch = _Launch(
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
        self._servers: dict[str, _Server] = {}
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
            server = _Server(planned.nodeset, f"{planned.nodeset.name}#{self.index}", self._launch)
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
    open_: weakref.finalize[Any, Any], server: _Server, calls: EnvCalls | None, op: str, **fields: Any
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


def _shutdown(servers: dict[str, _Server], launch: _Launch) -> None:
    for server in servers.values():
        try:
            server.stop(launch.stop_grace_s)
        except Exception as exc:  # one stuck subprocess must not keep the others alive
            log.warning("nodeset %s: failed to stop: %r", server.tag, exc)
