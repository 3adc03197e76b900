"""Limits on what clients send: request bodies (`BodyLimit`, 413), how long a body may take to arrive (408), how
deeply a JSON body nests (422), and incoming websocket messages (close 1009).

A body is read before the application sees it, so a route never holds more than its limit: a declared
`Content-Length` above the limit is refused before the body is read, a chunked body as soon as it grows past it.
A JSON body's depth is counted in the text the parser reads: JSON may come as UTF-8, UTF-16 or UTF-32 (RFC 8259
§8.1 and its predecessors), and the parser (`json.loads` of bytes) takes each; counted in the raw bytes, a UTF-16
body's brackets could hide behind a byte that only looks like a quote.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping

import numpy as np
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hylo.graph.model import MAX_GRAPH_BYTES

MAX_BODY_BYTES = 1024 * 1024
"""The request body limit of every path without an override: 1 MiB."""

MAX_WS_MESSAGE_BYTES = 64 * 1024
"""The largest websocket message a client may send (a session's commands are small): 64 KiB."""

WS_CLOSE_TOO_BIG = 1009
"""The websocket close code for a message larger than the limit ("message too big", RFC 6455)."""

BODY_LIMIT_OVERRIDES: dict[str, int] = {"/api/graphs/": MAX_GRAPH_BYTES}
"""Per-path-prefix body limits of the API: a graph may be as large as a graph file (2 MiB)."""

MAX_JSON_DEPTH = 64
"""How deeply a JSON request body may nest (a graph document nests about eight levels; JSON parsers recurse)."""

BODY_TIMEOUT_S = 60.0
"""How long a request body may take to arrive once its headers have (a 2 MiB graph needs 35 KB/s): a client that
trickles it holds a connection and up to its limit in memory."""

DRAIN_BYTES = 8 * 1024 * 1024
"""How much of a refused body is read and dropped before the 413 is sent, so that a client still sending it reads the
answer instead of a reset connection; a body larger still is cut off."""


def _size(n: int) -> str:
    for unit, factor in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if n and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} bytes"


