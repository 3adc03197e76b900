"""The wire between a worker and a server-mode nodeset's subprocess: length-prefixed msgpack frames.

Arrays of bool, integer and float dtypes travel raw (`hylo.core.codec`, the vla-eval encoding); tuples, numpy
scalars, observations, action chunks, tasks, step results, outcomes and signals keep their types; anything else
travels pickled (both ends are this worker and its own child). An exception travels by type (`hylo.core.child`):
`NodeFailure` too, besides the errors that decide an episode's status.
"""

from __future__ import annotations

import dataclasses
import pickle
import socket
import struct
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import msgpack
import numpy as np

from hylo.core.child import RemoteError, RemoteTraceback, carry, error_payload, rebuild_error
from hylo.core.chunk import ActionChunk
from hylo.core.codec import ARRAY_KINDS, decode_array, encode_array
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Observation, StepResult, TaskInstance
from hylo.graph.node import NodeFailure

__all__ = ["RemoteNodeError", "RemoteTraceback", "encode_frame", "error_payload", "read_frame", "rebuild_error"]

carry(NodeFailure)

RemoteNodeError = RemoteError
"""What a node's exception of a type that does not decide a status becomes in the worker."""

_HEADER = struct.Struct(">I")
_TAG = "__hylo__"


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


_ENCODERS: dict[type, Callable[[Any], Any]] = {
    tuple: lambda o: {_TAG: "tuple", "v": list(o)},
    MappingProxyType: dict,
    Observation: lambda o: {_TAG: "obs", "v": dict(o)},
    ActionChunk: lambda o: {_TAG: "chunk", "v": list(o.actions), "n": o.execution_steps},
    StepResult: lambda o: {_TAG: "step", "v": list(o)},
    TaskInstance: lambda o: {_TAG: "TaskInstance", "v": _fields(o)},
    EpisodeOutcome: lambda o: {_TAG: "EpisodeOutcome", "v": {**_fields(o), "status": o.status.value}},
    Signal: lambda o: {_TAG: "signal", "v": o.value},
}
"""How each type that keeps its type on the wire is encoded, by exact type (`_DECODERS` reads them back)."""


def _encode(obj: Any) -> Any:
    """msgpack's `default` (with `strict_types`, so subclasses and tuples come here too)."""
    if isinstance(obj, np.ndarray) and obj.dtype.kind in ARRAY_KINDS:
        return encode_array(obj)
    if isinstance(obj, np.generic) and obj.dtype.kind in ARRAY_KINDS:
        return {_TAG: "scalar", "v": encode_array(np.asarray(obj))}
    kind = type(obj)
    encoder = _ENCODERS.get(kind)
    if encoder is not None:
        return encoder(obj)
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
