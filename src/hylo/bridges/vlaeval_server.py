"""The vla-eval bridge: a WebSocket server that speaks vla-eval's model-server protocol and serves a hylo agent.

Per connection: HELLO is answered (again after a reconnect), EPISODE_START / OBSERVATION / EPISODE_END drive that
connection's `ServedSession`, and every OBSERVATION gets exactly one reply — an ACTION echoing its `seq` with one
action as `{"actions": ndarray}`, or an ERROR saying why there is none. Nothing else is ever sent.

Each message is decoded, handled and encoded on a worker thread (the agent's `act` included), so a slow agent on
one connection never holds up the others and the event loop only moves frames. `GET /health` answers 200 on the
same port.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import logging
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import gymnasium.spaces as spaces
import msgpack
import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from hylo.bridges.served_run import ServedRun
from hylo.bridges.session import EpisodeRefused, ServedSession
from hylo.bridges.vlaeval_protocol import PROTOCOL_VERSION, Message, MessageType, ProtocolError, pack, unpack
from hylo.core.agent import AgentRequirements
from hylo.core.shield import SafetyShield

log = logging.getLogger(__name__)

SERVER_NAME = "hylo-bridge"


class AgentPool:
    """One agent per live connection (agents keep episode state), reused after a connection closes.

    `first` is the agent built when the bridge started (it proved the name and arguments good)."""

    def __init__(self, factory: Callable[[], Any], first: Any) -> None:
        self._factory = factory
        self._idle: list[Any] = [first]
        self._all: list[Any] = [first]
        self._lock = threading.Lock()

    def acquire(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        agent = self._factory()
        with self._lock:
            self._all.append(agent)
        return agent

    def release(self, agent: Any) -> None:
        with self._lock:
            self._idle.append(agent)

    def close(self) -> None:
        """Close every agent that has a `close` (a remote policy's socket, a worker process)."""
        with self._lock:
            agents, self._all, self._idle = self._all, [], []
        for agent in agents:
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


def _plain_action(action: Any) -> np.ndarray[Any, Any]:
    array = np.asarray(action)
    return array.reshape(1) if array.ndim == 0 else array


class ConnectionHandler:
    """The protocol for one connection, independent of the socket: `handle(frame)` returns the reply frame, or
    None when the message takes none (EPISODE_START, EPISODE_END, a client's ERROR)."""

    def __init__(self, bridge: VlaEvalBridge, session: ServedSession) -> None:
        self.bridge = bridge
        self.session = session
        # An agent that declares its requirements without images never sees any (as in driven mode): its frames'
        # images are traced by the digest of their bytes and never decoded.
        requirements = getattr(session.agent, "requirements", None)
        self.decode_images = not isinstance(requirements, AgentRequirements) or requirements.needs_images

    def handle(self, frame: bytes | str) -> bytes | None:
        try:
            message = unpack(frame, decode_images=self.decode_images)
        except ProtocolError as exc:
            return self._undecodable(frame, exc)
        kind = message.type
        if kind is MessageType.OBSERVATION:
            try:
                action = self.session.act(message.payload)
            except EpisodeRefused as exc:
                return pack(MessageType.ERROR, {"error": str(exc)}, message.seq)
            return pack(MessageType.ACTION, {"actions": _plain_action(action)}, message.seq)
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

    def _undecodable(self, frame: bytes | str, exc: ProtocolError) -> bytes | None:
        """Answer a frame that cannot be decoded only if it expects an answer (HELLO, OBSERVATION); an observation's
        episode cannot go on and is recorded as the harness's fault."""
        kind, seq = None, 0
        if isinstance(frame, bytes):
            try:
                raw = msgpack.unpackb(frame, raw=False)
                kind, seq = raw.get("type"), int(raw.get("seq", 0))
            except Exception:
                kind = None
        log.warning("%s: undecodable frame: %s", self.session.connection, exc)
        if kind == MessageType.OBSERVATION.value and self.session.in_episode:
            self.session.close(f"the harness sent an undecodable observation ({exc})")
        if kind in (MessageType.OBSERVATION.value, MessageType.HELLO.value):
            return pack(MessageType.ERROR, {"error": f"bad frame: {exc}"}, seq)
        return None


class VlaEvalBridge:
    """Serves an agent (one per connection, from `agents`) to vla-eval harnesses, recording into `run`.

    `shield` makes each session's shield (`SafetyShield` for the default one); `action_space` bounds it and is
    announced in HELLO. `max_workers` bounds how many messages are handled at once (one per connection at most)."""

    def __init__(
        self,
        agents: AgentPool,
        run: ServedRun,
        *,
        agent_label: str,
        shield: Callable[[], SafetyShield] = SafetyShield,
        action_space: spaces.Space[Any] | None = None,
        observation_spec: dict[str, Any] | None = None,
        max_workers: int = 32,
    ) -> None:
        from hylo import __version__

        self.agents = agents
        self.run = run
        self.agent_label = agent_label
        self.shield = shield
        self.action_space = action_space
        self.version = __version__
        self._observation_spec = observation_spec or {}
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix="hylo-bridge")
        self._connections = itertools.count(1)
        self._live: set[ServerConnection] = set()
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
        return {"status": "ok", "agent": self.agent_label, "run_id": self.run.run_id, "connections": len(self._live)}

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path.split("?", 1)[0] == "/health":
            response = connection.respond(HTTPStatus.OK, json.dumps(self.health()) + "\n")
            response.headers["Content-Type"] = "application/json"
            return response
        return None

    async def handle_connection(self, ws: ServerConnection) -> None:
        """Serve one connection until it closes; an episode it leaves unfinished is recorded `infra_invalid`."""
        loop = asyncio.get_running_loop()
        run_in = self._executor
        name = f"conn-{next(self._connections)}"
        agent = await loop.run_in_executor(run_in, self.agents.acquire)
        session = ServedSession(self.run, agent, shield=self.shield(), action_space=self.action_space, connection=name)
        handler = ConnectionHandler(self, session)
        self._live.add(ws)
        try:
            async for frame in ws:
                reply = await loop.run_in_executor(run_in, handler.handle, frame)
                if reply is not None:
                    await ws.send(reply)
        except ConnectionClosed:
            pass
        finally:
            self._live.discard(ws)
            why = "the bridge stopped mid-episode" if self.stopping else "the connection closed mid-episode"
            try:
                await asyncio.shield(loop.run_in_executor(run_in, session.close, why))
            finally:
                self.agents.release(agent)

    async def serve(self, host: str, port: int, *, started: Callable[[int], None] | None = None) -> None:
        """Serve until cancelled; `started(port)` is called once the socket listens (port 0 picks a free one)."""
        async with serve(
            self.handle_connection,
            host,
            port,
            process_request=self._process_request,
            compression=None,
            max_size=None,
            ping_interval=None,
        ) as server:
            if started is not None:
                started(_bound_port(server))
            await asyncio.Future()  # until cancelled

    def close(self) -> None:
        """After serving: wait for the handlers' threads, close the agents and the run."""
        self._executor.shutdown(wait=True)
        self.agents.close()
        self.run.close()


def _bound_port(server: Server) -> int:
    for sock in server.sockets:
        port: int = sock.getsockname()[1]
        return port
    raise RuntimeError("the bridge's server has no socket")


__all__ = ["AgentPool", "ConnectionHandler", "Message", "VlaEvalBridge", "action_spec"]
