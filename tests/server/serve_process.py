"""`hylo serve` as a user starts it, in its own process on a free loopback port: the URL it prints (and the token in
it), and its whole output (uvicorn's access log among it) in a file."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import httpx

READY = re.compile(r"hylo serve: open (\S+) in a browser")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServeProcess:
    """`python -m hylo serve --port <free> --log-dir LOG_DIR ARGS...`, stopped with SIGTERM by `close`."""

    def __init__(self, log_dir: Path, *args: str, env: dict[str, str] | None = None, startup_s: float = 90) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.output_path = log_dir.parent / f"serve-{self.port}.out"
        self._out = self.output_path.open("wb")
        command = [sys.executable, "-m", "hylo", "serve", "--port", str(self.port), "--log-dir", str(log_dir), *args]
        environment = {name: value for name, value in os.environ.items() if name != "HYLO_TOKEN"}
        self.process = subprocess.Popen(
            command, stdout=self._out, stderr=subprocess.STDOUT, env={**environment, **(env or {})}
        )
        deadline = time.monotonic() + startup_s
        while (found := READY.search(self.output())) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"hylo serve did not start: {self.output()[-3000:]}")
            time.sleep(0.1)
        self.open_url = found.group(1)
        made = re.search(r"#token=(\S+)$", self.open_url)
        self.token = unquote(made.group(1)) if made else None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def output(self) -> str:
        """Everything the server printed so far."""
        if not self._out.closed:
            self._out.flush()
        return self.output_path.read_text(errors="replace")

    def close(self) -> None:
        if hasattr(self, "client"):
            self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()
