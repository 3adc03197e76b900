"""The vla-eval bridge: a WebSocket server that speaks vla-eval's model-server protocol and serves a hylo agent.

Per connection: HELLO is answered (again after a reconnect), EPISODE_START / OBSERVATION / EPISODE_END drive that
connection's `ServedSession`, and every OBSERVATION gets exactly one reply — an ACTION echoing its `seq` with one
action as `{"actions": ndarray}`, or an ERROR saying why there is none. Nothing else is ever sent.

Each connection has its own worker thread: its agent is built or taken from the pool there, and each of its messages
is decoded, handled and encoded there (the agent's `act` included), so a slow agent on one connection never holds up
the others, however many there are, and the event loop only moves frames. `GET /health` answers 200 on the same
port. Stopping (`request_stop`) stops accepting, gives acts in flight `SHUTDOWN_GRACE_S` to finish, then records
every open episode `infra_invalid`.

Any page in a browser on this machine can reach a loopback port, so every request must name this bridge in `Host`
(DNS rebinding) and come from no page or an allowed one (`Origin`), by the rules of `hylo.hosts`. What one client
can hold is bounded: the connections (`max_connections`, refused with HTTP 503 beyond it), the time a connection may
stay silent (`idle_timeout`), the size of a frame and of what it decodes to (`max_frame_bytes`, `max_frame_pixels`
and the protocol's own bounds), the frames read ahead (`MAX_QUEUE`), and the agents kept once their connections
closed (`AgentPool.keep`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import logging
import queue
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import State

from hylo.bridges.limits import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FRAME_BYTES
from hylo.bridges.served_run import ServedRun
from hylo.bridges.session import EpisodeRefused, ServedSession, wants_images
from hylo.bridges.vlaeval_protocol import (
    MAX_FRAME_PIXELS,
    PROTOCOL_VERSION,
    Message,
    MessageType,
    ProtocolError,
    frame_header,
    pack,
    unpack,
)
from hylo.core.shield import SafetyShield
from hylo.hosts import HostPolicy

log = logging.getLogger(__name__)

SERVER_NAME = "hylo-bridge"

PING_INTERVAL_S = 20.0
"""How often the bridge pings each connection (a peer that does not answer within the idle timeout is dropped)."""

MAX_QUEUE = 1
"""Frames waiting unread on a connection past which the bridge stops reading its socket (websockets' high-water
mark: it pauses once two wait, and resumes once none does), so a connection holds about three frames at a time.
vla-eval's client sends at most three without waiting for a reply (EPISODE_END, EPISODE_START, OBSERVATION): they
wait in the socket."""

SHUTDOWN_GRACE_S = 5.0
"""How long a stopping bridge lets acts in flight finish before it records their episodes as stopped."""

CLOSE_TIMEOUT_S = 1.0
"""How long closing a connection waits for the harness's side of the closing handshake."""

STOPPED = "the bridge stopped mid-episode"


