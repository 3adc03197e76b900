"""A session's live feed: its trace events and its latest frame, for any number of readers, never slowing the run.

The execution's thread appends each event to a bounded ring (no serialisation, no lock, no wait); a reader keeps its
own position and takes what is new whenever it is ready. A reader that falls further behind than the ring holds
skips the oldest events and is told how many it missed (`dropped`): a slow client sees less, never slows the run.
Frames work the same way with a ring of one: only the latest is kept, and it is encoded (PNG) only when a client asks.
"""

from __future__ import annotations

import asyncio
import collections
import io
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hylo.core.events import BaseEvent

RING_SIZE = 4096
"""How many recent events a feed keeps for its readers."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What a reader got: the events after its position (oldest first), how many it missed, the position now."""

    events: list[dict[str, Any]]
    dropped: int
    position: int


class LiveFeed:
    """The trace subscriber of one session (a bus `FieldSubscriber`): a ring of recent events with sequence numbers.

    `read(position)` is safe from any thread; `wait(position)` is awaited by readers on one asyncio loop (the
    server's), which the writer wakes at most once per wait."""

    def __init__(self, size: int = RING_SIZE) -> None:
        if size < 1:
            raise ValueError(f"a feed keeps at least one event, got size={size!r}")
        self._ring: collections.deque[tuple[int, dict[str, Any]]] = collections.deque(maxlen=size)
        self._count = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._lock = threading.Lock()

    # -- the bus side (the execution's thread) ------------------------------------------------------------------

    def __call__(self, event: BaseEvent) -> None:
        self.write_fields(event.model_dump(mode="json"), event.event)

    def write_fields(self, fields: dict[str, Any], kind: str) -> None:
        self._count += 1
        self._ring.append((self._count, fields))
        if self._waiters:
            self._wake()

    def note(self, kind: str, **fields: Any) -> None:
        """Add an event of the session's own (its state changed, a panel intent was carried out)."""
        self.write_fields({"event": kind, **fields}, kind)

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed: its reader is gone
                continue

    # -- the readers' side ----------------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """The sequence number of the newest event (0 before any)."""
        return self._count

    def read(self, position: int, limit: int | None = None) -> Batch:
        """The events after `position` (at most `limit`, the oldest of them), and how many of them the ring no
        longer holds."""
        ring = list(self._ring)  # a copy: the writer may append meanwhile
        if not ring:
            return Batch([], 0, position)
        first = ring[0][0]
        start = max(position + 1, first)
        dropped = max(0, first - position - 1)
        events = [fields for seq, fields in ring[start - first :]]
        if limit is not None and len(events) > limit:
            events = events[:limit]
        return Batch(events, dropped, start - 1 + len(events))

    async def wait(self, position: int, timeout: float) -> bool:
        """Wait until there is an event after `position` (True) or `timeout` seconds pass (False)."""
        if self._count > position:
            return True
        event = asyncio.Event()
        with self._lock:
            self._waiters.append((asyncio.get_running_loop(), event))
        if self._count > position:  # written between the check and the registration
            return True
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[1] is not event]
            return self._count > position
        return True


@dataclass
class Frame:
    """The latest camera frame of a session: its number, the env step it shows and the image (HWC uint8)."""

    number: int
    step: int
    camera: str
    image: np.ndarray[Any, Any]
    _png: bytes | None = field(default=None, repr=False)

    def png(self) -> bytes:
        """The frame as PNG (encoded once, on first request)."""
        if self._png is None:
            from PIL import Image  # start-up time: only a frame that is asked for as PNG needs it

            buffer = io.BytesIO()
            Image.fromarray(np.ascontiguousarray(self.image)).save(buffer, format="PNG", compress_level=1)
            self._png = buffer.getvalue()
        return self._png


class FrameSlot:
    """Holds the newest frame of an execution's observations (a copy: an env may reuse its buffers)."""

    def __init__(self) -> None:
        self.latest: Frame | None = None
        self._number = 0

    def offer(self, obs: Any, step: int) -> None:
        """Keep the first camera image of `obs` (an observation with `images`), if it has one."""
        images = obs.get("images") if isinstance(obs, Mapping) else None
        if not isinstance(images, Mapping) or not images:
            return
        camera, image = next(iter(images.items()))
        if not isinstance(image, np.ndarray) or image.ndim not in (2, 3) or image.dtype != np.uint8:
            return
        self._number += 1
        self.latest = Frame(self._number, step, str(camera), image.copy())