class BodyLimit:
    """ASGI middleware: a request body larger than `max_bytes` — or than the limit of the longest prefix of
    `overrides` (path prefix → bytes) that the path starts with — gets `413 {"detail": ...}` naming the limit, and
    the application never sees the request. An incoming websocket message larger than `ws_max_bytes` (None: no limit)
    closes the connection with code 1009; the application receives a `websocket.disconnect` with that code, and
    what it sends afterwards is dropped. A body that has not arrived whole `body_timeout_s` after the request's
    headers gets `408` and the connection is closed."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = MAX_BODY_BYTES,
        overrides: Mapping[str, int] | None = None,
        ws_max_bytes: int | None = MAX_WS_MESSAGE_BYTES,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ) -> None:
        limits = {"max_bytes": max_bytes, "ws_max_bytes": ws_max_bytes, **dict(overrides or {})}
        for what, limit in limits.items():
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
                raise ValueError(f"BodyLimit: the limit of {what!r} must be a number of bytes >= 0, got {limit!r}")
        if isinstance(body_timeout_s, bool) or not isinstance(body_timeout_s, (int, float)) or not body_timeout_s > 0:
            raise ValueError(f"BodyLimit: body_timeout_s must be a number of seconds > 0, got {body_timeout_s!r}")
        self.app = app
        self.max_bytes = max_bytes
        self.ws_max_bytes = ws_max_bytes
        self.body_timeout_s = float(body_timeout_s)
        self._overrides = sorted((overrides or {}).items(), key=lambda item: len(item[0]), reverse=True)

    def limit_for(self, path: str) -> int:
        """The body limit of a request to `path`."""
        for prefix, limit in self._overrides:
            if path.startswith(prefix):
                return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket" and self.ws_max_bytes is not None:
            await self._websocket(scope, receive, send, self.ws_max_bytes)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit_for(scope["path"])
        messages: list[Message] = []
        try:
            async with asyncio.timeout(self.body_timeout_s):
                too_large = await _read_body(scope, receive, messages, limit)
        except TimeoutError:
            detail = f"the request body did not arrive within {self.body_timeout_s:g} s"
            late = JSONResponse({"detail": detail}, status_code=408, headers={"Connection": "close"})
            await late(scope, receive, send)
            return
        if too_large:
            await _refuse(scope, receive, send, limit)
            return
        if _declares_json(scope) and json_depth(json_text(_body(messages))) > MAX_JSON_DEPTH:
            problem = {"loc": ["body"], "msg": f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels",
                       "type": "value_error"}  # fmt: skip
            await JSONResponse({"detail": [problem]}, status_code=422)(scope, receive, send)
            return
        queued = iter(messages)

        async def replay() -> Message:
            message = next(queued, None)
            return message if message is not None else await receive()

        await self.app(scope, replay, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        closed = False

        async def limited_receive() -> Message:
            nonlocal closed
            message = await receive()
            if message["type"] == "websocket.receive" and not closed:
                data: bytes | None = message.get("bytes")
                size = len(data) if data is not None else len((message.get("text") or "").encode())
                if size > limit:
                    closed = True
                    reason = f"message larger than {_size(limit)}"
                    await send({"type": "websocket.close", "code": WS_CLOSE_TOO_BIG, "reason": reason})
                    return {"type": "websocket.disconnect", "code": WS_CLOSE_TOO_BIG, "reason": reason}
            return message

        async def guarded_send(message: Message) -> None:
            if not closed:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)


async def _read_body(scope: Scope, receive: Receive, messages: list[Message], limit: int) -> bool:
    """Read a request body into `messages`, up to where the client is gone or the body ends; True (and the rest
    drained, when that is not too much) when it declares more than `limit` or grows past it."""
    declared = _content_length(scope)
    if declared is not None and declared > limit:
        if not _expects_continue(scope) and declared <= limit + DRAIN_BYTES:
            await _drain(receive, declared)
        return True
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":  # the client is gone: the application hears it
            return False
        size += len(message.get("body", b""))
        if size > limit:
            if message.get("more_body", False):
                await _drain(receive, DRAIN_BYTES)
            return True
        if not message.get("more_body", False):
            return False


def _body(messages: list[Message]) -> bytes:
    return b"".join(message.get("body", b"") for message in messages)


def json_text(body: bytes) -> bytes:
    """A JSON body as UTF-8, decoded as the parser decodes it (`json.detect_encoding`: UTF-8, or UTF-16 or UTF-32
    from the pattern of zero bytes or a byte order mark); what does not decode is replaced (the parser refuses it)."""
    encoding = json.detect_encoding(body)
    if encoding in ("utf-8", "utf-8-sig"):
        return body
    return body.decode(encoding, errors="replace").encode("utf-8", errors="replace")


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)
"""A JSON string, or what is left of an unclosed one (matching it whole keeps the scan linear: a body of `"\"\"...`
never makes it backtrack)."""
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(body: bytes) -> int:
    """How deeply a JSON text nests (its strings, which may hold brackets, left out), counted without parsing it:
    a parser recurses once per level and would fail (or take the server with it) on a deep enough body."""
    brackets = np.frombuffer(_STRING.sub(b"", body).translate(None, _NOT_BRACKET), dtype=np.uint8)
    if not brackets.size:
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def _declares_json(scope: Scope) -> bool:
    media = (_header(scope, b"content-type") or b"").split(b";", 1)[0].strip().lower()
    return media.endswith(b"json")


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return None


def _content_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None  # the server refuses a malformed length before the application runs


def _expects_continue(scope: Scope) -> bool:
    return (_header(scope, b"expect") or b"").lower() == b"100-continue"


async def _drain(receive: Receive, max_bytes: int) -> None:
    """Read and drop up to about `max_bytes` of the rest of a request body."""
    drained = 0
    while drained <= max_bytes:
        message = await receive()
        if message["type"] != "http.request":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    shown = _size(limit) if _size(limit).endswith("bytes") else f"{_size(limit)} ({limit} bytes)"
    detail = f"the request body is larger than {shown}, the most {scope['path']} accepts"
    await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)
