"""Episode videos: RGB frames encoded to mp4 (H.264, or MPEG-4 Part 2 where libx264 is missing) as they arrive, or
losslessly (FFV1 in Matroska: every pixel comes back as it was given, `read_frames`) for frames kept as data.

Frames are encoded one by one, so a long episode never sits in memory. The file is written under a temporary name
and moved into place by `close()`, so a reader never sees a half-written video under the final name.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast

import av
import av.logging
import numpy as np

_UNSAFE = re.compile(r"[^A-Za-z0-9._@-]")
_MAX_STEM = 200  # file names are limited to 255 bytes; leave room for the status and suffix


def video_name(episode_id: str, status: str) -> str:
    """A safe file name for an episode's video, e.g. `babyai_default_GoToLocal_0003@s0.success.mp4`.

    Every character outside [A-Za-z0-9._@-] becomes `_`; leading dots are replaced so the file is never hidden (nor
    `..`). Very long ids are cut and given a hash of the full id so they stay distinct.
    """
    stem = file_stem(episode_id)
    tag = _UNSAFE.sub("_", str(status)).strip(".") or "unknown"
    return f"{stem}.{tag}.mp4"


def file_stem(episode_id: str) -> str:
    """An episode id as a safe file name stem: every character outside [A-Za-z0-9._@-] becomes `_`, leading dots are
    replaced, and a very long id is cut and given a hash of the full id so that stems stay distinct."""
    stem = _UNSAFE.sub("_", episode_id)
    stem = re.sub(r"^\.+", lambda m: "_" * len(m.group()), stem) or "episode"
    if len(stem) > _MAX_STEM:
        digest = hashlib.sha256(episode_id.encode("utf-8")).hexdigest()[:16]
        stem = f"{stem[: _MAX_STEM - 17]}-{digest}"
    return stem


def _scaled(frame: np.ndarray[Any, np.dtype[Any]], size: tuple[int, int]) -> np.ndarray[Any, np.dtype[Any]]:
    width, height = size
    rgb = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
    scaled: np.ndarray[Any, np.dtype[Any]] = rgb.reformat(
        width=width, height=height, format="rgb24", interpolation="BICUBIC"
    ).to_ndarray()
    return scaled


def _codec_name() -> Literal["libx264", "mpeg4"]:
    try:
        av.codec.Codec("libx264", "w")
    except ValueError:  # UnknownCodecError: this FFmpeg build has no libx264 encoder
        return "mpeg4"
    return "libx264"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Swallow FFmpeg's log lines (x264's statistics, etc.) even if the application raised PyAV's log level.

    PyAV ignores FFmpeg's logs by default; this only matters when someone turned them on process-wide.
    """
    with av.logging.Capture(local=True):
        yield


