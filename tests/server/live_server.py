"""A real uvicorn server on a loopback ephemeral port, in a thread, over a real JobScheduler; the specs of quick
and slow jobs."""

from __future__ import annotations

import time
from typing import Any

import httpx
from served_app import Served

from hylo.jobs import JobScheduler, Machine
from hylo.server import ServerAccess, create_app

ONE_CPU = Machine(cpus=1, ram_total_gb=16.0, ram_available_gb=16.0)


class LiveServer(Served):
    """The API over `scheduler` served by uvicorn on 127.0.0.1:<ephemeral>, and an httpx client for it."""

    def __init__(self, scheduler: JobScheduler, token: str | None = None, access: ServerAccess | None = None) -> None:
        self.scheduler = scheduler
        super().__init__(create_app(scheduler, token=token, access=access), token)


def wait_final(client: httpx.Client, job_id: str, timeout: float = 90) -> dict[str, Any]:
    """Poll a job's status until it is final."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.get(f"/api/eval/v2/status/{job_id}").json()
        if status["state"] not in ("queued", "running"):
            return status
        assert time.monotonic() < deadline, f"job {job_id} still {status['state']}: {status['message']}"
        time.sleep(0.1)


def run_job(client: httpx.Client, **overrides: Any) -> str:
    """Start a quick job (`quick_spec` with `overrides`), wait until it is done, and return its run id."""
    started = client.post("/api/eval/v2/start", json=quick_spec(**overrides))
    assert started.status_code == 200, started.text
    status = wait_final(client, started.json()["job_id"])
    assert status["state"] == "done", status["message"]
    return str(started.json()["run_id"])


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
