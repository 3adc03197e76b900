"""`serve`: the job scheduler of one log dir, its saved graphs and the interactive sessions behind the API, on
uvicorn."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
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
    check_serving,
    listen,
    page_url,
)
from hylo.server.header_timeout import HeaderTimeoutProtocol
from hylo.server.limits import MAX_WS_MESSAGE_BYTES

SHUTDOWN_GRACE_S = 5
"""How long open requests (an event stream follows its job until it ends) may delay the server's shutdown."""

WS_PING_S = 20.0
"""Websocket pings every this many seconds; a peer that does not answer one within as long is dropped."""

KEEP_ALIVE_S = 5
"""How long an idle HTTP connection is kept open."""

PRIVATE_UMASK = 0o077
"""What the server creates (the log dir, its queue, graphs, runs) is its user's alone: directories 0700, files 0600."""


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
    docs: bool = False,
) -> None:
    """Run the API until interrupted: the scheduler starts with the server and, when it stops, running jobs are
    terminated (resumable). With `token` (`hylo serve` makes one unless told `--no-token`), every request needs it;
    without, anyone on this machine may use the server, so only on loopback and never with import paths. `access`
    holds the operator's rules (default: those of a server bound to `host`, no Ray, no remote agents, no import paths
    for requests, no trusted proxy). `on_ready` is given the web UI's URL once the server answers. What the server
    and its jobs create is private to its user (`PRIVATE_UMASK`, while it runs). Raises `ServeRefused` for a token
    too short, no token on a server reachable beyond loopback or with import paths allowed, or a port that cannot be
    bound; `SchedulerBusy` when another scheduler owns the log dir."""
    access = access if access is not None else ServerAccess.of(host)
    check_serving(
        host, token, reachable_beyond_loopback=access.reachable_beyond_loopback, allow_import=access.allow_import
    )
    sock = listen(host, port)  # before anything is made: a taken port leaves no trace
    url = page_url(host, sock.getsockname()[1])
    with closing(sock), _private_files():
        scheduler = JobScheduler(log_dir, machine=machine, max_queued=max_queued)
        try:
            app = create_app(scheduler, token=token, manage_scheduler=True, access=access, docs=docs)
            config = uvicorn.Config(
                app,
                log_level=log_level,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                ws_max_size=MAX_WS_MESSAGE_BYTES,
                ws_ping_interval=WS_PING_S,
                ws_ping_timeout=WS_PING_S,
                timeout_keep_alive=KEEP_ALIVE_S,
                http=HeaderTimeoutProtocol,  # a request head must arrive within HEADER_TIMEOUT_S
                proxy_headers=bool(access.trusted_proxies),  # uvicorn's default believes any loopback peer
                forwarded_allow_ips=list(access.trusted_proxies),
            )
            _Server(config, lambda: on_ready(url) if on_ready is not None else None).run(sockets=[sock])
        finally:
            scheduler.close()


@contextmanager
def _private_files() -> Iterator[None]:
    """`PRIVATE_UMASK` for this process (and so for what it starts) while the server runs."""
    umask = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(umask)


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
