"""Running a coroutine to its end from synchronous code, whether or not the calling thread runs an event loop.

hylo's synchronous parts (a panel driver, a graph's async nodes) keep an event loop of their own and run their
coroutines on it. asyncio refuses to start a loop in a thread that runs one already, as the thread of a notebook
cell or of an async program does: there the loop runs on a thread of its own while the caller waits.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_to_end(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, T]) -> T:
    """`work` run to its end on `loop` (not running): in the calling thread, or in a thread of its own when the
    calling thread runs an event loop. Raises what `work` raises."""
    if not in_running_loop():
        return loop.run_until_complete(work)
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(loop.run_until_complete(work))
        except BaseException as exc:  # handed to the caller as it is
            failure.append(exc)

    thread = threading.Thread(target=run, name="hylo-loop")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


def in_running_loop() -> bool:
    """Whether the calling thread runs an event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
