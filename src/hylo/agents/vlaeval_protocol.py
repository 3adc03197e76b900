"""The vla-eval wire protocol (vla-eval 0.8.0, protocol version 1), spoken by hylo without importing vla-eval.

Each WebSocket frame is one msgpack map `{"type", "payload", "seq", "timestamp"}`. Arrays travel as
`{"__ndarray__": True, "data", "dtype", "shape"}` (`hylo.core.codec`); HWC uint8 images with 1, 3 or 4 channels as
`{"__image__": True, "format": "png" | "jpeg" | "raw", "data", "shape"}`. Only bool, integer and float dtypes are
accepted, so a frame can never make the decoder build an object array. Sizes are checked before anything is allocated,
so that a frame decodes to about its own size plus its images, whatever it holds:

- an array's bytes must match its declared shape and dtype;
- the compressed images a frame decodes declare at most `MAX_FRAME_PIXELS` together, checked before the first is
  decoded, and each one's header must match its declared shape, so a small frame cannot decompress into gigabytes;
- a frame holds at most `MAX_FRAME_VALUES` values (list items and map entries; an empty list or map costs as much
  as a one-byte value on the wire but some 70 bytes once decoded), strings of at most `MAX_STRING_BYTES`, nested
  at most `MAX_NESTING` deep.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgpack
import numpy as np
from PIL import Image

from hylo.core import codec
from hylo.core.codec import ARRAY_KINDS, LIMITS, Budget, bounded_loads, ndarray
from hylo.core.codec import MAX_FRAME_VALUES as MAX_FRAME_VALUES
from hylo.core.codec import MAX_STRING_BYTES as MAX_STRING_BYTES
from hylo.core.codec import ProtocolError as ProtocolError

PROTOCOL_VERSION = 1

_IMAGE = "__image__"
_IMAGE_CHANNELS = (1, 3, 4)
_MODE_CHANNELS = {"L": 1, "RGB": 3, "RGBA": 4}

MAX_FRAME_PIXELS = 16 * 2**20
"""The pixels (height × width) of the compressed images one frame may make the decoder decode, together: four
2048×2048 cameras, or sixteen at 1024×1024 (at most 64 MiB decoded, 4 bytes a pixel). A frame over it is refused
before any of its images is decoded."""

MAX_IMAGE_PIXELS = MAX_FRAME_PIXELS
"""The largest compressed image (height × width) `decode_image` accepts, checked against the image's own header."""

MAX_NESTING = 32
"""How deeply lists and maps may nest in a frame's payload."""

_SEQ_RANGE = range(-(2**63), 2**64)  # the integers msgpack carries, so any seq read can be sent back


class MessageType(StrEnum):
    HELLO = "hello"
    OBSERVATION = "observation"
    ACTION = "action"
    EPISODE_START = "episode_start"
    EPISODE_END = "episode_end"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Message:
    type: MessageType
    payload: dict[str, Any]
    seq: int = 0
    timestamp: float = field(default_factory=time.time)


class EncodedImage(np.ndarray):  # type: ignore[type-arg]
    """A decoded image that remembers the digest of the bytes it came in (`encoding`, `encoded_digest`): hashing the
    few kilobytes of a PNG identifies the image as well as hashing its pixels (PNG is lossless), at a fraction of
    the cost. Take `.view(np.ndarray)` for a plain array."""

    encoding: str
    encoded_digest: str


