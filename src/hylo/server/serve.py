"""`serve`: the job scheduler of one log dir, its saved graphs and the interactive sessions behind the API, on
uvicorn."""

from __future__ import annotations

from pathlib import Path

import uvicorn

from hylo.jobs.resources import Machine, MachineProbe
from hylo.jobs.scheduler import JobScheduler
from hylo.server.app import create_app
from hylo.server.binding import DEFAULT_HOST, DEFAULT_PORT, check_binding
from hylo.server.limits import MAX_WS_MESSAGE_BYTES

SHUTDOWN_GRACE_S = 5
"""How long open requests (an event stream follows its job until it ends) may delay the server's shutdown."""


def serve(
    log_dir: Path | str,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    machine: Machine | MachineProbe | None = None,
    log_level: str = "info",
) -> None:
    """Run the API until interrupted: the scheduler starts with the server and, when it stops, running jobs are
    terminated (resumable). Raises `ServeRefused` for a non-loopback host without a token, `SchedulerBusy` when
    another scheduler owns the log dir."""
    check_binding(host, token)
    scheduler = JobScheduler(log_dir, machine=machine)
    try:
        app = create_app(scheduler, token=token or None, manage_scheduler=True)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            ws_max_size=MAX_WS_MESSAGE_BYTES,
        )
        uvicorn.Server(config).run()
    finally:
        scheduler.close()
