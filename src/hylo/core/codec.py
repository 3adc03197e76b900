"""Arrays in msgpack, and msgpack decoding within bounds: what every binary wire of hylo shares (the vla-eval
protocol, a server-mode nodeset's subprocess).

An array travels as `{"__ndarray__": True, "data", "dtype", "shape"}` (vla-eval's encoding). Only bool, integer and
float dtypes travel, so a frame can never make the decoder build an object array, and an array's bytes must match
its declared shape and dtype before anything is allocated. `bounded_loads` reads a frame from a peer that is not
trusted: at most `MAX_FRAME_VALUES` values (list items and map entries; an empty list or map costs as much as a
one-byte value on the wire but some 70 bytes once decoded) and strings of at most `MAX_STRING_BYTES`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from hylo.core.errors import HyloError

NDARRAY = "__ndarray__"

ARRAY_KINDS = frozenset("biuf")
"""The dtype kinds that travel: bool, signed and unsigned integers, floats."""

MAX_FRAME_VALUES = 100_000
"""The values (list items and map entries, counting each list and map itself) one frame may hold: arrays travel as
bytes, so a vla-eval message holds a few dozen."""

MAX_STRING_BYTES = 2**20
"""The longest string a frame may hold (1 MiB): instructions and task names are short."""


class ProtocolError(HyloError, ValueError):
    """A frame that is not a valid message of its wire; the message says what is wrong with it."""


def encode_array(array: np.ndarray[Any, Any], over: str = "the wire") -> dict[str, Any]:
    """The map an array travels as; raises `ProtocolError` for a dtype that does not travel (`over` names the wire in
    the message)."""
    if array.dtype.kind not in ARRAY_KINDS:
        raise ProtocolError(
            f"cannot send an array of dtype {array.dtype} over {over}: only bool, integer and float arrays travel"
        )
    return {NDARRAY: True, "data": np.ascontiguousarray(array).tobytes(), "dtype": array.dtype.str,
            "shape": list(array.shape)}  # fmt: skip


def ndarray(data: Any, dtype_text: Any, shape: Any) -> np.ndarray[Any, Any]:
    """The array of an `__ndarray__` map's fields, each checked (its bytes against its shape and dtype) before
    anything is allocated; a copy, so that it owns its memory and is writable."""
    if not isinstance(dtype_text, str):
        raise ProtocolError(f"__ndarray__ frame with a bad dtype {dtype_text!r}; expected a dtype string like '<f4'")
    try:
        dtype = np.dtype(dtype_text)
    except (TypeError, ValueError):
        raise ProtocolError(f"__ndarray__ frame with unknown dtype {dtype_text!r}") from None
    if dtype.kind not in ARRAY_KINDS:
        raise ProtocolError(f"__ndarray__ dtype {dtype} refused: only bool, integer and float arrays are accepted")
    if not isinstance(data, bytes) or not isinstance(shape, list):
        raise ProtocolError("__ndarray__ frame needs bytes in 'data' and a list in 'shape'")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ProtocolError(f"__ndarray__ frame with a bad shape {shape!r}; expected a list of sizes >= 0")
    expected = math.prod(shape) * dtype.itemsize
    if expected != len(data):
        raise ProtocolError(
            f"__ndarray__ of {len(data)} bytes does not fit dtype {dtype} shape {shape} ({expected} bytes)"
        )
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def decode_array(obj: dict[Any, Any]) -> Any:
    """msgpack object hook: a map written by `encode_array` back to its array; any other map as it is."""
    if NDARRAY in obj:
        return ndarray(obj.get("data"), obj.get("dtype"), obj.get("shape"))
    return obj


class Budget:
    """The values left to a frame while msgpack builds it: each list and map, and each of their items, takes one.
    `on_map` and `on_list` are msgpack's hooks; `object_hook` decodes a map (an array, an image) once counted."""

    __slots__ = ("left", "object_hook", "size")

    def __init__(self, size: int, object_hook: Callable[[dict[Any, Any]], Any] | None = None) -> None:
        self.left = MAX_FRAME_VALUES
        self.size = size
        self.object_hook = object_hook

    def take(self, count: int) -> None:
        self.left -= count + 1
        if self.left < 0:
            raise ProtocolError(
                f"a frame of {self.size} bytes holds more than {MAX_FRAME_VALUES} values (list items and map entries)"
            )

    def on_map(self, obj: dict[Any, Any]) -> Any:
        self.take(len(obj))
        return obj if self.object_hook is None else self.object_hook(obj)

    def on_list(self, items: list[Any]) -> list[Any]:
        self.take(len(items))
        return items


LIMITS = {"max_str_len": MAX_STRING_BYTES, "max_array_len": MAX_FRAME_VALUES, "max_map_len": MAX_FRAME_VALUES}
"""msgpack's own limits for a bounded frame (its unpacker's keyword arguments)."""


def bounded_loads(data: bytes, object_hook: Callable[[dict[Any, Any]], Any]) -> Any:
    """msgpack, within the bounds of a frame: `MAX_FRAME_VALUES`, `MAX_STRING_BYTES` and msgpack's own nesting limit
    (a frame deeper than that is refused as nested too deeply)."""
    budget = Budget(len(data), object_hook)
    try:
        return msgpack.unpackb(data, raw=False, object_hook=budget.on_map, list_hook=budget.on_list, **LIMITS)
    except msgpack.StackError:
        raise ProtocolError(f"a frame of {len(data)} bytes is nested too deeply to decode") from None
