"""`serve`: the job scheduler of one log dir, its saved graphs and the interactive sessions behind the API, on
uvicorn."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn

from hylo.jobs.resources import Machine, MachineProbe
from hylo.jobs.scheduler import JobScheduler
from hylo.server.access import ServerAccess
from hylo.server.app import create_app
from hylo.server.binding import (
    DEFAULT_HOST,
    DEFAULT_MAX_QUEUED,
    DEFAULT_PORT,
    check_binding,
    check_import,
    listen,
    page_url,
)
from hylo.server.limits import MAX_WS_MESSAGE_BYTES

SHUTDOWN_GRACE_S = 5
"""How long open requests (an event stream follows its job until it ends) may delay the server's shutdown."""

WS_PING_S = 20.0
"""Websocket pings every this many seconds; a peer that does not answer one within as long is dropped."""

KEEP_ALIVE_S = 5
"""How long an idle HTTP connection is kept open."""


def serve(
    log_dir: Path | str,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    machine: Machine | MachineProbe | None = None,
    log_level: str = "info",
    access: ServerAccess | None = None,
    max_queued: int = DEFAULT_MAX_QUEUED,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Run the API until interrupted: the scheduler starts with the server and, when it stops, running jobs are
    terminated (resumable). `access` holds the operator's rules (default: those of a server bound to `host`, no Ray,
    no remote agents and no import paths for requests). `on_ready` is given the web UI's URL once the server answers.
    Raises `ServeRefused` for a non-loopback host without a token, import paths allowed on a server reachable beyond
    loopback without a token, or a port that cannot be bound; `SchedulerBusy` when another scheduler owns the log
    dir."""
    check_binding(host, token)
    access = access if access is not None else ServerAccess.of(host)
    if access.allow_import:
        check_import(access.reachable_beyond_loopback, token)
    sock = listen(host, port)  # before anything is made: a taken port leaves no trace
    try:
        scheduler = JobScheduler(log_dir, machine=machine, max_queued=max_queued)
    except BaseException:
        sock.close()
        raise
    try:
        app = create_app(scheduler, token=token or None, manage_scheduler=True, access=access)
        config = uvicorn.Config(
            app,
            log_level=log_level,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            ws_max_size=MAX_WS_MESSAGE_BYTES,
            ws_ping_interval=WS_PING_S,
            ws_ping_timeout=WS_PING_S,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        url = page_url(host, sock.getsockname()[1])
        _Server(config, lambda: on_ready(url) if on_ready is not None else None).run(sockets=[sock])
    finally:
        sock.close()
        scheduler.close()


class _Server(uvicorn.Server):
    """uvicorn's server, which says when it answers: `ready` is called once its sockets listen and the app has
    started (not before: a browser opened on the URL at once would be refused)."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.should_exit:
            self._ready()
