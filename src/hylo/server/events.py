"""Live job progress as server-sent events: the status JSON each time it changes, until the job is final."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from hylo.jobs.scheduler import JobScheduler

KEEPALIVE_S = 15.0


async def status_events(
    scheduler: JobScheduler, job_id: str, request: Request, interval: float = 0.25
) -> AsyncIterator[str]:
    """`event: status` frames, each `data:` one JSON status; a comment line keeps a quiet stream open."""
    last = ""
    sent = time.monotonic()
    number = 0
    while True:
        status = await run_in_threadpool(scheduler.status, job_id)
        text = status.model_dump_json()
        if text != last:
            number += 1
            last, sent = text, time.monotonic()
            yield f"id: {number}\nevent: status\ndata: {text}\n\n"
        elif time.monotonic() - sent > KEEPALIVE_S:
            sent = time.monotonic()
            yield ": keep-alive\n\n"
        if status.state.final or await request.is_disconnected():
            return
        await asyncio.sleep(interval)
