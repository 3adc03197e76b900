"""The commands other threads hand a session's thread: each a function and the future its requester waits on.

A session's thread is the only one that touches its simulator, so the HTTP server never calls the env or the panel
itself: it queues a `Command` and waits for its future. The thread takes them in order (between two iterations
while an execution runs); `CLOSE` ends it. A command that can only run once the current execution has ended raises
`Later` and is queued again.
"""

from __future__ import annotations

import concurrent.futures
import queue
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hylo.core.errors import HyloError
from hylo.sessions.state import SessionGone


class Later(HyloError):
    """A command that can only run once the current execution has ended: it is queued again."""


@dataclass
class Command:
    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]


CLOSE = object()
"""What ends a session's thread once it is taken."""


class Inbox:
    """A session's commands, in the order they came (`CLOSE` among them)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Command | object] = queue.Queue()

    def put(self, item: Command | object) -> None:
        self._queue.put(item)

    def get(self) -> Command | object:
        """The next item, waiting for one."""
        return self._queue.get()

    def queued(self) -> Iterator[Command | object]:
        """What is in the inbox now, without waiting."""
        while True:
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return

    def run(self, command: Command) -> None:
        """Run `command` in this thread and settle its future (unless its requester gave up before it ran); one
        that raises `Later` is queued again."""
        if not command.future.running() and not command.future.set_running_or_notify_cancel():
            return  # its requester gave up before it ran
        try:
            result = command.fn()
        except Later:
            self.put(command)
            return
        except BaseException as exc:
            command.future.set_exception(exc)
            return
        command.future.set_result(result)

    def fail_pending(self, message: str) -> None:
        """Fail every command still queued with `SessionGone(message)`."""
        for item in self.queued():
            if not isinstance(item, Command):
                continue
            future = item.future
            if future.running() or future.set_running_or_notify_cancel():  # running: a command put back (Later)
                future.set_exception(SessionGone(message))