@dataclass(frozen=True, slots=True)
class UndecodedImage:
    """A compressed image left as it came (for an agent that declared it needs no images): its format, bytes and
    declared shape; `digest` names it in the trace as `EncodedImage.encoded_digest` would."""

    encoding: str
    data: bytes
    shape: tuple[int, ...]

    @property
    def digest(self) -> str:
        return hashlib.blake2b(self.data, digest_size=12).hexdigest()


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
    """The HWC uint8 array of an `__image__` frame (png, jpeg or raw). A compressed image's header is checked
    against the declared `shape` (and `MAX_IMAGE_PIXELS`) before it is decoded."""
    fmt = frame.get("format")
    shape = frame.get("shape")
    data = frame.get("data")
    if not isinstance(data, bytes):
        raise ProtocolError(f"__image__ frame without bytes in 'data' (got {type(data).__name__})")
    if fmt == "raw":
        return ndarray(data, frame.get("dtype", "|u1"), shape)
    if fmt not in ("png", "jpeg"):
        raise ProtocolError(f"__image__ frame of unknown format {fmt!r}; expected png, jpeg or raw")
    declared = _image_shape(shape)
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
            channels = _MODE_CHANNELS.get(img.mode)
            if channels is None:
                raise ProtocolError(f"{fmt} image of mode {img.mode!r} refused; expected L, RGB or RGBA")
            if [height, width, channels] != declared:
                raise ProtocolError(
                    f"{fmt} image is {[height, width, channels]} (height, width, channels); "
                    f"the frame declares {declared}"
                )
            if height * width > MAX_IMAGE_PIXELS:
                raise ProtocolError(
                    f"{fmt} image of {height}x{width} pixels refused: over the {MAX_IMAGE_PIXELS} pixel limit"
                )
            array = np.array(img)
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"cannot decode a {fmt} image of {len(data)} bytes: {exc}") from None
    if array.ndim == 2:
        array = array[:, :, None]
    if list(array.shape) != declared or array.dtype != np.uint8:
        raise ProtocolError(f"{fmt} image decodes to {array.dtype} {list(array.shape)}, the frame declares {declared}")
    image = array.view(EncodedImage)
    image.encoding = fmt
    image.encoded_digest = hashlib.blake2b(data, digest_size=12).hexdigest()
    return image


def _image_shape(shape: Any) -> list[int]:
    """The declared [height, width, channels] of a compressed image, checked."""
    if (
        not isinstance(shape, list)
        or len(shape) != 3
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        or shape[2] not in _IMAGE_CHANNELS
    ):
        raise ProtocolError(f"__image__ frame with a bad shape {shape!r}; expected [height, width, 1 | 3 | 4]")
    return list(shape)


class _PendingImage:
    """An `__image__` frame met while unpacking, decoded once the whole frame is read (several at once)."""

    __slots__ = ("frame",)

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame


def decode_array(obj: dict[Any, Any]) -> Any:
    """msgpack object hook: a map written by `encode_array` (an array, a number, an image) back to its value."""
    if _IMAGE in obj:
        return _PendingImage(obj) if obj.get("format") in ("png", "jpeg") else decode_image(obj)
    return codec.decode_array(obj)


_decoders: ThreadPoolExecutor | None = None
_decoders_lock = threading.Lock()


def _decode_all(pending: list[_PendingImage]) -> list[np.ndarray[Any, Any]]:
    """Decode a frame's compressed images; two or more at once on a thread pool (Pillow's decoders release the
    interpreter), so a multi-camera observation costs about one decode of wall time, not one per camera."""
    global _decoders
    if len(pending) < 2:
        return [decode_image(image.frame) for image in pending]
    with _decoders_lock:
        if _decoders is None:
            _decoders = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="hylo-png")
        pool = _decoders
    return list(pool.map(decode_image, [image.frame for image in pending]))


def _undecoded(frame: dict[str, Any]) -> UndecodedImage:
    data = frame.get("data")
    if not isinstance(data, bytes):
        raise ProtocolError(f"__image__ frame without bytes in 'data' (got {type(data).__name__})")
    return UndecodedImage(str(frame.get("format")), data, tuple(_image_shape(frame.get("shape"))))


def _resolve(value: Any, pending: list[_PendingImage], depth: int = 0) -> None:
    """Collect the pending images of a decoded frame (first pass), refusing one nested deeper than `MAX_NESTING` ..."""
    if isinstance(value, _PendingImage):
        pending.append(value)
    elif isinstance(value, (dict, list)):
        if depth >= MAX_NESTING:
            raise ProtocolError(f"a frame nested too deeply (more than {MAX_NESTING} levels of lists and maps)")
        for item in value.values() if isinstance(value, dict) else value:
            _resolve(item, pending, depth + 1)


def _substitute(value: Any, decoded: dict[int, Any]) -> Any:
    """... then put each one's array in its place (second pass)."""
    if isinstance(value, _PendingImage):
        return decoded[id(value)]
    if isinstance(value, dict):
        return {key: _substitute(item, decoded) for key, item in value.items()}
    if isinstance(value, list):
        return [_substitute(item, decoded) for item in value]
    return value


def encode_array(obj: Any) -> Any:
    """msgpack default: a numpy array or scalar as vla-eval's map form (raises `ProtocolError` for other types)."""
    if isinstance(obj, np.ndarray):
        return codec.encode_array(obj, "the vla-eval protocol")
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(f"cannot send a {type(obj).__name__} over the vla-eval protocol")