class ConnectionWorker:
    """One connection's own thread: runs what is submitted to it in order, one thing at a time (a session is not
    thread-safe). The thread is a daemon, so an agent stuck in `act` never keeps the process from exiting."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[
            tuple[Callable[..., Any], tuple[Any, ...], concurrent.futures.Future[Any]] | None
        ]
        self._queue = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"hylo-bridge-{name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._pending += 1
        self._queue.put((fn, args, future))
        return future

    @property
    def idle(self) -> bool:
        """Whether nothing submitted is waiting or running."""
        with self._lock:
            return self._pending == 0

    def shutdown(self) -> None:
        """End the thread once what was submitted before has run."""
        self._queue.put(None)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, args, future = item
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args)
                    except BaseException as exc:
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                with self._lock:
                    self._pending -= 1


class AgentPool:
    """One agent per live connection (agents keep episode state); up to `keep` of them are kept for the next
    connections once theirs closed, the others closed (`close()`, when they have one) and dropped, so the memory a
    burst of connections took comes back.

    `first` is the agent built when the bridge started (it proved the name and arguments good)."""

    def __init__(self, factory: Callable[[], Any], first: Any, *, keep: int = 1) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValueError(f"keep must be an int >= 0, got {keep!r}")
        self._factory = factory
        self.keep = keep
        self._idle: list[Any] = [first]
        self._live = 1
        self._lock = threading.Lock()

    def acquire(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        agent = self._factory()
        with self._lock:
            self._live += 1
        return agent

    def release(self, agent: Any) -> None:
        """Take back the agent of a closed connection: kept when fewer than `keep` wait, else closed."""
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(agent)
                return
            self._live -= 1
        _close_agent(agent)

    @property
    def size(self) -> int:
        """The agents alive: acting on a connection or kept."""
        with self._lock:
            return self._live

    def close(self) -> None:
        """Close every idle agent that has a `close` (a remote policy's socket, a worker process); an agent still
        acting on a connection's thread is left alone."""
        with self._lock:
            agents, busy = self._idle, self._live - len(self._idle)
            self._idle, self._live = [], busy
        if busy:
            log.warning("%d agent(s) still acting when the bridge stopped; not closed", busy)
        for agent in agents:
            _close_agent(agent)


def _close_agent(agent: Any) -> None:
    close = getattr(agent, "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:
            log.warning("closing agent %r raised %r", agent, exc)


def action_spec(space: spaces.Space[Any] | None) -> dict[str, dict[str, Any]]:
    """The HELLO `action_spec` (vla-eval DimSpec dicts) of a 1-D Box action space; empty when there is none."""
    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        return {}
    spec: dict[str, Any] = {"name": "actions", "dims": int(space.shape[0]), "format": "continuous"}
    low, high = float(np.min(space.low)), float(np.max(space.high))
    if np.isfinite(low) and np.isfinite(high):
        spec["range"] = [low, high]
    return {"actions": spec}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


class ConnectionHandler:
    """The protocol for one connection, independent of the socket: `handle(frame)` returns the reply frame, or
    None when the message takes none (EPISODE_START, EPISODE_END, a client's ERROR). It never raises: a failure
    while handling a message is logged, recorded against the open episode (`infra_invalid`) and, for a message that
    expects a reply (OBSERVATION, HELLO), answered with an ERROR; the connection goes on."""

    def __init__(self, bridge: VlaEvalBridge, session: ServedSession) -> None:
        self.bridge = bridge
        self.session = session
        # An agent that declares its requirements without images never sees any (as in driven mode): the images of
        # its frames are traced by the digest of their bytes and never decoded.
        self.decode_images = session.images

    def handle(self, frame: bytes | str) -> bytes | None:
        try:
            message = unpack(frame, decode_images=self.decode_images, max_pixels=self.bridge.max_frame_pixels)
        except ProtocolError as exc:
            return self._undecodable(frame, exc)
        except Exception as exc:
            return self._undecodable(frame, ProtocolError(f"cannot decode the frame: {_first_line(exc)}"))
        try:
            return self._dispatch(message)
        except Exception as exc:
            return self._failed(message, exc)

    def _dispatch(self, message: Message) -> bytes | None:
        kind = message.type
        if kind is MessageType.OBSERVATION:
            try:
                action = self.session.act(message.payload)
            except EpisodeRefused as exc:
                return _error(str(exc), message.seq)
            return pack(MessageType.ACTION, {"actions": action}, message.seq)
        if kind is MessageType.HELLO:
            return pack(MessageType.HELLO, self.bridge.hello(), message.seq)
        if kind is MessageType.EPISODE_START:
            self.session.start(message.payload)
        elif kind is MessageType.EPISODE_END:
            self.session.end(message.payload)
        elif kind is MessageType.ERROR:
            log.warning("%s: the harness reported an error: %s", self.session.connection, message.payload)
        else:
            log.warning("%s: ignoring a %s message (a model server never receives one)", self.session.connection, kind)
        return None

    def _failed(self, message: Message, exc: Exception) -> bytes | None:
        reason = f"the bridge failed handling {message.type.value} (seq {message.seq}): {_first_line(exc)}"
        detail = "".join(traceback.format_exception(exc)).strip()
        log.error("%s: %s\n%s", self.session.connection, reason, detail)
        try:
            self.session.fail(reason, detail)
        except Exception as again:
            log.error("%s: recording the failure failed too: %s", self.session.connection, _first_line(again))
        if message.type in (MessageType.OBSERVATION, MessageType.HELLO):
            return _error(reason, message.seq)
        return None

    def _undecodable(self, frame: bytes | str, exc: ProtocolError) -> bytes | None:
        """Answer a frame that cannot be decoded only if it expects an answer (HELLO, OBSERVATION), with its `seq`
        when that can be read (else 0); an observation's episode cannot go on and is recorded as the harness's
        fault."""
        kind, seq = frame_header(frame)
        log.warning("%s: undecodable frame: %s", self.session.connection, exc)
        if kind == MessageType.OBSERVATION.value and self.session.in_episode:
            self.session.close(f"the harness sent an undecodable observation ({exc})")
        if kind in (MessageType.OBSERVATION.value, MessageType.HELLO.value):
            return _error(f"bad frame: {exc}", seq)
        return None


def _error(text: str, seq: int) -> bytes:
    """An ERROR frame; what UTF-8 cannot carry in `text` (a lone surrogate in an agent's message) is escaped."""
    return pack(MessageType.ERROR, {"error": text.encode("utf-8", "backslashreplace").decode("utf-8")}, seq)


@dataclass(eq=False)
class _Connection:
    name: str
    worker: ConnectionWorker
    task: asyncio.Task[Any] | None
    session: ServedSession | None = None
    open: bool = True
    ended: str | None = None  # why the bridge closed it, when it did


class VlaEvalBridge:
    """Serves an agent (one per connection, from `agents`) to vla-eval harnesses, recording into `run`.

    `shield` makes each session's shield (`SafetyShield` for the default one); `action_space` bounds it and is
    announced in HELLO. `max_frame_bytes` bounds the frames it reads and `max_frame_pixels` the images one frame may
    make it decode; `max_connections` the connections served at once; `idle_timeout` the seconds a connection may
    send nothing while the bridge waits for it. `allow_hosts` adds names the bridge answers to, `allow_origins` pages
    that may use it (`HostPolicy`); raises `ValueError` naming a bad value."""

    def __init__(
        self,
        agents: AgentPool,
        run: ServedRun,
        *,
        agent_label: str,
        shield: Callable[[], SafetyShield] = SafetyShield,
        action_space: spaces.Space[Any] | None = None,
        observation_spec: dict[str, Any] | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_frame_pixels: int = MAX_FRAME_PIXELS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
    ) -> None:
        from hylo.version import __version__

        for name, value in (
            ("max_frame_bytes", max_frame_bytes),
            ("max_frame_pixels", max_frame_pixels),
            ("max_connections", max_connections),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if isinstance(idle_timeout, bool) or not isinstance(idle_timeout, (int, float)) or not 0 < idle_timeout < 1e9:
            raise ValueError(f"idle_timeout must be a number of seconds > 0, got {idle_timeout!r}")
        self.agents = agents
        self.run = run
        self.agent_label = agent_label
        self.shield = shield
        self.action_space = action_space
        self.max_frame_bytes = max_frame_bytes
        self.max_frame_pixels = max_frame_pixels
        self.max_connections = max_connections
        self.idle_timeout = float(idle_timeout)
        self.hosts = HostPolicy.of("127.0.0.1", allow_hosts, allow_origins)  # bound to the address `serve` is given
        self.version = __version__
        self._observation_spec = observation_spec or {}
        self._names = itertools.count(1)
        self._connections: dict[str, _Connection] = {}
        self._handshakes: set[ServerConnection] = set()  # admitted, their handler not started yet
        self._port: int | None = None
        self._lock = threading.Lock()
        self._stop: asyncio.Event | None = None
        self._hurry = False
        self.stopping = False

    def hello(self) -> dict[str, Any]:
        """The HELLO reply: the fields vla-eval's own model servers send, plus hylo's name, version and agent."""
        payload: dict[str, Any] = {
            "harness_version": self.version,
            "protocol_version": PROTOCOL_VERSION,
            "model_server": SERVER_NAME,
            "server_version": self.version,
            "agent": self.agent_label,
            "run_id": self.run.run_id,
            "capabilities": {},
        }
        spec = action_spec(self.action_space)
        if spec:
            payload["action_spec"] = spec
        if self._observation_spec:
            payload["observation_spec"] = self._observation_spec
        return payload

    def health(self) -> dict[str, Any]:
        with self._lock:
            live = sum(connection.open for connection in self._connections.values())
        return {
            "status": "ok",
            "agent": self.agent_label,
            "run_id": self.run.run_id,
            "connections": live,
            "max_connections": self.max_connections,
            "agents": self.agents.size,
        }

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """Before the handshake (on the event loop): refuse a request for another host or from another page (403),
        answer `/health`, and refuse a connection past `max_connections` (503)."""
        refusal = self._foreign(request)
        if refusal is not None:
            log.info("refused a request for %s: %s", request.path[:80], refusal)
            return _plain(connection, HTTPStatus.FORBIDDEN, refusal)
        if request.path.split("?", 1)[0] == "/health":
            response = connection.respond(HTTPStatus.OK, json.dumps(self.health()) + "\n")
            response.headers["Content-Type"] = "application/json"
            return response
        with self._lock:
            self._handshakes = {c for c in self._handshakes if c.state is not State.CLOSED}  # drop failed ones
            busy = len(self._handshakes) + len(self._connections)
            if busy < self.max_connections:
                self._handshakes.add(connection)
                return None
        log.info("refused a connection: %d of %d in use", busy, self.max_connections)
        response = _plain(
            connection,
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"the bridge is serving its maximum of {self.max_connections} connections; try again later",
        )
        response.headers["Retry-After"] = "5"
        return response

    def _foreign(self, request: Request) -> str | None:
        """Why a request is not for this bridge (its `Host`) or not allowed to use it (its `Origin`); None when it
        may be served."""
        return self.hosts.refusal(request.headers.get_all("Host"), request.headers.get_all("Origin"), self._port)

    async def handle_connection(self, ws: ServerConnection) -> None:
        """Serve one connection on its own worker thread until it closes; an episode it leaves unfinished is
        recorded `infra_invalid`."""
        name = f"conn-{next(self._names)}"
        worker = ConnectionWorker(name)
        connection = _Connection(name, worker, asyncio.current_task())
        with self._lock:
            self._handshakes.discard(ws)
            self._connections[name] = connection
        agent: Any = None
        try:
            agent = await asyncio.wrap_future(worker.submit(self.agents.acquire))
            session = ServedSession(
                self.run,
                agent,
                shield=self.shield(),
                action_space=self.action_space,
                connection=name,
            )
            connection.session = session
            await self._converse(ws, connection, ConnectionHandler(self, session))
        except ConnectionClosed as closed:
            log.debug("%s: closed by the harness (%s)", name, closed)
        except asyncio.CancelledError:
            if not self.stopping:
                raise
        except Exception as exc:
            log.error("%s: %s", name, _first_line(exc))
        finally:
            connection.open = False
            teardown = worker.submit(self._teardown, connection, agent)
            worker.shutdown()
            if not self.stopping:  # when stopping, `_drain` waits for it (or records the episode without it)
                await asyncio.shield(asyncio.wrap_future(teardown))

    async def _converse(self, ws: ServerConnection, connection: _Connection, handler: ConnectionHandler) -> None:
        """Answer the connection's frames until it closes. While the bridge waits for the harness, a connection that
        sends nothing for `idle_timeout` seconds is closed (code 1001)."""
        loop = asyncio.get_running_loop()
        worker = connection.worker
        try:
            async with asyncio.timeout(self.idle_timeout) as idle:
                async for frame in ws:
                    idle.reschedule(None)  # the agent's time is not the harness's silence
                    if self.stopping:
                        break  # the bridge records the open episode; nothing new starts
                    reply = await asyncio.wrap_future(worker.submit(handler.handle, frame))
                    if reply is not None:
                        await ws.send(reply)
                    idle.reschedule(loop.time() + self.idle_timeout)
        except TimeoutError:
            if not idle.expired():
                raise
            connection.ended = f"the connection was idle for {self.idle_timeout:g} s and closed mid-episode"
            log.info("%s: closing it: idle for %g s", connection.name, self.idle_timeout)
            await ws.close(CloseCode.GOING_AWAY, f"idle for {self.idle_timeout:g} s: the harness sent nothing")

    def _teardown(self, connection: _Connection, agent: Any) -> None:
        """On the connection's thread: record its open episode, give its agent back, forget it."""
        try:
            if connection.session is not None:
                why = STOPPED if self.stopping else connection.ended or "the connection closed mid-episode"
                connection.session.close(why)
        finally:
            if agent is not None:
                self.agents.release(agent)
            with self._lock:
                self._connections.pop(connection.name, None)

    def request_stop(self) -> None:
        """Stop serving (a signal handler, on the event loop's thread); a second request skips the grace period."""
        if self.stopping:
            self._hurry = True
        self.stopping = True
        if self._stop is not None:
            self._stop.set()

    async def serve(self, host: str, port: int, *, started: Callable[[int], None] | None = None) -> None:
        """Serve until `request_stop` (or cancelled); `started(port)` is called once the socket listens (port 0
        picks a free one). Returns once every open episode is recorded."""
        self._stop = asyncio.Event()
        if self.stopping:
            self._stop.set()
        self.hosts = replace(self.hosts, bound=host)
        async with serve(
            self.handle_connection,
            host,
            port,
            process_request=self._process_request,
            compression=None,
            max_size=self.max_frame_bytes,
            max_queue=MAX_QUEUE,
            ping_interval=PING_INTERVAL_S,
            ping_timeout=self.idle_timeout,
            close_timeout=CLOSE_TIMEOUT_S,
        ) as server:
            self._port = _bound_port(server)
            if started is not None:
                started(self._port)
            try:
                await self._stop.wait()
            finally:
                await self._drain(server)

    async def _drain(self, server: Server) -> None:
        """Stop accepting; give acts in flight `SHUTDOWN_GRACE_S`; record every open episode `infra_invalid` (on
        its connection's thread when that is free, else from here, without its trace); close the connections."""
        self.stopping = True
        loop = asyncio.get_running_loop()
        server.server.close()  # no new connections
        began = loop.time()
        deadline = began + SHUTDOWN_GRACE_S
        while not self._hurry and loop.time() < deadline and not all(c.worker.idle for c in self._snapshot()):
            await asyncio.sleep(0.05)
        for connection in self._snapshot():
            session = connection.session
            if session is None:
                continue
            if connection.worker.idle:
                done = connection.worker.submit(session.close, STOPPED)
                try:
                    await asyncio.wait_for(asyncio.wrap_future(done), SHUTDOWN_GRACE_S)
                    continue
                except Exception as exc:
                    log.warning("%s: closing the session: %s", connection.name, _first_line(exc) or "timed out")
            session.abandon(f"{STOPPED} (the agent was still acting {loop.time() - began:.1f} s after the stop)")
        for connection in self._snapshot():
            if connection.task is not None and not connection.task.done():
                connection.task.cancel()
        server.close()
        try:
            await asyncio.wait_for(server.wait_closed(), SHUTDOWN_GRACE_S)
        except TimeoutError:
            log.warning("connections still closing when the bridge stopped")

    def _snapshot(self) -> list[_Connection]:
        with self._lock:
            return list(self._connections.values())

    def close(self) -> None:
        """After serving: close the idle agents and the run (marked complete)."""
        self.agents.close()
        self.run.close()


def _plain(connection: ServerConnection, status: HTTPStatus, reason: str) -> Response:
    """A refusal the client can read: one line of text."""
    response = connection.respond(status, f"hylo bridge: {reason}\n")
    response.headers["Content-Type"] = "text/plain; charset=utf-8"
    return response


def _bound_port(server: Server) -> int:
    for sock in server.sockets:
        port: int = sock.getsockname()[1]
        return port
    raise RuntimeError("the bridge's server has no socket")


__all__ = [
    "AgentPool",
    "ConnectionHandler",
    "ConnectionWorker",
    "Message",
    "VlaEvalBridge",
    "action_spec",
    "wants_images",
]
