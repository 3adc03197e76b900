"""Where the server listens, and the rule that keeps it safe: beyond loopback, only with a token."""

from __future__ import annotations

import errno
import socket

from hylo.core.errors import HyloError
from hylo.hosts import is_loopback
from hylo.secret_env import TOKEN_ENV

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_QUEUED = 1000
"""The most jobs a server keeps waiting at once (`--max-queued`); more are answered 429."""


class ServeRefused(HyloError):
    """The server would be unsafe or cannot start; the message says what to do."""


def check_binding(host: str, token: str | None) -> None:
    """Refuse to bind a non-loopback address without a token."""
    if not token and not is_loopback(host):
        raise ServeRefused(
            f"binding {host!r} exposes the API beyond this machine: give a token (--token or {TOKEN_ENV}); "
            "every request must then carry 'Authorization: Bearer <token>'"
        )


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to (`host`, `port`), for the server to listen on; `ServeRefused` in one line when it cannot be
    bound (the port is taken, the address is not this machine's)."""
    name = host.strip().strip("[]")
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeRefused(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        why = "the port is in use (another server listens there?)" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise ServeRefused(f"cannot listen on {host}:{port}: {why}") from None
    return sock
