"""Fixtures: a live API server over a scheduler of the test's log dir."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import LiveServer

from hylo.jobs import JobScheduler
from hylo.server import ServerAccess


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def make_server(log_dir: Path) -> Iterator[Callable[..., LiveServer]]:
    """`make_server(token=None, access=None, machine=None, start=True, **scheduler_kwargs)`: a live server over a
    new scheduler of `log_dir` (started unless `start=False`); both are closed after the test."""
    made: list[LiveServer] = []

    def make(
        *, token: str | None = None, access: ServerAccess | None = None, start: bool = True, **kwargs: Any
    ) -> LiveServer:
        scheduler = JobScheduler(log_dir, **kwargs)
        if start:
            scheduler.start()
        server = LiveServer(scheduler, token, access)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()
        server.scheduler.close()
