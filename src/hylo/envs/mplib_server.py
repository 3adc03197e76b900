"""mplib's `Planner` served over a pipe: run as a script (`python -P mplib_server.py`) in the process of its own that
`hylo.envs.maniskill_planner` starts, where numpy 1.26 comes first on the path. It imports nothing of hylo: only
msgpack, numpy and mplib. Messages are length-prefixed msgpack; arrays cross as (dtype, shape, bytes).

A request is `[planner id, method, args, kwargs]` (`create` makes a planner: its args are numpy's seed, its kwargs
`mplib.Planner`'s; `setattr` sets one of its attributes); the reply is `[True, value]` or `[False, "Type: message"]`.
"""

from __future__ import annotations

import struct
import sys
from typing import IO, Any

import msgpack
import numpy as np

_ARRAY = 1  # msgpack ext code of an ndarray
KEPT = 4
"""Planners kept at once (each episode makes one; the oldest is dropped)."""


def pack(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return msgpack.ExtType(_ARRAY, msgpack.packb([array.dtype.str, list(array.shape), array.tobytes()]))
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot send {type(value).__name__} to the planner")


def unpack(code: int, data: bytes) -> Any:
    if code != _ARRAY:
        return msgpack.ExtType(code, data)
    dtype, shape, raw = msgpack.unpackb(data)
    return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()


def write(stream: IO[bytes], message: Any) -> None:
    body: bytes = msgpack.packb(message, default=pack, use_bin_type=True)
    stream.write(struct.pack("<I", len(body)) + body)
    stream.flush()


def read(stream: IO[bytes]) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError("the planner's pipe closed")
    (size,) = struct.unpack("<I", head)
    return msgpack.unpackb(stream.read(size), ext_hook=unpack, raw=False, strict_map_key=False)


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    import mplib  # optional: the maniskill extra, on the planner's own path

    planners: dict[int, Any] = {}  # the latest few: a planner serves one episode
    made = 0
    while True:
        try:
            target, method, args, kwargs = read(stdin)
        except EOFError:
            return
        try:
            if method == "create":
                np.random.seed(args[0])
                planner = mplib.Planner(**kwargs)  # type: ignore[attr-defined]
                made += 1
                planners[made] = planner
                planners.pop(made - KEPT, None)
                limits = {name: np.asarray(getattr(planner, name), np.float64)
                          for name in ("joint_vel_limits", "joint_acc_limits")}  # fmt: skip
                value: Any = [made, limits]
            elif method == "setattr":
                setattr(planners[target], args[0], args[1])
                value = None
            else:
                value = getattr(planners[target], method)(*args, **kwargs)
            write(stdout, [True, value])
        except Exception as exc:
            write(stdout, [False, f"{type(exc).__name__}: {exc}"])


if __name__ == "__main__":
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # what mplib prints must not reach the pipe
    serve(sys.stdin.buffer, out)
