"""What a request may make the server reach beyond itself: which Ray cluster a job joins, which policy servers an
agent connects to, and whether a job may name code to import; and which peers may say whom a request is from. A
request is data, not code: it never chooses a cluster (a Ray client unpickles what the cluster sends), a URL the
server's processes connect to (a port scan, a request to an internal service) or a module to import; the operator
does, with `hylo serve --allow-ray ADDRESS`, `--allow-remote URL_PREFIX` and `--allow-import`. Nor does a request
say which client it comes from (`X-Forwarded-For`: the access log's address, the client whose wrong tokens are
throttled) unless it comes through a proxy the operator names with `--trusted-proxy`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import SplitResult, unquote, urlsplit

from hylo.eval.spec import EvalSpec
from hylo.hosts import HostPolicy, is_loopback
from hylo.jobs.errors import JobRefused

_DEFAULT_PORTS = {"ws": 80, "http": 80, "wss": 443, "https": 443}


@dataclass(frozen=True)
class RemotePrefix:
    """An allowed policy-server URL prefix: scheme, host and port must match exactly, the path must be the prefix's
    or below it."""

    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, text: str) -> RemotePrefix:
        """A prefix from `--allow-remote` (`ws://gpu-box:8000`, `wss://policies.lab/pi0`); raises `ValueError`."""
        parts = _split(text)
        if parts is None:
            raise ValueError(
                f"--allow-remote expects a ws:// or wss:// URL prefix such as ws://gpu-box:8000, got {text!r}"
            )
        scheme, host, port, path = parts
        return cls(scheme, host, port, path.rstrip("/"))

    def admits(self, url: str) -> bool:
        parts = _split(url)
        if parts is None:
            return False
        scheme, host, port, path = parts
        within = not self.path or path == self.path or path.startswith(self.path + "/")
        return (scheme, host, port) == (self.scheme, self.host, self.port) and within

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"


def _split(text: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path) of a websocket URL (`host:port` alone means `ws://`, as the openpi client takes
    it); None for anything else: a URL with credentials (`ws://allowed@elsewhere`), or with `.` or `..` in its
    path. (A redirect is the allowed server's to send: the operator trusts it.)"""
    text = text.strip()
    if "://" not in text:
        text = f"ws://{text}"
    try:
        parts: SplitResult = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("ws", "wss") or not parts.hostname or "@" in parts.netloc:
        return None
    if any(segment in (".", "..") for segment in unquote(parts.path).split("/")):
        return None  # `/pi0/../admin` is not below `/pi0`
    return parts.scheme, parts.hostname.lower(), port if port is not None else _DEFAULT_PORTS[parts.scheme], parts.path


@dataclass(frozen=True)
class ServerAccess:
    """The operator's rules for one server: its `Host`/`Origin` policy, the Ray cluster its jobs may use (None: no
    Ray over HTTP), the policy-server URL prefixes agents may connect to (none: no remote agent over HTTP), whether
    a job may name import paths (`module:Class` agents: code from requests, off unless the operator says) and the
    proxies whose forwarded headers are believed (none: the peer's address is the client's)."""

    hosts: HostPolicy = field(default_factory=HostPolicy)
    ray_address: str | None = None
    remote: tuple[RemotePrefix, ...] = ()
    allow_import: bool = False
    trusted_proxies: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        bound: str = "127.0.0.1",
        *,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
        allow_ray: str | None = None,
        allow_remote: Iterable[str] = (),
        allow_import: bool = False,
        trusted_proxies: Iterable[str] = (),
    ) -> ServerAccess:
        """From `hylo serve`'s flags; raises `ValueError` naming a malformed one."""
        if allow_ray is not None and not allow_ray.strip():
            raise ValueError("--allow-ray expects a Ray address (host:port, ray://host:10001) or 'local', got ''")
        prefixes = tuple(RemotePrefix.parse(prefix) for prefix in allow_remote)
        proxies = tuple(_proxy(proxy) for proxy in trusted_proxies)
        return cls(HostPolicy.of(bound, allow_hosts, allow_origins), allow_ray, prefixes, allow_import, proxies)

    @property
    def reachable_beyond_loopback(self) -> bool:
        """Whether requests may come from beyond this machine: a bind beyond loopback, or a name (`--allow-host`)
        that a reverse proxy or a LAN peer reaches the server by."""
        return not is_loopback(self.hosts.bound) or any(not is_loopback(name) for name in self.hosts.allow_hosts)

    def job_spec(self, spec: EvalSpec) -> EvalSpec:
        """The spec a request may queue: refused (`JobRefused` naming the field) when it asks for Ray or names a
        cluster the operator did not allow; with `--allow-ray`, a Ray job joins the operator's cluster."""
        if spec.address is not None and spec.address != self.ray_address:
            raise JobRefused(
                "address",
                f"address {spec.address!r}: a request may not choose the Ray cluster a job joins; the operator "
                "names it with hylo serve --allow-ray ADDRESS, and requests then leave address out",
            )
        if spec.backend == "ray":
            if self.ray_address is None:
                raise JobRefused(
                    "backend",
                    "backend 'ray' is not open to requests on this server: the operator allows it with hylo serve "
                    "--allow-ray ADDRESS (or 'local'); use backend 'process' or 'auto'",
                )
            return spec.model_copy(update={"address": self.ray_address})
        return spec

    def import_hint(self, refused: JobRefused, spec: EvalSpec) -> JobRefused:
        """`refused` with the way around it when it refused an import path the operator did not allow: a request
        cannot turn imports on, the operator can (`hylo serve --allow-import`)."""
        named = {"agent": spec.agent, "benchmark": spec.benchmark}.get(refused.field or "")
        if self.allow_import or named is None or not _import_path(named):
            return refused
        return JobRefused(
            refused.field,
            f"{refused.message}; {named!r} is an import path, code from the request, which this server does not "
            "import: the operator allows it with hylo serve --allow-import",
        )

    def check_url(self, url: str) -> None:
        """Refuse (`ValueError`) a URL an agent would connect to unless an allowed prefix admits it. The message is
        the same whatever is listening there."""
        if not any(prefix.admits(url) for prefix in self.remote):
            allowed = ", ".join(str(prefix) for prefix in self.remote) or "none"
            raise ValueError(
                f"url {url!r} is not a policy server this server may connect to (allowed: {allowed}); the operator "
                "allows one with hylo serve --allow-remote URL_PREFIX"
            )


def _proxy(text: str) -> str:
    """A `--trusted-proxy`: an IP address or network (`127.0.0.1`, `10.0.0.0/8`, `::1`). A name or `*` is refused:
    the operator names the proxies, never every peer."""
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise ValueError(
            f"--trusted-proxy expects a proxy's IP address or network (127.0.0.1, 10.0.0.0/8), got {text!r}"
        ) from None


def _import_path(name: str) -> bool:
    """Whether an agent or benchmark name is an import path (`module:Class`, `gym:module:Env`), not a registered
    name (`expert`, `gym:<id>`)."""
    return ":" in name.removeprefix("gym:")
