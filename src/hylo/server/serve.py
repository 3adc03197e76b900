"""`serve`: the job scheduler of one log dir behind the API, on uvicorn."""

from __future__ import annotations

from pathlib import Path

import uvicorn

from hylo.core.errors import HyloError
from hylo.jobs.resources import Machine, MachineProbe
from hylo.jobs.scheduler import JobScheduler
from hylo.server.app import create_app
from hylo.server.auth import TOKEN_ENV, is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
SHUTDOWN_GRACE_S = 5
"""How long open requests (an event stream follows its job until it ends) may delay the server's shutdown."""


class ServeRefused(HyloError):
    """The server would be unsafe or cannot start; the message says what to do."""


def check_binding(host: str, token: str | None) -> None:
    """Refuse to bind a non-loopback address without a token."""
    if not token and not is_loopback(host):
        raise ServeRefused(
            f"binding {host!r} exposes the API beyond this machine: give a token (--token or {TOKEN_ENV}); "
            "every request must then carry 'Authorization: Bearer <token>'"
        )


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
            app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=SHUTDOWN_GRACE_S
        )
        uvicorn.Server(config).run()
    finally:
        scheduler.close()
