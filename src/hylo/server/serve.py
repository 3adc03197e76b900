"""`serve`: the job scheduler of one log dir, its saved graphs and the interactive sessions behind the API, on
uvicorn."""

from __future__ import annotations

from pathlib import Path

import uvicorn

from hylo.jobs.resources import Machine, MachineProbe
from hylo.jobs.scheduler import JobScheduler
from hylo.server.access import ServerAccess
from hylo.server.app import create_app
from hylo.server.binding import DEFAULT_HOST, DEFAULT_MAX_QUEUED, DEFAULT_PORT, check_binding, listen
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
) -> None:
    """Run the API until interrupted: the scheduler starts with the server and, when it stops, running jobs are
    terminated (resumable). `access` holds the operator's rules (default: those of a server bound to `host`, no Ray
    and no remote agents for requests). Raises `ServeRefused` for a non-loopback host without a token or a port that
    cannot be bound, `SchedulerBusy` when another scheduler owns the log dir."""
    check_binding(host, token)
    access = access if access is not None else ServerAccess.of(host)
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
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        scheduler.close()
