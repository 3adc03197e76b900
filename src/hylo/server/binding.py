"""Where the server listens, and the rule that keeps it safe: beyond loopback, only with a token."""

from __future__ import annotations

import ipaddress

from hylo.core.errors import HyloError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "HYLO_TOKEN"


class ServeRefused(HyloError):
    """The server would be unsafe or cannot start; the message says what to do."""


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine (`localhost`, 127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_binding(host: str, token: str | None) -> None:
    """Refuse to bind a non-loopback address without a token."""
    if not token and not is_loopback(host):
        raise ServeRefused(
            f"binding {host!r} exposes the API beyond this machine: give a token (--token or {TOKEN_ENV}); "
            "every request must then carry 'Authorization: Bearer <token>'"
        )
