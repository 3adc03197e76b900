"""Where the server listens, and the rules that keep it its owner's: a token unless the operator opts out on loopback
(`--no-token`), a token long enough not to be guessed, and code from requests only with a token."""

from __future__ import annotations

import errno
import secrets
import socket
from urllib.parse import quote

from hylo.core.errors import HyloError
from hylo.hosts import WILDCARDS, is_loopback
from hylo.secret_env import TOKEN_ENV

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_QUEUED = 1000
"""The most jobs a server keeps waiting at once (`--max-queued`); more are answered 429."""


MIN_TOKEN_CHARS = 16
"""The shortest token the server takes: a token is all that keeps another user of the machine out."""

TOKEN_FRAGMENT = "token"
"""The web UI's URL carries the token in its fragment (`/#token=...`), which a browser never sends: it reaches
neither the server's access log nor a proxy's."""


class ServeRefused(HyloError):
    """The server would be unsafe or cannot start; the message says what to do."""


def new_token() -> str:
    """A random token (256 bits, URL-safe), for a server started without `--token`."""
    return secrets.token_urlsafe(32)


def check_token(token: str) -> None:
    """Refuse a token shorter than `MIN_TOKEN_CHARS` or with anything but printable ASCII other than a space (it
    travels in a header and a URL). The message names its length, never the token."""
    if len(token) < MIN_TOKEN_CHARS:
        raise ServeRefused(
            f"the token (--token or {TOKEN_ENV}) is too short (length {len(token)}): give one of at least "
            f"{MIN_TOKEN_CHARS} characters, or none: hylo serve then makes one and prints the URL to open"
        )
    if not all("!" <= char <= "~" for char in token):
        raise ServeRefused(
            f"the token (--token or {TOKEN_ENV}) may hold printable ASCII characters only, no space (it travels in a "
            "header and a URL)"
        )


def check_binding(host: str, token: str | None) -> None:
    """Refuse to bind a non-loopback address without a token."""
    if not token and not is_loopback(host):
        raise ServeRefused(
            f"binding {host!r} exposes the API beyond this machine: give a token (--token or {TOKEN_ENV}), or "
            "leave out --no-token; every request must then carry 'Authorization: Bearer <token>'"
        )


def check_reach(reachable_beyond_loopback: bool, token: str | None) -> None:
    """Refuse a server without a token that requests may reach from beyond this machine by a name `--allow-host`
    gives it (a reverse proxy's, a LAN name), though it is bound to loopback."""
    if not token and reachable_beyond_loopback:
        raise ServeRefused(
            "--no-token serves loopback only, and --allow-host names a host beyond it (a reverse proxy or a LAN "
            "peer reaches the server by it): leave out --no-token"
        )


def check_import(token: str | None) -> None:
    """Refuse `--allow-import` (code from requests) on a server without a token: on loopback too, any user of the
    machine could then run code as the server's user."""
    if not token:
        raise ServeRefused(
            "--allow-import runs the code a request names, and --no-token lets every user of this machine send "
            "requests: leave out --no-token (hylo serve then makes a token)"
        )


def check_serving(host: str, token: str | None, *, reachable_beyond_loopback: bool, allow_import: bool) -> None:
    """Every refusal of a server about to start, the first that applies (`ServeRefused`): a malformed token, no
    token beyond loopback (bound there, or named there by `--allow-host`), no token with import paths allowed."""
    if token is not None:
        check_token(token)
    check_binding(host, token)
    check_reach(reachable_beyond_loopback, token)
    if allow_import:
        check_import(token)


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


def token_url(url: str, token: str) -> str:
    """The web UI's `url` with `token` in its fragment (`/#token=...`): the page keeps it and takes it out of the
    address bar."""
    return f"{url}#{TOKEN_FRAGMENT}={quote(token, safe='')}"