def wire_action(action: Any) -> np.ndarray[Any, Any]:
    """`action` as the array an ACTION carries (a scalar becomes a 1-element array); raises `ProtocolError` naming
    what cannot travel: a non-numeric action (a dict, a string, objects) or an empty one."""
    try:
        array = np.asarray(action)
    except Exception as exc:
        raise ProtocolError(f"a {type(action).__name__} action cannot be sent as an array: {exc}") from None
    if array.dtype.kind not in ARRAY_KINDS:
        raise ProtocolError(
            f"a {type(action).__name__} action (dtype {array.dtype}); only bool, integer and float arrays travel "
            "over the vla-eval protocol"
        )
    if array.size == 0:
        raise ProtocolError(f"an empty action (shape {array.shape})")
    return array.reshape(1) if array.ndim == 0 else array


def _encode_images(obj: Any) -> Any:
    if isinstance(obj, np.ndarray) and is_image(obj):
        return encode_image(obj)
    return encode_array(obj)


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
    data: bytes = msgpack.packb(raw, default=_encode_images if images else encode_array, use_bin_type=True)
    return data


def unpack(data: bytes | str, *, decode_images: bool = True, max_pixels: int | None = None) -> Message:
    """Decode one frame; raises `ProtocolError` naming what is wrong. With `decode_images=False`, the PNG and JPEG
    images under the payload's `images` key stay compressed (`UndecodedImage`); those elsewhere are decoded. The
    images decoded may declare `max_pixels` together (default `MAX_FRAME_PIXELS`)."""
    if isinstance(data, str):
        raise ProtocolError("text frame received; the vla-eval protocol sends binary msgpack frames")
    try:
        return _unpack(data, decode_images, MAX_FRAME_PIXELS if max_pixels is None else max_pixels)
    except RecursionError:
        raise ProtocolError(f"a frame of {len(data)} bytes is nested too deeply to decode") from None


def frame_header(data: bytes | str) -> tuple[str | None, int]:
    """The `type` and `seq` of a frame that does not decode as a message, as far as they can be read (else None and
    0): the top map's entries are read one by one, the others skipped unbuilt, so even a frame refused for what its
    payload holds can be answered."""
    if not isinstance(data, bytes) or not data:
        return None, 0
    budget = Budget(len(data))
    unpacker = msgpack.Unpacker(
        raw=False, object_hook=budget.on_map, list_hook=budget.on_list, max_buffer_size=len(data), **LIMITS
    )
    unpacker.feed(data)
    kind: str | None = None
    seq = 0
    try:
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key == "type":
                value = unpacker.unpack()
                kind = value if isinstance(value, str) else None
            elif key == "seq":
                value = unpacker.unpack()
                valid = isinstance(value, int) and not isinstance(value, bool) and value in _SEQ_RANGE
                seq = value if valid else 0
            else:
                unpacker.skip()
    except Exception:
        pass  # what was read so far is all that can be
    return kind, seq


def _unpack(data: bytes, decode_images: bool, max_pixels: int) -> Message:
    try:
        raw = bounded_loads(data, decode_array)
    except (ProtocolError, RecursionError):
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
    pending: list[_PendingImage] = []
    _resolve(payload, pending)
    if pending:
        cameras: list[_PendingImage] = []
        if not decode_images and isinstance(payload, dict):
            _resolve(payload.get("images"), cameras)
        skipped = {id(image) for image in cameras}
        todo = [image for image in pending if id(image) not in skipped]
        _check_pixels(todo, max_pixels)
        decoded: dict[int, Any] = {id(image): array for image, array in zip(todo, _decode_all(todo), strict=True)}
        decoded.update({id(image): _undecoded(image.frame) for image in cameras})
        payload = _substitute(payload, decoded)
    if not isinstance(payload, dict):
        raise ProtocolError(f"{kind.value} payload must be a map, got {type(payload).__name__}")
    seq = raw["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise ProtocolError(f"seq must be an integer, got {seq!r}")
    stamp = raw.get("timestamp", 0.0)
    return Message(kind, payload, seq, float(stamp) if isinstance(stamp, (int, float)) else 0.0)


def _check_pixels(images: list[_PendingImage], limit: int) -> None:
    """Refuse a frame whose compressed images declare more than `limit` pixels together, before any is decoded
    (each image's header is then checked against its declared shape, so the decoded pixels stay within it)."""
    total = 0
    for image in images:
        height, width, _ = _image_shape(image.frame.get("shape"))
        total += height * width
    if total > limit:
        raise ProtocolError(
            f"the frame's {len(images)} compressed images declare {total} pixels together, over the {limit} pixel "
            "budget of a frame; none was decoded"
        )
