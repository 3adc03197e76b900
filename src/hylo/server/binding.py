"""Where the server listens, and the rule that keeps it safe: beyond loopback, only with a token."""

from __future__ import annotations

import errno
import socket

from hylo.core.errors import HyloError
from hylo.hosts import WILDCARDS, is_loopback
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


def check_import(reachable_beyond_loopback: bool, token: str | None) -> None:
    """Refuse `--allow-import` (code from requests) on a server that requests may reach from beyond this machine
    (bound beyond loopback, or named by `--allow-host`) without a token: whoever reaches it could run code."""
    if not token and reachable_beyond_loopback:
        raise ServeRefused(
            "--allow-import runs the code a request names, and this server is reachable beyond loopback (--host or "
            f"--allow-host): give a token (--token or {TOKEN_ENV}) or serve loopback only"
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


def page_url(host: str, port: int) -> str:
    """The URL a browser opens the web UI at, for a server bound to (`host`, `port`): the bound address or name, and
    on a wildcard bind this machine's loopback address (a host name is answered only when `--allow-host` names it)."""
    name = host.strip().strip("[]").lower()
    if name in WILDCARDS:
        name = "::1" if name == "::" else "127.0.0.1"
    shown = f"[{name}]" if ":" in name else name
    return f"http://{shown}:{port}/"
