"""`openpi-remote`: a policy served by openpi's websocket policy server (`scripts/serve_policy.py`), driven as a hylo
agent, without importing openpi.

The protocol is openpi-client 0.1.2's: on connect the server sends its metadata (one msgpack map); then each binary
frame the client sends is an observation and the server answers it with one binary frame, `{"actions": (horizon,
action_dim) array, ...}`. A text frame is the server's traceback of a failure, after which it closes the connection.
Arrays and numpy scalars travel as msgpack maps with bytes keys (`b"__ndarray__"`, `b"__npgeneric__"`), exactly as
openpi-client's `msgpack_numpy` writes them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any, Literal

import msgpack
import numpy as np
from pydantic import Field
from websockets.exceptions import ConnectionClosed, InvalidURI, WebSocketException
from websockets.sync.client import ClientConnection, connect

from hylo.agents.remote_limits import MAX_ACTION_DIM, MAX_BACKOFF_S, MAX_CALL_S, MAX_KEYS, MAX_RETRIES
from hylo.core.agent import MAX_CHUNK, AgentArgs, AgentBase, AgentRequirements, RemoteUrl
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.errors import AgentTimeout, HyloError
from hylo.core.types import Observation
from hylo.envs.images import resize_with_pad

log = logging.getLogger(__name__)

DEFAULT_OBS_MAP: Mapping[str, str] = {
    "observation/image": "images/*",
    "observation/state": "state",
    "prompt": "instruction",
}
"""openpi key → hylo observation path. With the default mapping an entry is sent only when the observation has it."""

LIBERO_OBS_MAP: Mapping[str, str] = {
    "observation/image": "images/agentview",
    "observation/wrist_image": "images/wrist",
    "observation/state": "state",
    "prompt": "instruction",
}
"""What openpi's LIBERO client (`examples/libero/main.py`) sends: both cameras (resized with padding to
`image_size`), the 8-d state (eef position, eef axis-angle, gripper qpos) and the task's language as the prompt."""
LIBERO_IMAGE_SIZE = 224
LIBERO_REPLAN_STEPS = 5
"""openpi's LIBERO client executes 5 actions of each chunk before it asks again."""
PROTOCOLS = ("auto", "generic", "libero")

CLOSE_TIMEOUT_S = 1.0
"""How long closing a connection waits for the server's side of the closing handshake (a server busy inferring
answers late, and a connection abandoned after a timeout must not hold `act` up much past its deadline)."""

_REFUSED_KINDS = frozenset("VOc")
"""numpy dtype kinds openpi's codec refuses (void, object, complex): never encoded, never decoded, so a frame cannot
make the decoder build an object array."""


class RemotePolicyError(HyloError):
    """The policy server broke the protocol (a reply without `actions`, actions of the wrong shape, a malformed
    frame)."""


class RemotePolicyUnreachable(RemotePolicyError):
    """The policy server cannot be reached: at construction (the run does not start), or after a dropped connection
    could not be re-established (the episode ends as `error`)."""


class RemotePolicyFailed(RemotePolicyError):
    """The policy server reported a failure (a text frame holding its traceback); the message's first line names the
    remote exception, the rest is the traceback."""

    def __init__(self, url: str, remote_traceback: str) -> None:
        self.url = url
        self.remote_traceback = remote_traceback
        lines = [line.strip() for line in remote_traceback.strip().splitlines() if line.strip()]
        summary = lines[-1] if lines else "an empty error message"
        super().__init__(f"the policy server at {url} failed: {summary}\n{remote_traceback.rstrip()}")


# -- the codec (openpi-client's msgpack_numpy) -------------------------------------------------------------------------


def _encode(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in _REFUSED_KINDS:
        raise ValueError(f"cannot send a numpy value of dtype {obj.dtype} to an openpi server")
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def _dtype(text: Any) -> np.dtype[Any]:
    dtype = np.dtype(text.decode() if isinstance(text, bytes) else text)
    if dtype.kind in _REFUSED_KINDS:
        raise ValueError(f"refusing to decode a numpy value of dtype {dtype}")
    return dtype


def _decode(obj: dict[Any, Any]) -> Any:
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=_dtype(obj[b"dtype"]), shape=tuple(obj[b"shape"]))
    if b"__npgeneric__" in obj:
        return _dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def packb(obj: Any) -> bytes:
    """Encode `obj` as openpi-client does: msgpack, with numpy arrays and scalars as maps with bytes keys."""
    data: bytes = msgpack.packb(obj, default=_encode)
    return data


