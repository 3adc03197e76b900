"""The outermost layer of the API: requests a web page in the user's browser could forge are answered 403 before
anything reads them, and every answer tells the browser not to frame or sniff it.

What a page on another site can do to a server on loopback, and what stops it here:
- read or change anything after re-pointing its own name at 127.0.0.1 (DNS rebinding): the `Host` header names
  the page's site, not this server (`HostPolicy.refusal`);
- change state with a form, `fetch(..., {mode: "no-cors"})` or a websocket (none of them needs a CORS preflight):
  the browser names the page in `Origin`, which is not this server's (`HostPolicy.refusal`);
- embed a read (`<img>`, `<video>`, `<script>`) of an API route: the browser marks it `Sec-Fetch-Site: cross-site`;
- frame the UI to trick clicks: `X-Frame-Options: DENY` and CSP `frame-ancestors 'none'`.

A request body that is not declared JSON is refused (415) as well: a form or a `text/plain` body is what a page can
send without a preflight.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hylo.hosts import CROSS_SITE, HostPolicy

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
"""Sent with every HTTP answer (the UI's files and the API's alike)."""

WS_POLICY_VIOLATION = 1008


class RequestGuard:
    """ASGI middleware enforcing `policy` (see the module's docstring) on HTTP requests and websocket handshakes."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            status, detail = refusal
            if scope["type"] == "websocket":  # closed before it is accepted: the client sees HTTP 403
                await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION, "reason": detail[:120]})
                return
            await _with_headers(JSONResponse({"detail": detail}, status_code=status))(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, why) when the request must not reach the application, else None."""
        headers = Headers(scope=scope)
        hosts, origins = headers.getlist("host"), headers.getlist("origin")
        server = scope.get("server")
        port = server[1] if server and len(server) > 1 else None
        secure = scope.get("scheme") in ("https", "wss")
        if scope["type"] == "websocket" or scope.get("method") in STATE_CHANGING:
            why = self._change_refusal(headers, hosts, origins, port, secure)
        else:
            why = self._read_refusal(headers, hosts, origins, port, secure)
        return (403, why) if why is not None else _not_json(scope, headers)

    def _change_refusal(
        self, headers: Headers, hosts: list[str], origins: list[str], port: int | None, secure: bool
    ) -> str | None:
        """Why a websocket or a request that changes state is refused: its host or its origin, or a page of another
        site that left `Origin` out; None when it is not."""
        why = self.policy.refusal(hosts, origins, port, secure=secure)
        if why is None and not origins and _embedded(headers):  # a browser that left Origin out
            why = "a page of another site may not change anything here (Sec-Fetch-Site: cross-site)"
        return why

    def _read_refusal(
        self, headers: Headers, hosts: list[str], origins: list[str], port: int | None, secure: bool
    ) -> str | None:
        """Why a read is refused: only its host, unless another site's page embeds it; None when it is not."""
        why = self.policy.refusal(hosts, (), port)
        if why is None and _embedded(headers):
            origin = origins[0] if len(origins) == 1 else None
            if origin is None or not self.policy.origin_allowed(origin, hosts[0] if hosts else None, secure=secure):
                why = "a page of another site may not read this server (Sec-Fetch-Site: cross-site)"
        return why


def _embedded(headers: Headers) -> bool:
    """Whether the browser says another site's page made this request, other than by a navigation (a link)."""
    return headers.get("sec-fetch-site") in CROSS_SITE and headers.get("sec-fetch-mode") != "navigate"


def _not_json(scope: Scope, headers: Headers) -> tuple[int, str] | None:
    """A request body not declared JSON (a form, `text/plain`: what a page may send without a preflight)."""
    if scope.get("method") not in STATE_CHANGING or not _has_body(headers) or _is_json(headers.get("content-type")):
        return None
    declared = headers.get("content-type") or "not declared"
    return 415, f"the request body is {declared}; send JSON with 'content-type: application/json'"


def _has_body(headers: Headers) -> bool:
    """Whether a body follows (a chunked one whatever `Content-Length` says: the server reads it)."""
    return "transfer-encoding" in headers or headers.get("content-length", "").strip() not in ("", "0")


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _with_headers(response: JSONResponse) -> JSONResponse:
    for name, value in SECURITY_HEADERS:
        response.headers[name.decode()] = value.decode()
    return response
