"""Hard timeouts kill everything the agent started: the agent's process and its children go together.

The agents are defined at module level: they are pickled to a spawned process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from hylo.core import ActionChunk, EpisodeContext, EpisodeStatus, Kernel, Observation, TaskInstance
from hylo.envs import NullEnv


class SpawnsAndHangs:
    """Starts a long-running helper process, writes its pid to `pid_file`, then hangs in `act`."""

    def __init__(self, pid_file: str) -> None:
        self.pid_file = pid_file

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def act(self, obs: Observation) -> ActionChunk:
        helper = subprocess.Popen(["sleep", "60"])
        Path(self.pid_file).write_text(str(helper.pid))
        time.sleep(1e6)
        return ActionChunk([np.zeros(7, np.float32)])


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, killed but not yet reaped, does not)."""
    with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/status") as f:
        state = next((line for line in f if line.startswith("State:")), "")
        if "zombie" in state or "\tZ" in state:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_timeout_kill_also_ends_the_processes_the_agent_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "helper.pid"
    kernel = Kernel(NullEnv(), SpawnsAndHangs(str(pid_file)), act_timeout_s=0.5, hard_timeout=True, max_steps=5)
    helper = None
    try:
        outcome = kernel.run(TaskInstance("iso", "grandchild"))
        assert (outcome.status, outcome.reason) == (EpisodeStatus.ERROR, "timeout")
        assert pid_file.exists(), "the agent started its helper before hanging"
        helper = int(pid_file.read_text())
        assert helper != os.getpid()
        deadline = time.monotonic() + 2.0
        while alive(helper) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(helper), "the helper process outlived the agent it belonged to"
    finally:
        kernel.close()
        if helper is not None and alive(helper):  # do not leak it if the assertion above failed
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper, signal.SIGKILL)
