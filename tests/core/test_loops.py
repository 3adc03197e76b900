"""A coroutine run to its end from synchronous code, inside and outside a running event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from hylo.core.loops import run_to_end


async def _suspends_then(value: int) -> tuple[int, str]:
    await asyncio.sleep(0)
    return value, threading.current_thread().name


async def _fails() -> None:
    await asyncio.sleep(0)
    raise KeyError("missing")


def test_outside_a_loop_it_runs_in_the_calling_thread() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert run_to_end(loop, _suspends_then(3)) == (3, threading.current_thread().name)
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
            asyncio.run(_direct(loop))  # what asyncio itself does: the reason for run_to_end
        assert asyncio.run(caller()) == (5, "hylo-loop")
    finally:
        loop.close()


async def _direct(loop: asyncio.AbstractEventLoop) -> None:
    work = _suspends_then(1)
    try:
        loop.run_until_complete(work)
    finally:
        work.close()
