"""A real `hylo serve` in its own process and Debian's Chromium driven by Playwright: what the web tests run
against."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from playwright.sync_api import Page

CHROMIUM = Path(os.environ.get("HYLO_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
"""Headless on a machine without a network beyond loopback: no background connections to refuse."""


def chromium_path() -> str:
    if not CHROMIUM.is_file():
        raise RuntimeError(f"no Chromium at {CHROMIUM}: `make sysdeps` installs Debian's chromium package")
    return str(CHROMIUM)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HyloServe:
    """`hylo serve` on a free loopback port over `log_dir`, as a user starts it (with the operator's flags `args`, in
    the directory `cwd`); stopped with SIGTERM."""

    def __init__(
        self,
        log_dir: Path,
        *,
        token: str | None = None,
        port: int | None = None,
        startup_s: float = 60.0,
        args: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.port = port if port is not None else free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        hylo = shutil.which("hylo", path=str(Path(sys.executable).parent)) or "hylo"
        command = [hylo, "serve", "--port", str(self.port), "--log-dir", str(log_dir)]
        if token:
            command += ["--token", token]
        command += list(args)
        self._log = (log_dir.parent / f"hylo-serve-{self.port}.log").open("wb")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.api = httpx.Client(base_url=self.url, headers=headers, timeout=30.0)
        deadline = time.monotonic() + startup_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"hylo serve exited with {self.process.returncode}: {self.log_text()}")
            if self._answers():
                return
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"hylo serve did not answer within {startup_s} s: {self.log_text()}")
            time.sleep(0.1)

    def _answers(self) -> bool:
        """Whether the server answers the API yet (False while it is not listening)."""
        try:
            return self.api.get("/api/eval/v2/queue").status_code == 200
        except httpx.TransportError:
            return False

    @property
    def log_path(self) -> Path:
        """The server's output: uvicorn logs every request with its status."""
        return self.log_dir.parent / f"hylo-serve-{self.port}.log"

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        self.api.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def snap(page: Page, tmp_path: Path, name: str) -> Path:
    """Save a screenshot of `page` as `<name>.png` in the test's temporary directory."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