class VideoWriter:
    """Write HxWx3 uint8 RGB frames to an mp4 file that plays at `fps` frames per second.

    The first frame fixes the size, unless `size` (width, height) does: a frame of another size is then scaled to it
    (bicubic), for a camera that cannot render at the size asked. Odd sizes are padded to even (repeating the last
    row/column), which yuv420p requires. `close()` writes the file and returns its path, or returns None and writes
    nothing if no frame was added. Use as a context manager; on leaving the block the video is closed (kept, even if
    the block raised, since a video of a failed episode is what one wants to watch).

    `lossless`: FFV1 in a Matroska file, RGB kept exactly (no chroma subsampling, no padding), for frames that are
    data (a recorded rollout) rather than a view.
    """

    def __init__(
        self, path: str | Path, fps: float = 10.0, size: tuple[int, int] | None = None, *, lossless: bool = False
    ) -> None:
        if not (math.isfinite(fps) and fps > 0):
            raise ValueError(f"fps must be a positive finite number, got {fps}")
        rate = Fraction(fps).limit_denominator(1001)
        if rate <= 0:
            raise ValueError(f"fps {fps} is too small")
        if size is not None and not (len(size) == 2 and all(isinstance(side, int) and side > 0 for side in size)):
            raise ValueError(f"size must be (width, height) in pixels, got {size!r}")
        self.path = Path(path)
        self.fps = fps
        self.size = size
        self.lossless = lossless
        self._rate = rate
        self._tmp = self.path.with_name(self.path.name + ".part")
        self._container: Any = None
        self._stream: Any = None
        self._size: tuple[int, int] | None = None  # (height, width) of the frames as given
        self._frames = 0
        self._closed = False
        self._result: Path | None = None

    @property
    def frames(self) -> int:
        """How many frames have been added."""
        return self._frames

    def add(self, frame: np.ndarray[Any, np.dtype[Any]]) -> None:
        """Encode one HxWx3 uint8 RGB frame."""
        if self._closed:
            raise RuntimeError(f"video {self.path} is already closed")
        arr = np.asarray(frame)
        if arr.ndim != 3 or arr.shape[2] != 3:
            raise ValueError(f"expected an HxWx3 RGB frame, got shape {arr.shape}")
        if arr.dtype != np.uint8:
            raise ValueError(f"expected a uint8 frame, got dtype {arr.dtype}")
        height, width = int(arr.shape[0]), int(arr.shape[1])
        if height == 0 or width == 0:
            raise ValueError(f"empty frame of shape {arr.shape}")
        if self.size is not None and (width, height) != self.size:
            arr = _scaled(arr, self.size)
            width, height = self.size
        if self._size is None:
            self._open(height, width)
        elif (height, width) != self._size:
            h0, w0 = self._size
            raise ValueError(
                f"frame size {height}x{width} (height x width) differs from the first frame's {h0}x{w0}; "
                "all frames of a video must have the same size"
            )
        if not self.lossless and (height % 2 or width % 2):
            arr = np.pad(arr, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")
        video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(arr), format="rgb24")
        video_frame.pts = self._frames
        video_frame.time_base = 1 / self._rate
        try:
            with _quiet():
                self._container.mux(self._stream.encode(video_frame))
        except BaseException:
            self._abort()
            raise
        self._frames += 1

    def _open(self, height: int, width: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        codec = "ffv1" if self.lossless else _codec_name()
        try:
            with _quiet():
                self._container = av.open(str(self._tmp), mode="w", format="matroska" if self.lossless else "mp4")
                stream = self._container.add_stream(codec, rate=self._rate)
                if self.lossless:  # RGB with a padding byte: the frame's bytes, rearranged, never converted
                    stream.width, stream.height, stream.pix_fmt = width, height, "bgr0"
                else:
                    stream.width = width + width % 2
                    stream.height = height + height % 2
                    stream.pix_fmt = "yuv420p"
                if codec == "mpeg4":  # its default bit rate (200 kb/s) smears small frames
                    stream.bit_rate = 4_000_000
                self._stream = stream
        except BaseException:
            self._abort()
            raise
        self._size = (height, width)

    def _abort(self) -> None:
        """Give up on the file: close what is open and remove the partial output."""
        self._closed = True
        with contextlib.suppress(Exception), _quiet():
            if self._container is not None:
                self._container.close()
        with _quiet():
            self._container = self._stream = None
        with contextlib.suppress(FileNotFoundError):
            self._tmp.unlink()

    def close(self) -> Path | None:
        """Flush the encoder and write the file; returns its path, or None (and no file) if no frame was added.

        Closing twice returns the same result.
        """
        if self._closed:
            return self._result
        if self._container is None:
            self._closed = True
            return None
        try:
            with _quiet():
                self._container.mux(self._stream.encode(None))
                self._container.close()
                # Dropping the last reference frees the encoder, which is when x264 logs its statistics.
                self._container = self._stream = None
            os.replace(self._tmp, self.path)
        except BaseException:
            self._abort()
            raise
        self._closed = True
        self._result = self.path
        return self.path

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_frames(path: str | Path) -> Iterator[np.ndarray[Any, np.dtype[np.uint8]]]:
    """The frames of a video as HxWx3 uint8 RGB arrays, in order (a lossless one's exactly as they were added)."""
    with _quiet(), av.open(str(path)) as container:
        for frame in container.decode(video=0):
            yield cast("np.ndarray[Any, np.dtype[np.uint8]]", frame.to_ndarray(format="rgb24"))
