"""A coroutine run to its end from synchronous code, inside and outside a running event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest

from hylo.core.loops import run_to_end

T = TypeVar("T")


async def _suspends_then(value: int) -> tuple[int, str]:
    await asyncio.sleep(0)
    return value, threading.current_thread().name


async def _fails() -> None:
    await asyncio.sleep(0)
    raise KeyError("missing")


def _in_a_new_thread(call: Callable[[], T]) -> T:
    """`call()` in a thread that runs no event loop, whatever the test's own thread runs."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="caller") as pool:
        return pool.submit(call).result()


def test_outside_a_loop_it_runs_in_the_calling_thread() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert _in_a_new_thread(lambda: run_to_end(loop, _suspends_then(3))) == (3, "caller_0")
    finally:
        loop.close()


def test_inside_a_running_loop_it_runs_where_asyncio_allows_and_raises_what_the_work_raises() -> None:
    loop = asyncio.new_event_loop()

    async def caller() -> tuple[int, str]:
        with pytest.raises(KeyError, match="missing"):
            run_to_end(loop, _fails())
        return run_to_end(loop, _suspends_then(5))

    try:
        with pytest.raises(RuntimeError, match="another loop is running"):
            _in_a_new_thread(lambda: asyncio.run(_direct(loop)))  # what asyncio itself does: why run_to_end is
        assert _in_a_new_thread(lambda: asyncio.run(caller())) == (5, "hylo-loop")
    finally:
        loop.close()


async def _direct(loop: asyncio.AbstractEventLoop) -> None:
    work = _suspends_then(1)
    try:
        loop.run_until_complete(work)
    finally:
        work.close()
