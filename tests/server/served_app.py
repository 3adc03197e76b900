"""Any ASGI app of hylo on a real uvicorn (127.0.0.1, an ephemeral port) in a thread, with an httpx client and a
websocket opener."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import uvicorn
from websockets.sync.client import ClientConnection, connect


class Served:
    def __init__(
        self, app: Any, token: str | None = None, headers: dict[str, str] | None = None, **config: Any
    ) -> None:
        """`config`: more of uvicorn's `Config` arguments."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.ws_url = self.url.replace("http://", "ws://", 1)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **config))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else (headers or {})
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def websocket(self, path: str, **kwargs: Any) -> ClientConnection:
        return connect(self.ws_url + path, open_timeout=20, **kwargs)

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(60)
