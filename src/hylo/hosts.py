"""Which `Host` and `Origin` values a hylo server answers: the defence against DNS rebinding and cross-site requests
that the HTTP API and the bridge share.

A browser on this machine is the threat: any page it shows may send requests to a loopback port. Two headers tell
such requests apart from the user's own:

- `Host` names the server the browser thinks it talks to. A page at `http://evil.example:8765` whose name the
  attacker re-points at 127.0.0.1 (DNS rebinding) sends `Host: evil.example:8765`; only the names this server is
  known by are answered.
- `Origin` names the page that sent a request; a browser sends it on every request that can change state and on
  every websocket handshake. A request from another page names that page, not this server.

`Sec-Fetch-Site` (Fetch Metadata) says the same for reads: a browser marks a request made by another site's page
`cross-site` or `same-site`.

This module is a leaf: header values in, decisions out, no server code.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names a loopback server is always known by."""

WILDCARDS = frozenset({"0.0.0.0", "::", ""})
"""Bind addresses that mean every interface."""


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, brackets allowed) stays on this machine: `localhost`, 127.0.0.0/8,
    ::1."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def split_host(value: str) -> tuple[str, int | None]:
    """`Host`-header syntax → (lower-case name without brackets, port or None). Raises `ValueError` for a malformed
    value (an empty name, a port that is not a number in 0-65535, an unclosed bracket)."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"malformed host {value!r}")
        name, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"malformed host {value!r}")
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:  # a bare IPv6 address (as a bind address is written)
        name, port_text = text, None
    else:
        name, _, port_text = text.partition(":")
        port_text = port_text if ":" in text else None
    if not name or not set(name) <= _HOST_CHARS:
        raise ValueError(f"malformed host {value!r}")
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"malformed port in host {value!r}")
    return name, int(port_text)


_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._:%")
"""What a host name or address may hold (lower case; `:` and `%` for IPv6 addresses and their zones)."""


def _names(hosts: Iterable[str]) -> frozenset[str]:
    names = set()
    for host in hosts:
        name, _ = split_host(host)
        names.add(name)
    return frozenset(names)


def _origin(value: str) -> str:
    """An origin as a browser writes it: `scheme://host[:port]`, lower case, no path."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError(f"expected an origin such as http://host:port, got {value!r}")
    try:
        split_host(parts.netloc)
    except ValueError:
        raise ValueError(f"expected an origin such as http://host:port, got {value!r}") from None
    return f"{parts.scheme}://{parts.netloc}".lower()


@dataclass(frozen=True)
class HostPolicy:
    """The `Host` and `Origin` rules of one server.

    `bound` is the address the server listens on. The loopback names are always answered, with the server's own port
    (a rebinding page reaches the server on its port); so is the bound address (on a wildcard bind, any literal IP
    address: a name could be anyone's). `allow_hosts` adds names (`--allow-host`), answered with any port or none,
    as a reverse proxy forwards them. `allow_origins` lists pages of other origins that may change state
    (`--allow-origin`, e.g. a front-end developer's server). Build one with `of`, which normalises what it is given."""

    bound: str = "127.0.0.1"
    allow_hosts: frozenset[str] = field(default_factory=frozenset)
    allow_origins: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, bound: str, allow_hosts: Iterable[str] = (), allow_origins: Iterable[str] = ()) -> HostPolicy:
        """A policy from operator input; raises `ValueError` naming a malformed host or origin."""
        return cls(
            bound.strip().strip("[]").lower(),
            _names(allow_hosts),
            frozenset(_origin(origin) for origin in allow_origins),
        )

    @property
    def wildcard(self) -> bool:
        return self.bound in WILDCARDS

    def names(self) -> frozenset[str]:
        """The host names (without port) this server answers to on its own port."""
        return frozenset({*LOOPBACK_NAMES, *([] if self.wildcard else [self.bound])})

    def host_allowed(self, host: str | None, port: int | None) -> bool:
        """Whether a request whose `Host` header is `host` is for this server, listening on `port` (None: unknown).
        A request without `Host` (HTTP/1.0, a raw client) is not from a browser and is let through only on a
        loopback bind."""
        if host is None:
            return is_loopback(self.bound)
        try:
            name, given_port = split_host(host)
        except ValueError:
            return False
        if name in self.allow_hosts:
            return True
        own_port = given_port == port if given_port is not None else port in (None, 80, 443)
        return own_port and (name in self.names() or (self.wildcard and _is_address(name)))

    def origin_allowed(self, origin: str | None, host: str | None, *, secure: bool = False) -> bool:
        """Whether a request carrying `Origin: origin` may change state: no `Origin` (not a browser), this server's
        own origin (the scheme and the `Host` it was reached by), or one the operator allowed. `null` (a sandboxed
        frame, a local file) never is."""
        if origin is None:
            return True
        try:
            given = _origin(origin)
        except ValueError:
            return False
        if given in self.allow_origins:
            return True
        if host is None:
            return False
        schemes = ("http", "ws", "https", "wss") if secure else ("http", "ws")
        return given in {f"{scheme}://{host.strip().lower()}" for scheme in schemes}

    def refusal(
        self, hosts: Sequence[str], origins: Sequence[str], port: int | None, *, secure: bool = False
    ) -> str | None:
        """Why a request that may change state (or opens a websocket), with these `Host` and `Origin` header values,
        must be refused; None when it may be served. A request carrying two of either is refused: which one a
        server reads is not something to leave to chance."""
        if len(hosts) > 1 or len(origins) > 1:
            return "a request may carry one Host and one Origin header"
        host = hosts[0] if hosts else None
        if not self.host_allowed(host, port):
            return f"this server does not answer to host {_shown(host)} (an operator adds names with --allow-host)"
        origin = origins[0] if origins else None
        if not self.origin_allowed(origin, host, secure=secure):
            return (
                f"requests from the page at {_shown(origin)} are not accepted here (an operator allows an origin "
                "with --allow-origin)"
            )
        return None


def _shown(value: str | None) -> str:
    return repr(value) if value is None or len(value) <= 100 else repr(value[:97] + "...")


def _is_address(name: str) -> bool:
    """Whether `name` is a literal IP address (a wildcard-bound server is reached by any of its addresses; a name
    could be anyone's)."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


CROSS_SITE = frozenset({"cross-site", "same-site"})
"""`Sec-Fetch-Site` values of a request made by another site's page (`same-site`: another port or subdomain of
the same site, such as another local web app)."""
