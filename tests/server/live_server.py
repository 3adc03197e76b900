"""A real uvicorn server on a loopback ephemeral port, in a thread, over a real JobScheduler; the specs of quick
and slow jobs."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from hylo.jobs import JobScheduler, Machine
from hylo.server import create_app

ONE_CPU = Machine(cpus=1, ram_total_gb=16.0, ram_available_gb=16.0)


class LiveServer:
    """The API served by uvicorn on 127.0.0.1:<ephemeral>, and an httpx client for it."""

    def __init__(self, scheduler: JobScheduler, token: str | None = None) -> None:
        self.scheduler = scheduler
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(scheduler, token=token), log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(30)


def wait_final(client: httpx.Client, job_id: str, timeout: float = 90) -> dict[str, Any]:
    """Poll a job's status until it is final."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.get(f"/api/eval/v2/status/{job_id}").json()
        if status["state"] not in ("queued", "running"):
            return status
        assert time.monotonic() < deadline, f"job {job_id} still {status['state']}: {status['message']}"
        time.sleep(0.1)


def quick_spec(**overrides: Any) -> dict[str, Any]:
    """A job that finishes in about a second: BabyAI's expert on GoToLocal, 3 episodes."""
    return {"benchmark": "babyai", "agent": "expert", "tasks": ["GoToLocal"], "episodes": 3, **overrides}


def slow_spec(**overrides: Any) -> dict[str, Any]:
    """A job that takes several seconds: a random agent on Meta-World reach-v3, paced at the control rate."""
    return {
        "benchmark": "metaworld",
        "agent": "random",
        "tasks": ["reach-v3"],
        "episodes": 12,
        "max_steps": 40,
        "timing": "realtime",
        "timing_options": {"clock": "wall"},
        **overrides,
    }
