"""What each connection of a served bridge owns: its own thread (`ConnectionWorker`) and an agent from the pool
(`AgentPool`), which keeps the agents of closed connections for the next ones up to a bound. `Agents` is what the
bridge asks of where its connections' agents come from: this pool, or one shared agent that batches
(`hylo.bridges.batched_agent`).

Apart from the WebSocket server (`hylo.bridges.vlaeval_server`) so that these two are read, and tested, on their
own: neither knows the protocol or the socket.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)


class ConnectionWorker:
    """One connection's own thread: runs what is submitted to it in order, one thing at a time (a session is not
    thread-safe). The thread is a daemon, so an agent stuck in `act` never keeps the process from exiting."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[
            tuple[Callable[..., Any], tuple[Any, ...], concurrent.futures.Future[Any]] | None
        ]
        self._queue = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"hylo-bridge-{name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._pending += 1
        self._queue.put((fn, args, future))
        return future

    @property
    def idle(self) -> bool:
        """Whether nothing submitted is waiting or running."""
        with self._lock:
            return self._pending == 0

    def shutdown(self) -> None:
        """End the thread once what was submitted before has run."""
        self._queue.put(None)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, args, future = item
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args)
                    except BaseException as exc:
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                with self._lock:
                    self._pending -= 1


class Agents(Protocol):
    """Where a bridge's connections get their agents: `acquire` on a connection's thread when it opens, `release`
    once it closed; `size` the agents alive; `figures` what batching did (None when nothing batches)."""

    def acquire(self) -> Any: ...

    def release(self, agent: Any) -> None: ...

    @property
    def size(self) -> int: ...

    def figures(self) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class AgentPool:
    """One agent per live connection (agents keep episode state); up to `keep` of them are kept for the next
    connections once theirs closed, the others closed (`close()`, when they have one) and dropped, so the memory a
    burst of connections took comes back.

    `first` is the agent built when the bridge started (it proved the name and arguments good)."""

    def __init__(self, factory: Callable[[], Any], first: Any, *, keep: int = 1) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValueError(f"keep must be an int >= 0, got {keep!r}")
        self._factory = factory
        self.keep = keep
        self._idle: list[Any] = [first]
        self._live = 1
        self._lock = threading.Lock()

    def acquire(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        agent = self._factory()
        with self._lock:
            self._live += 1
        return agent

    def release(self, agent: Any) -> None:
        """Take back the agent of a closed connection: kept when fewer than `keep` wait, else closed."""
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(agent)
                return
            self._live -= 1
        _close_agent(agent)

    @property
    def size(self) -> int:
        """The agents alive: acting on a connection or kept."""
        with self._lock:
            return self._live

    def figures(self) -> None:
        """One agent per connection: nothing is batched."""
        return None

    def close(self) -> None:
        """Close every idle agent that has a `close` (a remote policy's socket, a worker process); an agent still
        acting on a connection's thread is left alone."""
        with self._lock:
            agents, busy = self._idle, self._live - len(self._idle)
            self._idle, self._live = [], busy
        if busy:
            log.warning("%d agent(s) still acting when the bridge stopped; not closed", busy)
        for agent in agents:
            _close_agent(agent)


def _close_agent(agent: Any) -> None:
    close = getattr(agent, "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:
            log.warning("closing agent %r raised %r", agent, exc)