def unpackb(data: bytes) -> Any:
    """Decode a frame written by openpi's codec (or `packb`); arrays come back as read-only views of the frame."""
    return msgpack.unpackb(data, object_hook=_decode)


# -- the agent ---------------------------------------------------------------------------------------------------------


def _normal_url(url: object) -> str:
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"url must be a websocket URL like ws://host:8000, got {url!r}")
    url = url.strip()
    if "://" not in url:
        return f"ws://{url}"  # host:port, as openpi-client accepts it
    if not url.startswith(("ws://", "wss://")):
        raise ValueError(f"url must start with ws:// or wss://, got {url!r}")
    return url


def _lookup(obs: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """(found, value) of a `/`-separated path; `*` is a mapping's first entry."""
    node: Any = obs
    for part in path.split("/"):
        if not isinstance(node, Mapping) or not node:
            return False, None
        if part == "*":
            node = next(iter(node.values()))
        elif part in node:
            node = node[part]
        else:
            return False, None
    return True, node


def _describe(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class OpenPiRemoteAgent(AgentBase):
    """Asks a policy served by openpi's websocket server for each action chunk.

    The constructor connects and reads the server's metadata (`self.metadata`), so an unreachable server stops the
    run before any episode starts (`RemotePolicyUnreachable`, naming the URL). Each `act` maps the observation
    (`obs_map`, `passthrough`, `extra`), sends it and turns the reply's `actions` (horizon × action_dim) into an
    `ActionChunk` of which `execution_steps` are executed (default: the whole horizon) before the server is asked
    again. `images` (default true: a VLA policy wants its cameras) declares that the agent needs camera images, so
    the env renders them; a mapping that reads `images` needs them whatever `images` says.

    Failures end the episode as `error`: no reply within `timeout` seconds of the call (connecting included) raises
    `AgentTimeout`, so the reason is `timeout`, and the connection is dropped (a late reply must not answer the next
    call); a text frame raises `RemotePolicyFailed` naming the remote exception. A dropped connection is re-opened
    up to `retries` times, `backoff` seconds apart and doubling, and the observation is sent again; past that, or
    past the call's deadline, `RemotePolicyUnreachable` names the URL. A later call connects afresh, so the next
    episode starts on a new connection.
    """

    name = "openpi-remote"

    class Args(AgentArgs):
        url: RemoteUrl
        timeout: float = Field(default=30.0, gt=0, le=MAX_CALL_S)
        execution_steps: int | None = Field(default=None, ge=1, le=MAX_CHUNK)
        obs_map: dict[str, str] | None = Field(default=None, max_length=MAX_KEYS)
        passthrough: bool = False
        extra: dict[str, Any] | None = Field(default=None, max_length=MAX_KEYS)
        action_dim: int | None = Field(default=None, ge=1, le=MAX_ACTION_DIM)
        retries: int = Field(default=3, ge=0, le=MAX_RETRIES)
        backoff: float = Field(default=0.5, ge=0, le=MAX_BACKOFF_S)
        images: bool = True
        protocol: Literal["auto", "generic", "libero"] = "auto"
        image_size: int = Field(default=LIBERO_IMAGE_SIZE, ge=8, le=1024)

    def __init__(
        self,
        url: str,
        timeout: float = 30.0,
        execution_steps: int | None = None,
        obs_map: Mapping[str, str] | None = None,
        passthrough: bool = False,
        extra: Mapping[str, Any] | None = None,
        action_dim: int | None = None,
        retries: int = 3,
        backoff: float = 0.5,
        images: bool = True,
        protocol: str = "auto",
        image_size: int = LIBERO_IMAGE_SIZE,
    ) -> None:
        self.url = _normal_url(url)
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
        if protocol == "libero" and (obs_map is not None or passthrough):
            raise ValueError("protocol 'libero' sends openpi's LIBERO keys: give it no obs_map and no passthrough")
        if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 8:
            raise ValueError(f"image_size must be an int >= 8, got {image_size!r}")
        self.protocol = protocol
        self.image_size = image_size
        self.libero = protocol == "libero"
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < math.inf):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        self.timeout = float(timeout)
        for arg, value in (("execution_steps", execution_steps), ("action_dim", action_dim)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{arg} must be an int >= 1, got {value!r}")
        self.execution_steps = execution_steps
        self.action_dim = action_dim
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, got {retries!r}")
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not (0 <= backoff < math.inf):
            raise ValueError(f"backoff must be a finite number of seconds >= 0, got {backoff!r}")
        self.retries = retries
        self.backoff = float(backoff)
        if not isinstance(passthrough, bool):
            raise ValueError(f"passthrough must be true or false, got {passthrough!r}")
        self.passthrough = passthrough
        if not isinstance(images, bool):
            raise ValueError(f"images must be true or false, got {images!r}")
        self.obs_map, self._strict = self._check_map(obs_map, passthrough)
        self.extra = self._check_extra(extra)
        self.requirements = self._requirements(images)
        self.metadata: dict[str, Any] = {}
        self._conn: ClientConnection | None = None
        self._closing = ExitStack()
        try:
            self._conn = self._connect(time.monotonic() + self.timeout)
        except TimeoutError:
            raise RemotePolicyUnreachable(
                f"the openpi policy server at {self.url} did not answer within {self.timeout:g} s"
            ) from None
        except (OSError, WebSocketException) as exc:
            raise RemotePolicyUnreachable(
                f"cannot reach the openpi policy server at {self.url}: {_describe(exc)}"
            ) from None

    @staticmethod
    def _check_map(obs_map: Mapping[str, str] | None, passthrough: bool) -> tuple[dict[str, str], bool]:
        """The mapping to apply and whether its sources are required (they are when the user gave it)."""
        if obs_map is None:
            return ({} if passthrough else dict(DEFAULT_OBS_MAP)), False
        if not isinstance(obs_map, Mapping) or not all(
            isinstance(key, str) and key and isinstance(path, str) and path for key, path in obs_map.items()
        ):
            raise ValueError(f"obs_map must map openpi keys to observation paths (non-empty strings), got {obs_map!r}")
        return dict(obs_map), True

    def _check_extra(self, extra: Mapping[str, Any] | None) -> dict[str, Any]:
        if extra is None:
            return {}
        if not isinstance(extra, Mapping) or not all(isinstance(key, str) for key in extra):
            raise ValueError(f"extra must be a mapping of openpi keys to constant values, got {extra!r}")
        clash = sorted(set(extra) & set(self.obs_map))
        if clash:
            raise ValueError(f"extra sets {clash}, which obs_map also maps; give each key one source")
        return dict(extra)

    def _requirements(self, images: bool) -> AgentRequirements:
        """What the agent needs: camera images when `images` (so the env renders them) or when a mapping the user
        gave reads `images`; and the observation keys of such a mapping, each path up to its first `*`."""
        if not self._strict:
            return AgentRequirements(needs_images=images)
        keys: list[str] = []
        for path in self.obs_map.values():
            parts = path.split("/")
            fixed = parts[: parts.index("*")] if "*" in parts else parts
            if not fixed or not all(fixed):
                raise ValueError(f"obs_map path {path!r} must start with an observation key, like images/* or state")
            keys.append("/".join(fixed))
        reads_images = any(key.split("/")[0] == "images" for key in keys)
        return AgentRequirements(observation_keys=tuple(dict.fromkeys(keys)), needs_images=images or reads_images)

    # -- the agent interface ---------------------------------------------------------------------------------

    def reset(self, ctx: EpisodeContext) -> None:
        """`protocol="auto"` speaks openpi's LIBERO protocol on a `libero` episode unless the arguments map the
        observation themselves (`obs_map`, `passthrough`)."""
        super().reset(ctx)
        if self.protocol == "auto":
            self.libero = ctx.task.benchmark == "libero" and not self._strict and not self.passthrough

    def act(self, obs: Observation) -> ActionChunk:
        reply = self._infer(packb(self.request(obs)), time.monotonic() + self.timeout)
        return self._chunk(reply)

    def request(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """The openpi observation sent for `obs`: the passthrough keys, then `obs_map`, then `extra` (with the
        LIBERO protocol: openpi's LIBERO keys, images resized with padding to `image_size`, then `extra`)."""
        if self.libero:
            return self._libero_request(obs)
        request: dict[str, Any] = dict(obs) if self.passthrough else {}
        for key, path in self.obs_map.items():
            found, value = _lookup(obs, path)
            if found:
                request[key] = value
            elif self._strict:
                raise ValueError(
                    f"obs_map sends {key!r} from {path!r}, which the observation lacks (it has {sorted(obs)})"
                )
        request.update(self.extra)
        return request

    def _libero_request(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = {}
        for key, path in LIBERO_OBS_MAP.items():
            found, value = _lookup(obs, path)
            if not found:
                raise ValueError(f"openpi's LIBERO protocol sends {key!r} from {path!r}, which the observation lacks")
            if path.startswith("images/"):
                value = resize_with_pad(np.asarray(value), self.image_size, self.image_size)
            elif key == "observation/state":
                value = np.asarray(value, dtype=np.float32)
            request[key] = value
        request.update(self.extra)
        return request

    def close(self) -> None:
        """Close the connection to the server (the agent reconnects if asked to act again)."""
        self._drop()

    def __enter__(self) -> OpenPiRemoteAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the connection --------------------------------------------------------------------------------------

    def _connect(self, deadline: float) -> ClientConnection:
        """Open a connection and read the server's metadata frame."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no time left to connect to {self.url}")
        stack = ExitStack()  # a connection is a context: closing the stack closes it
        try:
            conn = stack.enter_context(
                connect(self.url, compression=None, max_size=None, open_timeout=left, close_timeout=CLOSE_TIMEOUT_S)
            )
        except InvalidURI as exc:
            raise ValueError(f"url {self.url!r} is not a websocket URL: {exc}") from None
        try:
            frame = conn.recv(timeout=max(deadline - time.monotonic(), 0.0))
            metadata = self._decode_frame(frame)
            if not isinstance(metadata, dict):
                raise RemotePolicyError(
                    f"the server at {self.url} sent {type(metadata).__name__} first, not openpi's metadata map"
                )
        except BaseException:
            stack.close()
            raise
        self._closing = stack
        self.metadata = metadata
        log.debug("connected to the openpi policy server at %s: metadata %r", self.url, metadata)
        return conn

    def _drop(self) -> None:
        closing, self._conn, self._closing = self._closing, None, ExitStack()
        closing.close()

    def _infer(self, payload: bytes, deadline: float) -> Any:
        """Send one observation and return the decoded reply, reconnecting after a dropped connection."""
        failures = 0
        while True:
            try:
                if self._conn is None:
                    self._conn = self._connect(deadline)
                self._conn.send(payload)
                frame = self._conn.recv(timeout=max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                self._drop()
                raise AgentTimeout(None, self.timeout, f"infer at {self.url}") from None
            except (OSError, ConnectionClosed, WebSocketException) as exc:
                self._drop()
                failures += 1
                delay = self.backoff * 2 ** (failures - 1)
                if failures > self.retries or time.monotonic() + delay >= deadline:
                    raise RemotePolicyUnreachable(
                        f"lost the openpi policy server at {self.url}: gave up after {failures} attempts "
                        f"({self.retries} retries within the call's {self.timeout:g} s), the last failing with "
                        f"{_describe(exc)}"
                    ) from None
                log.warning("connection to %s failed (%s); retrying in %.2f s", self.url, _describe(exc), delay)
                time.sleep(delay)
                continue
            try:
                return self._decode_frame(frame)
            except RemotePolicyError:
                self._drop()  # the server closes after an error, and a stream out of step is no use
                raise

    def _decode_frame(self, frame: str | bytes) -> Any:
        if isinstance(frame, str):
            raise RemotePolicyFailed(self.url, frame)
        try:
            return unpackb(frame)
        except (ValueError, TypeError, LookupError, msgpack.UnpackException) as exc:
            raise RemotePolicyError(f"the server at {self.url} sent a malformed frame: {_describe(exc)}") from None

    def _chunk(self, reply: Any) -> ActionChunk:
        if not isinstance(reply, Mapping) or "actions" not in reply:
            keys = sorted(map(str, reply)) if isinstance(reply, Mapping) else type(reply).__name__
            raise RemotePolicyError(f"the server at {self.url} replied without 'actions' (got {keys})")
        actions = np.asarray(reply["actions"])
        if actions.ndim != 2 or actions.shape[0] < 1 or actions.dtype.kind not in "biuf":
            raise RemotePolicyError(
                f"the server at {self.url} sent actions of shape {actions.shape} and dtype {actions.dtype}; "
                "expected numbers of shape (horizon, action_dim)"
            )
        if self.action_dim is not None:
            if actions.shape[1] < self.action_dim:
                raise RemotePolicyError(
                    f"the server at {self.url} sent {actions.shape[1]}-d actions; action_dim is {self.action_dim}"
                )
            actions = actions[:, : self.action_dim]
        horizon = actions.shape[0]
        steps = self.execution_steps
        if steps is None:
            steps = min(LIBERO_REPLAN_STEPS, horizon) if self.libero else horizon
        if steps > horizon:
            raise RemotePolicyError(
                f"the server at {self.url} sent a chunk of {horizon} actions; execution_steps is {steps}"
            )
        return ActionChunk(np.array(actions), execution_steps=steps)  # a writable copy, not a view of the frame
