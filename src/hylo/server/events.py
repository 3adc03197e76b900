"""Live job progress as server-sent events: the status JSON each time it changes, until the job is final; and how
many event streams (these and the sessions' websocket streams) a server serves at once.

A stream costs the server for as long as it is open (a job's stream reads the job's status four times a second; 100
of them took a third of a core), and a client opens one with a single request: past `MAX_EVENT_STREAMS` open
streams, a new one is refused (429) instead of slowing every other.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from hylo.core.errors import HyloError
from hylo.jobs.scheduler import JobScheduler

KEEPALIVE_S = 15.0

MAX_EVENT_STREAMS = 32
"""The most event streams (job status events and session streams together) one server serves at once."""


class StreamsFull(HyloError):
    """The server serves as many event streams as it may (429)."""


class StreamSlots:
    """A count of the open event streams, shared by every route that opens one."""

    def __init__(self, limit: int = MAX_EVENT_STREAMS) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"StreamSlots: the limit must be a number of streams >= 1, got {limit!r}")
        self.limit = limit
        self._open = 0
        self._lock = threading.Lock()

    def take(self) -> None:
        """Count one more open stream; `StreamsFull` when `limit` are open already."""
        with self._lock:
            if self._open >= self.limit:
                raise StreamsFull(
                    f"this server already serves {self.limit} event streams, the most it serves at once; close one "
                    "(another tab or client following a job or a session) or try again later"
                )
            self._open += 1

    def give_back(self) -> None:
        with self._lock:
            self._open = max(0, self._open - 1)


class EventStream(StreamingResponse):
    """A `text/event-stream` answer that holds one of `slots` (taken before it is made) until it ends, however it
    ends: the job is final, the client left, or the server stops."""

    def __init__(self, content: AsyncIterator[str], slots: StreamSlots) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._slots = slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slots.give_back()


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
