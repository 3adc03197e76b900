"""A serial agent worker for wall-clock realtime: every call to the agent runs on one thread, in order.

Under the wall clock the loop must not wait for `act`; but the agent must never see `on_step` or a signal while its
`act` is still running (its state would change under it). So all agent calls go through one daemon thread: the loop
posts them and moves on, the agent sees them one at a time in the order they happened.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any


class Call:
    """A submitted call whose result the loop polls: `done`, then `result` or `error`; `latency` counts from
    submission (the agent's queueing is part of the time the world waits)."""

    __slots__ = ("done", "error", "latency", "result", "step", "submitted")

    def __init__(self, step: int) -> None:
        self.step = step
        self.submitted = time.perf_counter()
        self.done = threading.Event()
        self.result: object = None
        self.error: BaseException | None = None
        self.latency = 0.0


class AgentWorker:
    def __init__(self, name: str = "hylo-agent") -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[Any], Any], Any, str, Call | None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Event()
        self._idle.set()
        self.failure: tuple[str, BaseException] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def post(self, fn: Callable[[Any], Any], arg: Any, who: str) -> None:
        """Run `fn(arg)` in turn; its first failure is kept in `failure`."""
        self._enqueue((fn, arg, who, None))

    def submit(self, fn: Callable[[Any], Any], arg: Any, step: int) -> Call:
        call = Call(step)
        self._enqueue((fn, arg, "agent", call))
        return call

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until every queued call has run; False if that takes longer than `timeout`."""
        return self._idle.wait(timeout)

    def take_failure(self) -> tuple[str, BaseException] | None:
        failure, self.failure = self.failure, None
        return failure

    def stop(self) -> None:
        self._queue.put(None)

    def _enqueue(self, item: tuple[Callable[[Any], Any], Any, str, Call | None]) -> None:
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._queue.put(item)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, arg, who, call = item
            try:
                value = fn(arg)
                if call is not None:
                    call.result = value
            except Exception as exc:
                if call is not None:
                    call.error = exc
                elif self.failure is None:
                    self.failure = (who, exc)
            finally:
                if call is not None:
                    call.latency = time.perf_counter() - call.submitted
                    call.done.set()
                with self._lock:
                    self._pending -= 1
                    if not self._pending:
                        self._idle.set()
