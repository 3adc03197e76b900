"""The slow and the silent are bounded: a request head must arrive within the header timeout (`408` and the
connection closed when part of it came, closed without an answer when nothing did), a body within the body timeout,
and neither limit cuts what is not waiting for a client: a long answer, a websocket, a kept-alive connection.

The limits here are short (2 s) so that the tests are quick; every bound asserted is generous (a loaded machine is
slow, never this slow). `hylo serve` itself is tried once, with its own limit."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from serve_process import ServeProcess
from served_app import Served

from hylo.server.header_timeout import HEADER_TIMEOUT_S, HeaderTimeoutProtocol
from hylo.server.limits import BodyLimit

LIMIT_S = 2.0
"""The header and body timeouts of the servers here."""

GENEROUS_S = 30.0
"""How long past its limit a slow client may still be connected before the test calls the limit broken."""


class QuickHeaderTimeout(HeaderTimeoutProtocol):
    header_timeout_s = LIMIT_S


def probe_app() -> FastAPI:
    """`GET /ok`; `POST /echo` (its body's size); `GET /long`, an answer that takes twice LIMIT_S; `/ws`, an echo."""
    app = FastAPI()

    @app.get("/ok")
    def ok() -> dict[str, bool]:
        return {"ok": True}

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"received": len(await request.body())}

    @app.get("/long")
    def long() -> StreamingResponse:
        async def ticks() -> AsyncIterator[str]:
            for tick in range(4):
                yield f"{tick}\n"
                await asyncio.sleep(LIMIT_S / 2)

        return StreamingResponse(ticks(), media_type="text/plain")

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                await websocket.send_text(await websocket.receive_text())

    app.add_middleware(BodyLimit, body_timeout_s=LIMIT_S)
    return app


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    served = Served(probe_app(), http=QuickHeaderTimeout)
    yield served
    served.close()


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def trickle(url: str, data: bytes, every_s: float = 0.25, patience_s: float = LIMIT_S + GENEROUS_S) -> bytes:
    """Send `data` one byte every `every_s` (then nothing more) and return what the server answered by the time it
    closed the connection; fails when it is still open after `patience_s`."""
    deadline = time.monotonic() + patience_s
    answer = b""
    with socket.create_connection(address(url)) as sock:
        sock.settimeout(every_s)
        sent = 0
        while time.monotonic() < deadline:
            if sent < len(data):
                try:
                    sock.sendall(data[sent : sent + 1])
                except OSError:  # closed by the server
                    break
                sent += 1
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                return answer
            answer += chunk
        else:
            pytest.fail(f"the connection is still open after {patience_s:g} s (sent {sent} bytes)")
    return answer


SLOW_HEAD = b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: 1\r\n" * 1000


def test_a_request_head_that_trickles_is_answered_408_and_closed(server: Served) -> None:
    answer = trickle(server.url, SLOW_HEAD)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"did not arrive within 2 s" in answer
    assert httpx.get(f"{server.url}/ok").json() == {"ok": True}


def test_a_silent_connection_is_closed_without_an_answer(server: Served) -> None:
    assert trickle(server.url, b"") == b""


def test_many_slow_clients_are_all_closed_while_others_are_served(server: Served) -> None:
    answers: list[bytes] = []

    def slow() -> None:
        answers.append(trickle(server.url, SLOW_HEAD))

    threads = [threading.Thread(target=slow) for _ in range(50)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    with httpx.Client(base_url=server.url) as client:  # served meanwhile, on a kept-alive connection
        for _ in range(5):
            assert client.get("/ok").json() == {"ok": True}
    for thread in threads:
        thread.join()
    assert len(answers) == 50 and all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers)


def test_a_head_sent_in_parts_a_long_answer_a_websocket_and_a_kept_alive_connection_are_not_cut(
    server: Served,
) -> None:
    with socket.create_connection(address(server.url)) as sock:
        sock.settimeout(GENEROUS_S)
        for part in (b"GET /ok HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n", b"\r\n"):
            sock.sendall(part)
            time.sleep(0.05)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")
    with httpx.Client(base_url=server.url, timeout=GENEROUS_S) as client:
        assert client.get("/long").text == "0\n1\n2\n3\n"  # answering for longer than the limit
        first = client.get("/ok")
        time.sleep(LIMIT_S / 4)
        assert client.get("/ok").json() == first.json() == {"ok": True}
    with server.websocket("/ws") as ws:
        time.sleep(LIMIT_S * 1.25)  # a websocket waits for no request head
        ws.send("still here")
        assert ws.recv(timeout=GENEROUS_S) == "still here"


def test_a_request_body_that_trickles_is_answered_408_and_closed(server: Served) -> None:
    head = b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    with socket.create_connection(address(server.url)) as sock:
        sock.sendall(head)
        answer = trickle_on(sock, b"[" * 1000)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"the request body did not arrive within 2 s" in answer and b"connection: close" in answer.lower()
    assert httpx.post(f"{server.url}/echo", content=b"x" * 1000).json() == {"received": 1000}


def trickle_on(sock: socket.socket, data: bytes, every_s: float = 0.25) -> bytes:
    """`trickle` on an open connection."""
    deadline = time.monotonic() + LIMIT_S + GENEROUS_S
    sock.settimeout(every_s)
    answer = b""
    for byte in data:
        assert time.monotonic() < deadline, "the connection is still open"
        with contextlib.suppress(OSError):
            sock.sendall(bytes([byte]))
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        if not chunk:
            break
        answer += chunk
    return answer


def test_hylo_serve_closes_a_connection_whose_head_trickles(tmp_path: Path) -> None:
    server = ServeProcess(tmp_path / "runs", env={"HYLO_TOKEN": "a-token-of-sixteen-or-more"})
    try:
        answer = trickle(server.url, SLOW_HEAD, every_s=0.5, patience_s=HEADER_TIMEOUT_S + GENEROUS_S)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert f"within {HEADER_TIMEOUT_S:g} s".encode() in answer
    finally:
        server.close()
