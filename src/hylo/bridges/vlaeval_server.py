"""The vla-eval bridge: a WebSocket server that speaks vla-eval's model-server protocol and serves a hylo agent.

Per connection: HELLO is answered (again after a reconnect), EPISODE_START / OBSERVATION / EPISODE_END drive that
connection's `ServedSession`, and every OBSERVATION gets exactly one reply — an ACTION echoing its `seq` with one
action as `{"actions": ndarray}`, or an ERROR saying why there is none. Nothing else is ever sent.

Each connection has its own worker thread: its agent is built or taken from the pool there, and each of its messages
is decoded, handled and encoded there (the agent's `act` included), so a slow agent on one connection never holds up
the others, however many there are, and the event loop only moves frames. With `--batch` the connections share one
agent instead, and their threads wait there for the `act_batch` call that answers them. `GET /health` answers 200 on
the same port. Stopping (`request_stop`) stops accepting, gives acts in flight `SHUTDOWN_GRACE_S` to finish, then
records every open episode `infra_invalid`.

Any page in a browser on this machine can reach a loopback port, so every request must name this bridge in `Host`
(DNS rebinding) and come from no page or an allowed one (`Origin`), by the rules of `hylo.hosts`. What one client
can hold is bounded: the connections (`max_connections`, refused with HTTP 503 beyond it), the time a connection may
stay silent (`idle_timeout`), the size of a frame and of what it decodes to (`max_frame_bytes`, `max_frame_pixels`
and the protocol's own bounds), the frames read ahead (`MAX_QUEUE`), and the agents kept once their connections
closed (`AgentPool.keep`).

The protocol of one connection (a frame in, its reply out) is `hylo.bridges.vlaeval_handler`; each connection's
thread and the pool of agents, `hylo.bridges.connections`; this module holds the server around them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
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

from hylo.agents.vlaeval_protocol import MAX_FRAME_PIXELS, PROTOCOL_VERSION, Message
from hylo.bridges.connections import AgentPool, Agents, ConnectionWorker
from hylo.bridges.limits import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FRAME_BYTES
from hylo.bridges.served_run import ServedRun
from hylo.bridges.session import ServedSession, wants_images
from hylo.bridges.vlaeval_handler import ConnectionHandler, first_line
from hylo.core.shield import SafetyShield
from hylo.hosts import HostPolicy
from hylo.version import __version__

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


def action_spec(space: spaces.Space[Any] | None) -> dict[str, dict[str, Any]]:
    """The HELLO `action_spec` (vla-eval DimSpec dicts) of a 1-D Box action space; empty when there is none."""
    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        return {}
    spec: dict[str, Any] = {"name": "actions", "dims": int(space.shape[0]), "format": "continuous"}
    low, high = float(np.min(space.low)), float(np.max(space.high))
    if np.isfinite(low) and np.isfinite(high):
        spec["range"] = [low, high]
    return {"actions": spec}


@dataclass(eq=False)
class _Connection:
    name: str
    worker: ConnectionWorker
    task: asyncio.Task[Any] | None
    session: ServedSession | None = None
    open: bool = True
    ended: str | None = None  # why the bridge closed it, when it did


class VlaEvalBridge:
    """Serves an agent to vla-eval harnesses, recording into `run`: one per connection from an `AgentPool`, or one
    shared by every connection that batches their acts (`hylo.bridges.batched_agent.BatchedAgent`).

    `shield` makes each session's shield (`SafetyShield` for the default one); `action_space` bounds it and is
    announced in HELLO. `max_frame_bytes` bounds the frames it reads and `max_frame_pixels` the images one frame may
    make it decode; `max_connections` the connections served at once; `idle_timeout` the seconds a connection may
    send nothing while the bridge waits for it. `allow_hosts` adds names the bridge answers to, `allow_origins` pages
    that may use it (`HostPolicy`); raises `ValueError` naming a bad value."""

    def __init__(
        self,
        agents: Agents,
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
        with self._lock:  # as the limit counts them: a closing connection holds its place until its teardown ends
            live = len(self._connections)
        health: dict[str, Any] = {
            "status": "ok",
            "agent": self.agent_label,
            "run_id": self.run.run_id,
            "connections": live,
            "max_connections": self.max_connections,
            "agents": self.agents.size,
        }
        figures = self.agents.figures()
        if figures is not None:
            health["batch"] = figures
        return health

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
            log.error("%s: %s", name, first_line(exc))
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
                    log.warning("%s: closing the session: %s", connection.name, first_line(exc) or "timed out")
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
