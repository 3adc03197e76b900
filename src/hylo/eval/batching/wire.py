"""How a policy host and its workers put a message on their connection: pickled, large arrays out of band.

A request's weight is its observation's images (four 480×640 RGB cameras are 3.7 MB). Pickled into the stream, an
image is copied into the pickle; on the other side `Connection.recv` reads the stream in chunks into a buffer it
regrows at each chunk, and unpickling copies it out once more. Here every buffer of at least `OUT_OF_BAND_BYTES`
(a contiguous numpy array's memory) leaves the pickle (pickle protocol 5's out-of-band buffers): it is written from
the array's own memory as a frame of its own, and read from the socket straight into the memory of the array the
receiver gets. Smaller buffers (a state vector, an action) stay in the pickle: one frame costs less than two.
`benchmarks/batched_policy.py --wire` measures both ways in one run.

A message is one frame holding the count and sizes of its out-of-band buffers and the pickle, then a frame per
buffer, each framed as `Connection.send_bytes` frames it (a 4-byte big-endian length; beyond 2 GiB, -1 then an
8-byte length), so both ends can still use the connection's own `poll`. Whoever is on the other end has proved the
run's key before anything is unpickled (`multiprocessing.connection`'s authentication).
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

import numpy as np

from hylo.core.errors import HyloFailure

OUT_OF_BAND_BYTES = 64 * 1024
"""The smallest buffer sent out of band (read at each `send_message`: a sender may change it)."""

MAX_BUFFERS = 1024
"""The most out-of-band buffers one message may have."""

MAX_BUFFER_BYTES = 2**32
"""The largest out-of-band buffer a receiver accepts (4 GiB)."""

_COUNT = struct.Struct("!I")
_SIZE = struct.Struct("!Q")
_LENGTH = struct.Struct("!i")


class WireError(HyloFailure, OSError):
    """A message that does not follow the framing: the connection is no longer usable (an `OSError`, as a broken
    connection is)."""


def send_message(conn: Any, message: Any) -> None:
    """Send `message` on `conn` (a `multiprocessing.connection.Connection`)."""
    threshold = OUT_OF_BAND_BYTES
    buffers: list[memoryview] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        try:
            view = buffer.raw()
        except BufferError:  # not contiguous: pickled in the stream
            return True
        if view.nbytes < threshold:
            return True
        buffers.append(view)
        return False

    body = pickle.dumps(message, protocol=5, buffer_callback=out_of_band)
    sizes = b"".join(_SIZE.pack(view.nbytes) for view in buffers)
    conn.send_bytes(_COUNT.pack(len(buffers)) + sizes + body)
    for view in buffers:
        conn.send_bytes(view)


def recv_message(conn: Any) -> Any:
    """The next message on `conn`; raises `EOFError` or `OSError` (`WireError`) when the connection is gone or
    broken, as `Connection.recv` does."""
    head = conn.recv_bytes()
    try:
        (count,) = _COUNT.unpack_from(head)
        if count > MAX_BUFFERS:
            raise WireError(f"a message with {count} out-of-band buffers (at most {MAX_BUFFERS})")
        sizes = struct.unpack_from(f"!{count}Q", head, _COUNT.size)
    except struct.error:
        raise WireError("a message too short for its header") from None
    buffers = [_read_buffer(conn.fileno(), size) for size in sizes]
    return pickle.loads(memoryview(head)[_COUNT.size + _SIZE.size * count :], buffers=buffers)


def _read_buffer(fd: int, size: int) -> np.ndarray[Any, Any]:
    """One out-of-band buffer's frame, read from `fd` into a new array of its own."""
    if size > MAX_BUFFER_BYTES:
        raise WireError(f"an out-of-band buffer of {size} bytes (at most {MAX_BUFFER_BYTES})")
    (length,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size))
    if length == -1:
        (length,) = _SIZE.unpack(_read_exact(fd, _SIZE.size))
    if length != size:
        raise WireError(f"an out-of-band frame of {length} bytes where its header said {size}")
    buffer = np.empty(size, dtype=np.uint8)
    _read_into(fd, buffer.data)
    return buffer


def _read_exact(fd: int, size: int) -> bytearray:
    buffer = bytearray(size)
    _read_into(fd, memoryview(buffer))
    return buffer


def _read_into(fd: int, view: memoryview) -> None:
    while view.nbytes:
        read = os.readv(fd, [view])
        if read == 0:
            raise EOFError("the connection closed in the middle of a message")
        view = view[read:]
