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


class Failure:
    """A posted call that raised: who (e.g. `agent on_step`), what, and in which episode."""

    __slots__ = ("episode", "error", "who")

    def __init__(self, who: str, error: BaseException, episode: int) -> None:
        self.who = who
        self.error = error
        self.episode = episode


_Item = tuple[Callable[[Any], Any], Any, str, int, Call | None]


class AgentWorker:
    def __init__(self, name: str = "hylo-agent") -> None:
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Event()
        self._idle.set()
        self._failure: Failure | None = None
        self._running: Call | None = None  # the `act` being computed right now, if any
        self.stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def post(self, fn: Callable[[Any], Any], arg: Any, who: str, episode: int) -> None:
        """Run `fn(arg)` in turn; its first failure is kept for `take_failure`."""
        self._enqueue((fn, arg, who, episode, None))

    def submit(self, fn: Callable[[Any], Any], arg: Any, step: int, episode: int) -> Call:
        """Run `act`-like `fn(arg)` in turn; poll the returned Call for its result."""
        call = Call(step)
        self._enqueue((fn, arg, "agent", episode, call))
        return call

    def wait_idle(self, act_timeout_s: float | None) -> bool:
        """Wait until every queued call has run. Lifecycle calls are waited for as long as they take (as in sync
        mode); an `act` that has overrun `act_timeout_s` is abandoned: returns False, the worker stays busy."""
        while not self._idle.wait(0.02):
            running = self._running
            if (
                act_timeout_s is not None
                and running is not None
                and time.perf_counter() - running.submitted > act_timeout_s
            ):
                return False
        return True

    def take_failure(self) -> Failure | None:
        with self._lock:
            failure, self._failure = self._failure, None
        return failure

    def stop(self) -> None:
        self.stopped = True
        self._queue.put(None)

    def _enqueue(self, item: _Item) -> None:
        if self.stopped:
            raise RuntimeError("the agent worker is stopped (the Kernel was closed)")
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._queue.put(item)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, arg, who, episode, call = item
            self._running = call
            try:
                value = fn(arg)
                if call is not None:
                    call.result = value
            except BaseException as exc:  # whatever the agent raises, the worker thread must live on
                if call is not None:
                    call.error = exc
                else:
                    with self._lock:
                        if self._failure is None:
                            self._failure = Failure(who, exc, episode)
            finally:
                self._running = None
                if call is not None:
                    call.latency = time.perf_counter() - call.submitted
                    call.done.set()
                with self._lock:
                    self._pending -= 1
                    if not self._pending:
                        self._idle.set()
