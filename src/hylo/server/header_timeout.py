"""A time limit on a request's headers: `hylo serve`'s HTTP protocol closes a connection whose request head has not
arrived whole `HEADER_TIMEOUT_S` after the connection opened or its previous answer was sent.

uvicorn bounds the idle time between two requests (`timeout_keep_alive`), but not the time the headers of a request
take once their first byte came, nor a new connection's silence: a client that sends one header byte every few
seconds held a connection, and its memory, for as long as it liked (300 of them, 70 s and counting). The application
cannot see such a client (it is called once the head is complete), so the limit lives in the protocol: uvicorn's h11
protocol, with a timer that runs whenever the connection waits for a request head.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

HEADER_TIMEOUT_S = 10.0
"""How long a request's head (request line and headers) may take to arrive; a client sends it in one packet."""


def _timed_out_answer(timeout_s: float) -> bytes:
    body = f"the request headers did not arrive within {timeout_s:g} s\n".encode()
    head = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    )
    return head + body


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection that waits for a request head longer than `header_timeout_s`: with
    `408 Request Timeout` when part of the head came, silently when nothing did (as an idle connection is closed)."""

    header_timeout_s: float = HEADER_TIMEOUT_S

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_begun = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow_state()

    def data_received(self, data: bytes) -> None:
        if self._head_deadline is not None:
            self._head_begun = True
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        self._follow_state()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_state()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_head(self) -> bool:
        return (
            self.conn.their_state is h11.IDLE
            and not self.transport.is_closing()
            and self.transport.get_protocol() is self  # not upgraded to a websocket
        )

    def _follow_state(self) -> None:
        """Run the timer while the connection waits for a request head (a new connection, or one whose previous
        request is answered), and only then."""
        if not self._waiting_for_head():
            self._disarm()
        elif self._head_deadline is None:
            self._head_begun = False
            self._head_deadline = self.loop.call_later(self.header_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _timed_out(self) -> None:
        self._head_deadline = None
        if not self._waiting_for_head():
            return
        if self._head_begun:
            self.transport.write(_timed_out_answer(self.header_timeout_s))
        self.transport.close()
