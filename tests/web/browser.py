"""A real `hylo serve` in its own process and Debian's Chromium driven by Playwright: what the web tests run
against."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote

import httpx
from playwright.sync_api import Page, expect

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


READY = re.compile(r"hylo serve: open (\S+) in a browser")


class HyloServe:
    """`hylo serve` on a free loopback port over `log_dir`, as a user starts it (with the operator's flags `args`, in
    the directory `cwd`); stopped with SIGTERM. Without `token` it makes its own, as it does for a user: `token` is
    then read from the URL it prints (`open_url`), which a browser opens to sign in (`sign_in`). `running` holds the
    servers not yet closed."""

    running: ClassVar[list[HyloServe]] = []

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
        self.api = httpx.Client(base_url=self.url, timeout=30.0)
        self.open_url = self._printed_url(startup_s)
        made = re.search(r"#token=([^&\s]+)$", self.open_url)
        if made:
            self.token = unquote(made.group(1))
        if self.token:
            self.api.headers["Authorization"] = f"Bearer {self.token}"
        if not self._answers():
            self.close()
            raise RuntimeError(f"hylo serve printed its URL but does not answer: {self.log_text()}")
        HyloServe.running.append(self)

    def _printed_url(self, startup_s: float) -> str:
        """The URL `hylo serve` prints once it answers."""
        deadline = time.monotonic() + startup_s
        while True:
            if not self._log.closed:
                self._log.flush()
            found = READY.search(self.log_path.read_text(errors="replace"))
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                raise RuntimeError(f"hylo serve exited with {self.process.returncode}: {self.log_text()}")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"hylo serve did not answer within {startup_s} s: {self.log_text()}")
            time.sleep(0.1)

    @property
    def made_token(self) -> bool:
        """Whether the server made its token (and so prints it in the URL to open)."""
        return "#token=" in self.open_url

    def sign_in(self, page: Page) -> None:
        """What a user does first: open the URL the server printed. The page keeps the token and takes it out of the
        address bar."""
        page.goto(self.open_url)
        expect(page).to_have_url(self.url + "/")
        assert page.evaluate("localStorage.getItem('hylo:token')") == self.token

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
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self in HyloServe.running:
            HyloServe.running.remove(self)
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
