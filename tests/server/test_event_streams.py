"""A server serves at most `MAX_EVENT_STREAMS` event streams at once, job status events and session streams
together: past it a new one is refused with 429 (a websocket's handshake too), and a stream that ends gives its place
back."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from served_app import Served
from websockets.exceptions import InvalidStatus

from hylo.jobs import JobScheduler
from hylo.server import create_app
from hylo.server.events import MAX_EVENT_STREAMS

API = "/api/eval/v2"
QUICK = {"benchmark": "babyai", "agent": "random", "tasks": ["GoToLocal"], "episodes": 1}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    scheduler = JobScheduler(tmp_path / "runs")  # never started: a queued job's stream lasts
    server = Served(create_app(scheduler))
    yield server
    for session in server.client.get("/api/sessions").json()["sessions"]:
        server.client.delete(f"/api/sessions/{session['id']}")
    server.close()
    scheduler.close()


def test_event_streams_past_the_servers_cap_are_refused_429_until_one_ends(served: Served) -> None:
    client = served.client
    job = client.post(f"{API}/start", json=QUICK).json()["job_id"]
    created = client.post("/api/sessions", json={"agent": "random", "placement": {"benchmark": "babyai"}})
    assert created.status_code == 201, created.text
    session = created.json()["id"]
    events = f"{API}/status/{job}/events"

    with contextlib.ExitStack() as streams:
        session_stream = streams.enter_context(served.websocket(f"/api/sessions/{session}/stream"))
        for _ in range(MAX_EVENT_STREAMS - 1):
            opened = streams.enter_context(client.stream("GET", events))
            assert opened.status_code == 200 and opened.headers["content-type"].startswith("text/event-stream")

        refused = client.get(events)
        assert refused.status_code == 429
        assert f"already serves {MAX_EVENT_STREAMS} event streams" in refused.json()["detail"]
        with pytest.raises(InvalidStatus) as denied:
            served.websocket(f"/api/sessions/{session}/stream")
        assert denied.value.response.status_code == 429
        assert b"event streams" in denied.value.response.body
        assert client.get(f"{API}/status/{job}").status_code == 200  # everything else is served

        session_stream.close()  # its place is given back
        assert streams.enter_context(once_there_is_room(client, events)).status_code == 200
        assert client.get(events).status_code == 429

    with contextlib.ExitStack() as streams:  # and every place, once they all ended
        for _ in range(MAX_EVENT_STREAMS):
            assert streams.enter_context(once_there_is_room(client, events)).status_code == 200


@contextlib.contextmanager
def once_there_is_room(client: httpx.Client, path: str, patience_s: float = 60) -> Iterator[httpx.Response]:
    """An event stream, opened as soon as the server has room for it (a stream ends a moment after its client
    leaves); the refusal when it has none after `patience_s`."""
    deadline = time.monotonic() + patience_s
    while True:
        with client.stream("GET", path) as opened:
            if opened.status_code != 429 or time.monotonic() > deadline:
                yield opened
                return
        time.sleep(0.1)
