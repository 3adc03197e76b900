"""Which waiting act requests the policy host's next `act_batch` call takes, and when.

A batch closes when it is full (B requests), when every running episode has a request waiting (no other request
can come: each episode waits for its answer), or W seconds after its oldest request arrived, whichever is first. It
takes the oldest requests first, so none waits behind later ones. Pure bookkeeping, no clock of its own: the host
passes the time in, and the tests drive it without processes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Request:
    """One episode's act request: who asked (`client`, its connection's id), its tag (`serial`), the observation,
    when it arrived."""

    client: int
    serial: int
    obs: Any
    received: float


class Batcher:
    """The queue of act requests of one policy host."""

    def __init__(self, max_batch: int, wait_s: float) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch!r}")
        if not wait_s >= 0:
            raise ValueError(f"wait_s must be >= 0, got {wait_s!r}")
        self.max_batch = max_batch
        self.wait_s = wait_s
        self._queue: deque[Request] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, request: Request) -> None:
        self._queue.append(request)

    def drop(self, client: int) -> None:
        """Forget the requests of `client` (its episode ended, or its worker went away)."""
        self._queue = deque(r for r in self._queue if r.client != client)

    def due_in(self, now: float, running: int) -> float | None:
        """Seconds until the next batch closes (0: now), given how many episodes are running; None: nothing waits."""
        if not self._queue:
            return None
        if len(self._queue) >= min(self.max_batch, max(running, 1)):
            return 0.0
        return max(0.0, self._queue[0].received + self.wait_s - now)

    def take(self) -> list[Request]:
        """The next batch: the oldest requests, at most `max_batch` of them."""
        count = min(self.max_batch, len(self._queue))
        return [self._queue.popleft() for _ in range(count)]
