"""The media a report embeds for an episode, made from the mp4 its run recorded: a short clip (the file itself when it
is already small, else re-encoded smaller and shorter) or a strip of a few JPEG frames side by side.

Frames are read one at a time and only those kept are held, so a long episode's video never sits in memory whole.
"""

from __future__ import annotations

import base64
import io
import math
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import av
import numpy as np
from PIL import Image

from hylo.core.errors import HyloError
from hylo.evallog.video import VideoWriter, read_frames

PLAYABLE_CODEC = "h264"
"""The codec a clip must have for a browser to play it (MPEG-4 Part 2, the fallback where libx264 is missing, plays
in none)."""

MAX_CLIP_SIDE = 320
"""A clip's longer side at most, in pixels."""
MAX_CLIP_FRAMES = 120
"""A clip's frames at most: a longer episode keeps every k-th frame, so the clip shows all of it, sped up."""
MAX_KEPT_BYTES = 400_000
"""A recorded video that is small enough by its sides and frames is embedded as it is up to this size."""
STRIP_FRAMES = 5
"""How many frames a strip shows, evenly spaced from the first to the last."""
STRIP_HEIGHT = 120
"""A strip's frames' height in pixels."""


class UnreadableVideo(HyloError, ValueError):
    """A recorded video that cannot be decoded."""


@dataclass(frozen=True, slots=True)
class Medium:
    """An embedded clip or frame strip: its kind, MIME type and bytes."""

    kind: Literal["video", "image"]
    mime: str
    data: bytes

    def uri(self) -> str:
        """The medium as a `data:` URI."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class VideoFacts:
    """What a recorded video is: its codec, size in pixels, frame count and rate."""

    codec: str
    width: int
    height: int
    frames: int
    fps: float


def video_facts(path: Path) -> VideoFacts:
    """The codec, size, frame count and rate of the video at `path` (frames counted by packet when the container does
    not say); raises `UnreadableVideo` naming it."""
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            frames = stream.frames or sum(1 for packet in container.demux(stream) if packet.size)
            rate = float(stream.average_rate) if stream.average_rate else 10.0
            facts = VideoFacts(stream.codec_context.name, stream.width, stream.height, frames, rate)
    except (av.FFmpegError, IndexError, OSError) as exc:
        raise UnreadableVideo(f"video {path.name} cannot be read: {exc}") from None
    return facts


def clip(path: Path) -> Medium | None:
    """A short, small, playable clip of the video at `path`: the file as it is when it is H.264 and small enough
    (`MAX_CLIP_SIDE`, `MAX_CLIP_FRAMES`, `MAX_KEPT_BYTES`), else re-encoded at most `MAX_CLIP_SIDE` on its longer side
    with at most `MAX_CLIP_FRAMES` frames. None when no playable clip can be made (no H.264 encoder)."""
    facts = video_facts(path)
    small = max(facts.width, facts.height) <= MAX_CLIP_SIDE and facts.frames <= MAX_CLIP_FRAMES
    if facts.codec == PLAYABLE_CODEC and small and path.stat().st_size <= MAX_KEPT_BYTES:
        return Medium("video", "video/mp4", path.read_bytes())
    data = _reencoded(path, facts)
    return None if data is None else Medium("video", "video/mp4", data)


def _reencoded(path: Path, facts: VideoFacts) -> bytes | None:
    """The video re-encoded smaller and shorter; None when the encoder this FFmpeg has is not `PLAYABLE_CODEC`."""
    stride = max(1, math.ceil(facts.frames / MAX_CLIP_FRAMES))
    with tempfile.TemporaryDirectory(prefix="hylo-clip-") as tmp:
        out = Path(tmp) / "clip.mp4"
        with VideoWriter(out, fps=facts.fps, size=_fitted(facts.width, facts.height, MAX_CLIP_SIDE)) as writer:
            for _, frame in _every(path, stride):
                writer.add(frame)
        if writer.frames == 0 or video_facts(out).codec != PLAYABLE_CODEC:
            return None
        return out.read_bytes()


def _fitted(width: int, height: int, side: int) -> tuple[int, int]:
    """(width, height) scaled so the longer side is at most `side`, each even (H.264's 4:2:0 wants even sides)."""
    scale = min(1.0, side / max(width, height))
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def _every(path: Path, stride: int) -> Iterator[tuple[int, np.ndarray[Any, np.dtype[np.uint8]]]]:
    """Every `stride`-th frame of the video with its index; raises `UnreadableVideo` naming it."""
    try:
        for index, frame in enumerate(read_frames(path)):
            if index % stride == 0:
                yield index, frame
    except av.FFmpegError as exc:
        raise UnreadableVideo(f"video {path.name} cannot be decoded: {exc}") from None


def frame_strip(path: Path, *, frames: int = STRIP_FRAMES, height: int = STRIP_HEIGHT) -> Medium:
    """A JPEG of `frames` frames of the video at `path` side by side, evenly spaced from its first to its last, each
    `height` pixels high."""
    facts = video_facts(path)
    wanted = _spaced(facts.frames, frames)
    kept = [frame for index, frame in _every(path, 1) if index in wanted]
    if not kept:
        raise UnreadableVideo(f"video {path.name} has no frame")
    return Medium("image", "image/jpeg", _jpeg(_side_by_side(kept, height)))


def _spaced(total: int, count: int) -> set[int]:
    """`count` frame indices evenly spaced over `total` frames, the first and the last among them."""
    if total <= count:
        return set(range(total))
    return {round(i * (total - 1) / (count - 1)) for i in range(count)} if count > 1 else {total - 1}


def _side_by_side(frames: Sequence[np.ndarray[Any, np.dtype[np.uint8]]], height: int, gap: int = 2) -> Image.Image:
    """The frames scaled to `height` and set in a row on white, `gap` pixels apart."""
    images = [Image.fromarray(frame).convert("RGB") for frame in frames]
    scaled = [image.resize((max(1, round(image.width * height / image.height)), height)) for image in images]
    strip = Image.new("RGB", (sum(image.width for image in scaled) + gap * (len(scaled) - 1), height), "white")
    x = 0
    for image in scaled:
        strip.paste(image, (x, 0))
        x += image.width + gap
    return strip


def _jpeg(image: Image.Image, quality: int = 80) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality, optimize=True)
    return out.getvalue()
