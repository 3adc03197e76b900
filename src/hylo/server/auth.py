"""Bearer-token protection for the whole API."""

from __future__ import annotations

import hmac
from urllib.parse import unquote_to_bytes

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from hylo.server.web import is_public

QUERY_TOKEN = "access_token"
"""The query parameter that may carry the token where a browser cannot set a header (websockets, `GET`)."""


class BearerToken:
    """ASGI middleware: every HTTP request (the OpenAPI document included) and every websocket connection must carry
    `Authorization: Bearer <token>`; anything else gets 401 (a websocket is closed with code 1008). The web UI's own
    files (the page and its assets, `hylo.server.web.is_public`) are the exception: they hold no data.

    Browsers cannot set a header on a websocket or on the URL of an `<img>` or `EventSource`, so a websocket
    connection or a `GET` request may carry the token as the query parameter `access_token` instead; any other
    method needs the header. The parameter is taken out of the request's query string before anything else sees it
    (the application, the server's access log). The comparison takes the same time whatever the guess."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _authorized(self, scope: Scope, query_tokens: list[bytes]) -> bool:
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, credentials = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    given = credentials.strip()
        if hmac.compare_digest(given, self._token):
            return True
        if scope["type"] == "websocket" or scope.get("method") == "GET":
            return any(hmac.compare_digest(value, self._token) for value in query_tokens)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or is_public(scope):
            await self.app(scope, receive, send)
            return
        query_tokens = _take_query_tokens(scope)
        if self._authorized(scope, query_tokens):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        response = JSONResponse(
            {"detail": "missing or wrong bearer token: send 'Authorization: Bearer <token>' (or, on a GET request "
                       f"or a websocket, the query parameter '{QUERY_TOKEN}')"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )  # fmt: skip
        await response(scope, receive, send)


def _take_query_tokens(scope: Scope) -> list[bytes]:
    """The `access_token` values of the request's query string, which is rewritten without them (in place, so that
    the server's access log does not show them either); the other parameters are kept as they were sent."""
    query: bytes = scope.get("query_string", b"")
    if QUERY_TOKEN.encode() not in query:
        return []
    kept: list[bytes] = []
    tokens: list[bytes] = []
    for part in query.split(b"&"):
        key, _, value = part.partition(b"=")
        if key == QUERY_TOKEN.encode():
            tokens.append(unquote_to_bytes(value.replace(b"+", b" ")))
        else:
            kept.append(part)
    scope["query_string"] = b"&".join(kept)
    return tokens
