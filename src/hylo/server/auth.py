"""Bearer-token protection for the whole API: the token check, the throttle on wrong tokens, and the query
parameter that carries a token where a browser cannot send a header, kept out of every log."""

from __future__ import annotations

import asyncio
import hmac
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from hylo.server.web import is_public

QUERY_TOKEN = "access_token"
"""The query parameter that may carry the token where a browser cannot set a header (websockets, `GET`)."""

QUERY_TOKENS_KEY = "hylo.query_tokens"
"""Where `HideQueryToken` leaves the request's `access_token` values in its ASGI scope."""

FREE_FAILURES = 10
"""Wrong tokens a client may send before its attempts wait their turn."""

FIRST_DELAY_S = 0.25
"""The wait between a client's attempts after its `FREE_FAILURES`-th wrong token; it doubles with each further one."""

MAX_DELAY_S = 30.0
"""The longest wait between two attempts of one client: two guesses a minute."""

FORGET_S = 600.0
"""A client that has sent no wrong token for this long starts afresh."""

MAX_CLIENTS = 4096
"""The most clients whose wrong tokens are remembered; past it, the one that failed longest ago is forgotten."""

MAX_WAITING = 32
"""The most attempts of one client waiting their turn at once; more are answered 429 at once."""

WS_POLICY_VIOLATION = 1008


@dataclass
class _Failures:
    count: int
    last: float
    next_turn: float
    waiting: int = 0


class FailedAttempts:
    """Wrong tokens per client (its address), to slow down guessing: after `FREE_FAILURES` of them, a client's
    attempts are checked one at a time, each `FIRST_DELAY_S` doubled per further wrong token (at most `MAX_DELAY_S`)
    after the one before, whether it holds the right token or not (an answer that came sooner to the right token
    would tell the guesser it was right). Attempts that wait are served in turn, so many connections guess no
    faster than one. Memory is bounded (`MAX_CLIENTS`, `MAX_WAITING`). `clock` and `sleep` are the event loop's
    unless a test gives its own."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._clients: OrderedDict[str, _Failures] = OrderedDict()

    def _of(self, client: str) -> _Failures | None:
        failures = self._clients.get(client)
        if failures is not None and failures.waiting == 0 and self._clock() - failures.last > FORGET_S:
            del self._clients[client]
            return None
        return failures

    async def turn(self, client: str) -> bool:
        """Wait until an attempt of `client` may be checked; False, at once, when too many of its attempts wait."""
        failures = self._of(client)
        if failures is None or failures.count < FREE_FAILURES:
            return True
        if failures.waiting >= MAX_WAITING:
            return False
        now = self._clock()
        start = max(now, failures.next_turn)
        failures.next_turn = start + _delay(failures.count)
        failures.waiting += 1
        try:
            if start > now:
                await self._sleep(start - now)
        finally:
            failures.waiting -= 1
        return True

    def failed(self, client: str) -> None:
        """Count a wrong token from `client`."""
        now = self._clock()
        failures = self._of(client)
        if failures is None:
            failures = self._clients[client] = _Failures(count=0, last=now, next_turn=now)
        failures.count += 1
        failures.last = now
        self._clients.move_to_end(client)
        while len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)

    def __len__(self) -> int:
        return len(self._clients)


def _delay(count: int) -> float:
    return float(min(FIRST_DELAY_S * 2.0 ** min(count - FREE_FAILURES, 16), MAX_DELAY_S))


class HideQueryToken:
    """ASGI middleware, the outermost: the request's `access_token` values are taken out of its query string (in
    place, so that the server's access log never shows them, whatever answers the request: a refusal of its `Host`
    too) and left in its scope for `BearerToken`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope[QUERY_TOKENS_KEY] = _take_query_tokens(scope)
        await self.app(scope, receive, send)


class BearerToken:
    """ASGI middleware: every HTTP request (the OpenAPI document included) and every websocket connection must carry
    `Authorization: Bearer <token>`; anything else gets 401 (a websocket is closed with code 1008). Requests that
    `public` admits (the web UI's own files, `hylo.server.web.is_public`) are the exception: they hold no data.

    Browsers cannot set a header on a websocket or on the URL of an `<img>` or `EventSource`, so a websocket
    connection or a `GET` request may carry the token as the query parameter `access_token` instead; any other
    method needs the header. The parameter is taken out of the request's query string before anything else sees it
    (`HideQueryToken`, or here when that is not in front). The comparison takes the same time whatever the guess,
    and a client that keeps guessing waits its turn (`FailedAttempts`); a request that carries no token at all is
    refused at once and counts as no guess."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        public: Callable[[Scope], bool] = is_public,
        attempts: FailedAttempts | None = None,
    ) -> None:
        self.app = app
        self._token = token.encode()
        self._public = public
        self.attempts = attempts if attempts is not None else FailedAttempts()

    def _given(self, scope: Scope) -> list[bytes]:
        """The tokens the request carries where its method may carry one: its bearer header, and on a websocket or a
        `GET` its `access_token` values."""
        query_tokens = scope.get(QUERY_TOKENS_KEY)
        if query_tokens is None:
            query_tokens = _take_query_tokens(scope)
        given = []
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, credentials = value.partition(b" ")
                if scheme.lower() == b"bearer" and credentials.strip():
                    given.append(credentials.strip())
        if scope["type"] == "websocket" or scope.get("method") == "GET":
            given.extend(value for value in query_tokens if value)
        return given

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._public(scope):
            await self.app(scope, receive, send)
            return
        given = self._given(scope)
        if given:
            client = scope.get("client")
            address = str(client[0]) if client else ""
            if not await self.attempts.turn(address):
                await self._refuse(scope, receive, send, 429, "too many wrong tokens from this address: try later")
                return
            if any(hmac.compare_digest(value, self._token) for value in given):
                await self.app(scope, receive, send)
                return
            self.attempts.failed(address)
        await self._refuse(
            scope, receive, send, 401,
            "missing or wrong bearer token: send 'Authorization: Bearer <token>' (or, on a GET request or a "
            f"websocket, the query parameter '{QUERY_TOKEN}')",
        )  # fmt: skip

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION})
            return
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {"Retry-After": str(int(MAX_DELAY_S))}
        await JSONResponse({"detail": detail}, status_code=status, headers=headers)(scope, receive, send)


def _take_query_tokens(scope: Scope) -> list[bytes]:
    """The `access_token` values of the request's query string, which is rewritten without them (in place, so that
    the server's access log does not show them either); the other parameters are kept as they were sent."""
    query: bytes = scope.get("query_string", b"")
    if not query:
        return []
    kept: list[bytes] = []
    tokens: list[bytes] = []
    for part in query.split(b"&"):
        key, _, value = part.partition(b"=")
        if _unquoted(key) == QUERY_TOKEN.encode():  # `access%5Ftoken` too: a browser would read it as the name
            tokens.append(_unquoted(value))
        else:
            kept.append(part)
    if tokens:
        scope["query_string"] = b"&".join(kept)
    return tokens


def _unquoted(part: bytes) -> bytes:
    return unquote_to_bytes(part.replace(b"+", b" "))
