"""The vla-eval wire protocol (vla-eval 0.8.0, protocol version 1), spoken by hylo without importing vla-eval.

Each WebSocket frame is one msgpack map `{"type", "payload", "seq", "timestamp"}`. Arrays travel as
`{"__ndarray__": True, "data", "dtype", "shape"}`; HWC uint8 images with 1, 3 or 4 channels as
`{"__image__": True, "format": "png" | "jpeg" | "raw", "data", "shape"}`. Only bool, integer and float dtypes are
accepted, so a frame can never make the decoder build an object array.
"""

from __future__ import annotations

import hashlib
import io
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgpack
import numpy as np
from PIL import Image

from hylo.core.errors import HyloError

PROTOCOL_VERSION = 1

_NDARRAY = "__ndarray__"
_IMAGE = "__image__"
_DTYPE_KINDS = frozenset("biuf")
_IMAGE_CHANNELS = (1, 3, 4)


class MessageType(StrEnum):
    HELLO = "hello"
    OBSERVATION = "observation"
    ACTION = "action"
    EPISODE_START = "episode_start"
    EPISODE_END = "episode_end"
    ERROR = "error"


class ProtocolError(HyloError, ValueError):
    """A frame that is not a valid vla-eval message; the message says what is wrong with it."""


@dataclass(frozen=True, slots=True)
class Message:
    type: MessageType
    payload: dict[str, Any]
    seq: int = 0
    timestamp: float = field(default_factory=time.time)


class EncodedImage(np.ndarray):
    """A decoded image that remembers the digest of the bytes it came in (`encoding`, `encoded_digest`): hashing the
    few kilobytes of a PNG identifies the image as well as hashing its pixels (PNG is lossless), at a fraction of
    the cost. Take `.view(np.ndarray)` for a plain array."""

    encoding: str
    encoded_digest: str


def is_image(array: np.ndarray[Any, Any]) -> bool:
    """What vla-eval sends as an image: an HWC uint8 array with 1, 3 or 4 channels."""
    return array.ndim == 3 and array.dtype == np.uint8 and array.shape[2] in _IMAGE_CHANNELS


def encode_image(image: np.ndarray[Any, Any]) -> dict[str, Any]:
    """A PNG frame of an HWC uint8 image (a 1-channel image is stored as greyscale and keeps its HxWx1 shape)."""
    pixels = image[:, :, 0] if image.shape[2] == 1 else image
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG", compress_level=1)
    return {_IMAGE: True, "format": "png", "data": buffer.getvalue(), "shape": list(image.shape)}


def decode_image(frame: dict[str, Any]) -> np.ndarray[Any, Any]:
    """The HWC uint8 array of an `__image__` frame (png, jpeg or raw)."""
    fmt = frame.get("format")
    shape = frame.get("shape")
    data = frame.get("data")
    if not isinstance(data, bytes):
        raise ProtocolError(f"__image__ frame without bytes in 'data' (got {type(data).__name__})")
    if fmt == "raw":
        return _ndarray(data, frame.get("dtype", "|u1"), shape)
    if fmt not in ("png", "jpeg"):
        raise ProtocolError(f"__image__ frame of unknown format {fmt!r}; expected png, jpeg or raw")
    try:
        with Image.open(io.BytesIO(data)) as img:
            array = np.array(img)
    except Exception as exc:
        raise ProtocolError(f"cannot decode a {fmt} image of {len(data)} bytes: {exc}") from None
    if array.ndim == 2:
        array = array[:, :, None]
    if isinstance(shape, list) and len(shape) == 3 and list(array.shape) != shape:
        raise ProtocolError(f"{fmt} image decodes to shape {list(array.shape)}, the frame declares {shape}")
    image = array.view(EncodedImage)
    image.encoding = fmt
    image.encoded_digest = hashlib.blake2b(data, digest_size=12).hexdigest()
    return image


def _ndarray(data: Any, dtype_text: Any, shape: Any) -> np.ndarray[Any, Any]:
    try:
        dtype = np.dtype(dtype_text)
    except TypeError:
        raise ProtocolError(f"__ndarray__ frame with unknown dtype {dtype_text!r}") from None
    if dtype.kind not in _DTYPE_KINDS:
        raise ProtocolError(f"__ndarray__ dtype {dtype} refused: only bool, integer and float arrays are accepted")
    if not isinstance(data, bytes) or not isinstance(shape, list):
        raise ProtocolError("__ndarray__ frame needs bytes in 'data' and a list in 'shape'")
    try:
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    except ValueError as exc:
        raise ProtocolError(
            f"__ndarray__ of {len(data)} bytes does not fit dtype {dtype} shape {shape}: {exc}"
        ) from None


def _decode_hook(obj: dict[Any, Any]) -> Any:
    if _IMAGE in obj:
        return decode_image(obj)
    if _NDARRAY in obj:
        return _ndarray(obj.get("data"), obj.get("dtype"), obj.get("shape"))
    return obj


def _encode_plain(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return {
            _NDARRAY: True,
            "data": np.ascontiguousarray(obj).tobytes(),
            "dtype": obj.dtype.str,
            "shape": list(obj.shape),
        }
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(f"cannot send a {type(obj).__name__} over the vla-eval protocol")


def _encode_images(obj: Any) -> Any:
    if isinstance(obj, np.ndarray) and is_image(obj):
        return encode_image(obj)
    return _encode_plain(obj)


def pack(
    kind: MessageType, payload: dict[str, Any], seq: int = 0, *, images: bool = False, timestamp: float | None = None
) -> bytes:
    """One frame. `images=True` sends HWC uint8 arrays as PNG (what vla-eval's benchmark client does); otherwise
    every array travels raw."""
    raw = {
        "type": kind.value,
        "payload": payload,
        "seq": seq,
        "timestamp": time.time() if timestamp is None else timestamp,
    }
    data: bytes = msgpack.packb(raw, default=_encode_images if images else _encode_plain, use_bin_type=True)
    return data


def unpack(data: bytes | str) -> Message:
    """Decode one frame; raises `ProtocolError` naming what is wrong."""
    if isinstance(data, str):
        raise ProtocolError("text frame received; the vla-eval protocol sends binary msgpack frames")
    try:
        raw = msgpack.unpackb(data, object_hook=_decode_hook, raw=False)
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"cannot decode a msgpack frame of {len(data)} bytes: {exc}") from None
    if not isinstance(raw, dict):
        raise ProtocolError(f"a frame must be a msgpack map, got {type(raw).__name__}")
    missing = [key for key in ("type", "payload", "seq") if key not in raw]
    if missing:
        raise ProtocolError(f"frame lacks {missing}; it has {sorted(map(str, raw))}")
    try:
        kind = MessageType(raw["type"])
    except ValueError:
        raise ProtocolError(
            f"unknown message type {raw['type']!r}; expected one of {[t.value for t in MessageType]}"
        ) from None
    payload = raw["payload"]
    if not isinstance(payload, dict):
        raise ProtocolError(f"{kind.value} payload must be a map, got {type(payload).__name__}")
    seq = raw["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise ProtocolError(f"seq must be an integer, got {seq!r}")
    stamp = raw.get("timestamp", 0.0)
    return Message(kind, payload, seq, float(stamp) if isinstance(stamp, (int, float)) else 0.0)
