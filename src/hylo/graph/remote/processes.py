"""A server-mode nodeset's subprocess as the worker sees it: started (`python -m hylo.graph.host`, dying with the
worker), connected over a unix-domain socket in a private temporary directory (removed as soon as the subprocess has
connected), called one request at a time, restarted after it died, stopped."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, NoReturn, Protocol

from hylo.core.child import kill, popen, reap, signal_name
from hylo.core.types import EnvCapabilities, EnvSpec
from hylo.graph.executor import GraphSetupError, NodesetCrashed
from hylo.graph.node import Nodeset
from hylo.graph.remote.wire import encode_frame, read_frame, rebuild_error

log = logging.getLogger("hylo.graph.remote")

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


def exit_cause(pid: int, code: int | None) -> str:
    """How a subprocess ended, from its exit code (None: still running)."""
    if code is None:
        return f"process {pid} broke its connection"
    name = signal_name(code)
    if name is not None:
        return f"process {pid} died of {name}"
    return f"process {pid} exited with code {code}"


_WORKER = re.compile(r"^\D*(\d+)(?:\.\d+)?$")


def replica_index(worker: str) -> int:
    """The index a worker's subprocesses are tagged with: `w1` and its replacement `w1.2` → 1, `main` → 0."""
    match = _WORKER.match(worker)
    return int(match.group(1)) if match else 0


class SetUp(Protocol):
    """A node of a subprocess as the subprocess' restart needs it: set up again if it had been."""

    set_up: bool

    def setup_request(self) -> dict[str, Any]: ...


@dataclasses.dataclass
class Launch:
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


class NodesetServer:
    """One nodeset's subprocess as the worker sees it: started with the nodeset's first proxy, restarted (its nodes
    set up again) by the first hook of an execution after it died."""

    def __init__(self, nodeset: Nodeset, tag: str, launch: Launch) -> None:
        self.nodeset = nodeset
        self.tag = tag
        self.launch = launch
        self.proxies: list[SetUp] = []
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
            self.process = popen(command, stdin=subprocess.DEVNULL, stdout=2)  # a node's prints go to stderr
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
            kill(process, group=False)
            reap(process)

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
