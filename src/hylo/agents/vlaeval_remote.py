"""`vlaeval-remote`: a policy served by any vla-eval model server, driven as a hylo agent inside the Kernel.

hylo speaks the benchmark side of vla-eval's protocol: HELLO when it connects, EPISODE_START at `reset`, one
OBSERVATION → ACTION exchange per `act`, EPISODE_END with the verdict. Observations are sent under vla-eval's keys
(`images` as PNG, `state`, `task_description`, the rest as they are); a reply `{"actions": array}` becomes an
`ActionChunk` — a (horizon, dim) array is a chunk of `horizon` actions, played out by hylo's ChunkExecutor.

The agent asks for camera images (`images=True`, the default: a VLA policy wants its cameras), so the env renders
them; `images=False` for a policy that reads none. Every call has a deadline (`timeout`): past it the act fails with
`AgentTimeout` (the episode is `error`, reason `timeout`) and the connection is dropped (waiting at most
`CLOSE_TIMEOUT_S` for the server's side of the close), so a late reply can never be taken for the next one. A
dropped connection is retried with exponential backoff (HELLO and EPISODE_START again); a server that cannot be
reached when the agent is built fails the run before any episode, naming the URL.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from pydantic import Field
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection, connect

from hylo.agents.remote_limits import MAX_BACKOFF_S, MAX_CALL_S, MAX_RETRIES
from hylo.agents.vlaeval_protocol import PROTOCOL_VERSION, Message, MessageType, ProtocolError, pack, unpack
from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements, RemoteUrl
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.errors import AgentTimeout, HyloError
from hylo.core.status import EpisodeOutcome
from hylo.core.types import Observation
from hylo.version import __version__

log = logging.getLogger(__name__)

_TRANSPORT = (ConnectionClosed, WebSocketException, OSError, EOFError)

CLOSE_TIMEOUT_S = 1.0
"""How long closing a connection waits for the server's side of the closing handshake (a server that stopped
answering must not hold `act` up much past its deadline)."""


class RemotePolicyError(HyloError):
    """The remote policy failed: it answered ERROR, sent something unreadable, or could not be reached again."""


class RemotePolicyUnreachable(RemotePolicyError):
    """The model server could not be reached when the agent was built (the run does not start)."""


class VlaEvalRemoteAgent(AgentBase):
    """A hylo agent whose policy is a vla-eval model server at `url` (`ws://host:port`).

    - `timeout`: seconds each call may take (connection, HELLO, an action) before it fails
    - `retries`: reconnection attempts after a dropped connection, waiting `backoff`·2^k seconds before attempt k
    - `images`: whether the policy gets camera images (declared in `requirements`, so the env renders them)
    """

    name = "vlaeval-remote"

    class Args(AgentArgs):
        url: RemoteUrl
        timeout: float = Field(default=30.0, gt=0, le=MAX_CALL_S)
        retries: int = Field(default=3, ge=0, le=MAX_RETRIES)
        backoff: float = Field(default=0.5, ge=0, le=MAX_BACKOFF_S)
        images: bool = True

    def __init__(
        self, url: str, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5, images: bool = True
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise ValueError(f"url must be a ws:// or wss:// address, got {url!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, got {retries!r}")
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or backoff < 0:
            raise ValueError(f"backoff must be a number of seconds >= 0, got {backoff!r}")
        if not isinstance(images, bool):
            raise ValueError(f"images must be true or false, got {images!r}")
        self.requirements = AgentRequirements(needs_images=images)
        self.url = url
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.server_info: dict[str, Any] = {}
        self._ws: ClientConnection | None = None
        self._seq = 0
        self._episode: dict[str, Any] | None = None
        self._started = 0.0
        self._discrete = False
        self._resumed = False
        try:
            self._connect(time.monotonic() + self.timeout)
        except (*_TRANSPORT, TimeoutError, RemotePolicyError) as exc:
            raise RemotePolicyUnreachable(f"cannot reach the vla-eval model server at {url}: {_why(exc)}") from None

    # -- the agent ----------------------------------------------------------------------------------------------

    def reset(self, ctx: EpisodeContext) -> None:
        """Tell the server a new episode starts (EPISODE_START with the task), reconnecting if needed."""
        self.ctx = ctx
        self._discrete = isinstance(ctx.env_spec.action_space, spaces.Discrete)
        task = ctx.task
        info: dict[str, Any] = {"name": task.task, "suite": task.benchmark, "episode_idx": task.index, "seed": ctx.seed}
        if task.instruction is not None:
            info["instruction"] = task.instruction
        self._episode = {"task": info}
        self._started = time.monotonic()
        self._resumed = False

        def start(ws: ClientConnection, deadline: float) -> None:
            if not self._resumed:  # a reconnection just now has sent it already
                self._send(ws, MessageType.EPISODE_START, self._episode or {})

        self._call(start, "reset")

    def act(self, obs: Observation) -> ActionChunk:
        """One OBSERVATION → ACTION exchange within `timeout`; the reply's actions as a chunk."""
        frame_payload = to_vlaeval(obs)

        def exchange(ws: ClientConnection, deadline: float) -> Any:
            seq = self._send(ws, MessageType.OBSERVATION, frame_payload)
            return self._reply(ws, seq, deadline)

        return self._chunk(self._call(exchange, "act"))

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        """EPISODE_END with hylo's verdict; a server gone by now costs nothing (the verdict stands)."""
        if self._episode is None:
            return
        self._episode = None
        payload = {
            "metrics": {"success": outcome.success},
            "steps": outcome.steps,
            "elapsed_sec": round(time.monotonic() - self._started, 3),
        }
        if self._ws is None:
            return
        try:
            self._send(self._ws, MessageType.EPISODE_END, payload)
        except _TRANSPORT as exc:
            log.warning("could not send EPISODE_END to %s: %s", self.url, _why(exc))
            self._drop()

    def close(self) -> None:
        self._drop()

    # -- the connection -----------------------------------------------------------------------------------------

    def _call(self, fn: Any, what: str) -> Any:
        """Run `fn(ws, deadline)`, reconnecting with backoff when the connection drops, within one deadline."""
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            try:
                if self._ws is None:
                    self._connect(deadline, resume=True)
                assert self._ws is not None
                return fn(self._ws, deadline)
            except TimeoutError:
                self._drop()  # a late reply must never be read as the next one
                raise AgentTimeout(None, self.timeout, what) from None
            except _TRANSPORT as exc:
                self._drop()
                attempt += 1
                wait = self.backoff * 2 ** (attempt - 1)
                if attempt > self.retries or time.monotonic() + wait >= deadline:
                    raise RemotePolicyError(
                        f"lost the vla-eval model server at {self.url} ({_why(exc)}); "
                        f"{attempt - 1} reconnection attempts failed"
                    ) from None
                log.warning("connection to %s lost (%s); reconnecting in %.2g s", self.url, _why(exc), wait)
                time.sleep(wait)

    def _connect(self, deadline: float, *, resume: bool = False) -> None:
        """Connect and say HELLO (and EPISODE_START again when resuming an episode); `self._ws` is set only once that
        succeeded, and a connection whose handshake failed is closed."""
        remaining = max(deadline - time.monotonic(), 0.001)
        ws = connect(
            self.url,
            open_timeout=remaining,
            close_timeout=CLOSE_TIMEOUT_S,
            max_size=None,
            compression=None,
            ping_interval=None,
        ).__enter__()  # kept open past this call, closed by `_drop` (websockets 17 warns unless entered)
        try:
            hello = {"harness_version": _version(), "protocol_version": PROTOCOL_VERSION, "client": "hylo"}
            seq = self._send(ws, MessageType.HELLO, hello)
            reply = self._receive(ws, deadline)
            if reply.type is not MessageType.HELLO or reply.seq != seq:
                raise RemotePolicyError(f"{self.url} answered HELLO with {reply.type.value}")
            if resume and self._episode is not None:  # the server lost the session with the connection
                self._send(ws, MessageType.EPISODE_START, self._episode)
        except BaseException:
            _close(ws, self.url)
            raise
        self.server_info = reply.payload
        if resume and self._episode is not None:
            self._resumed = True
        self._ws = ws

    def _send(self, ws: ClientConnection, kind: MessageType, payload: Mapping[str, Any]) -> int:
        self._seq += 1
        ws.send(pack(kind, dict(payload), self._seq, images=True))
        return self._seq

    def _receive(self, ws: ClientConnection, deadline: float) -> Message:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        try:
            return unpack(ws.recv(timeout=remaining))
        except ProtocolError as exc:
            raise RemotePolicyError(f"{self.url} sent an unreadable frame: {exc}") from None

    def _reply(self, ws: ClientConnection, seq: int, deadline: float) -> Any:
        while True:
            reply = self._receive(ws, deadline)
            if reply.type is MessageType.ERROR:
                raise RemotePolicyError(f"{self.url} answered ERROR: {reply.payload.get('error', reply.payload)}")
            if reply.type is MessageType.ACTION and reply.seq == seq:
                if "actions" not in reply.payload:
                    raise RemotePolicyError(f"{self.url} sent an ACTION without 'actions': {sorted(reply.payload)}")
                return reply.payload["actions"]
            log.warning(
                "ignoring a %s (seq %d) from %s while waiting for %d", reply.type.value, reply.seq, self.url, seq
            )

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            _close(ws, self.url)

    def _chunk(self, actions: Any) -> ActionChunk:
        array = np.asarray(actions)
        if array.dtype.kind not in "biuf" or array.size == 0 or array.ndim > 2:
            raise RemotePolicyError(f"{self.url} sent actions of dtype {array.dtype} and shape {array.shape}")
        rows = [array.reshape(1)] if array.ndim == 0 else list(array) if array.ndim == 2 else [array]
        if self._discrete:
            return ActionChunk([int(np.asarray(row).reshape(-1)[0]) for row in rows])
        return ActionChunk(rows)


def to_vlaeval(obs: Mapping[str, Any]) -> dict[str, Any]:
    """hylo's observation under vla-eval's keys: `instruction` → `task_description`; the rest as it is."""
    payload = {key: value for key, value in obs.items() if key != "instruction"}
    instruction = obs.get("instruction")
    if instruction is not None:
        payload["task_description"] = str(instruction)
    images = payload.get("images")
    if isinstance(images, Mapping):
        payload["images"] = {str(name): np.ascontiguousarray(image) for name, image in images.items()}
    return payload


def _close(ws: ClientConnection, url: str) -> None:
    try:
        ws.close()
    except Exception as exc:
        log.debug("closing %s: %r", url, exc)


def _version() -> str:
    return __version__


def _why(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
