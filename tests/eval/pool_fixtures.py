"""Envs and agents for the worker-pool tests. Worker processes import this module by name (`gym:pool_fixtures:...`,
`pool_fixtures:Agent`), so it lives on PYTHONPATH with the other eval fixtures.

Environment variables (inherited by worker processes) tell the envs where to record what they did:
`HYLO_TEST_ENV_LOG` — a file each env appends `open <pid>` / `close <pid>` to.
`HYLO_TEST_AWAIT_REPLACEMENT` — the marker of a worker's death (`KillOnce`): once it exists, an env built before it
(a surviving worker's) waits at its next reset until an env built after it (the replacement's) has placed an episode,
so the replacement takes episodes however long it takes to start.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from hylo.core import ActionChunk, AgentRequirements


def _log(line: str) -> None:
    path = os.environ.get("HYLO_TEST_ENV_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{line} {os.getpid()}\n")


def _first_time(marker: str) -> bool:
    """True once per marker file across processes: the first caller creates it."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class CountedEnv(gym.Env):
    """Reaches its goal after 3 steps of action 1; logs its construction and its close."""

    def __init__(self) -> None:
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(-1.0, 10.0, shape=(1,), dtype=np.float32)
        self.t = 0
        self._killed = os.environ.get("HYLO_TEST_AWAIT_REPLACEMENT")
        self._replacement = self._killed is not None and os.path.exists(self._killed)
        _log("open")

    def reset(self, *, seed=None, options=None):
        if self._killed is not None:
            _await_replacement(self._killed, self._replacement)
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += int(action)
        done = self.t >= 3
        return np.array([self.t], dtype=np.float32), float(done), done, False, {"is_success": done}

    def close(self) -> None:
        _log("close")


def _await_replacement(killed: str, replacement: bool, timeout_s: float = 300.0) -> None:
    taken = killed + ".taken"
    if replacement:
        Path(taken).touch()
        return
    deadline = time.monotonic() + timeout_s
    while os.path.exists(killed) and not os.path.exists(taken) and time.monotonic() < deadline:
        time.sleep(0.05)


class HangOnceEnv(CountedEnv):
    """The first step of the first episode to get there (across processes) never returns."""

    def step(self, action):
        if _first_time(os.environ["HYLO_TEST_HANG_MARKER"]):
            time.sleep(3600)
        return super().step(action)


class SlowEnv(CountedEnv):
    """A simulator slower than the per-step allowance (as a software renderer is): each reset takes `reset_s`, each
    step `step_s`; never succeeds."""

    def __init__(self, reset_s: float = 1.0, step_s: float = 0.6) -> None:
        super().__init__()
        self.reset_s = reset_s
        self.step_s = step_s

    def reset(self, *, seed=None, options=None):
        time.sleep(self.reset_s)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        time.sleep(self.step_s)
        obs, _, _, truncated, info = super().step(0)
        return obs, 0.0, False, truncated, info


class LateStepEnv(CountedEnv):
    """The second step of every episode takes `seconds` (far past a short --env-timeout) and then returns."""

    def __init__(self, seconds: float = 6.0) -> None:
        super().__init__()
        self.seconds = seconds
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        self.steps = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.steps == 2:
            time.sleep(self.seconds)
        return super().step(action)


class DevicesEnv(CountedEnv):
    """`CountedEnv` that logs the devices its process may use when it is built: `devices <CUDA_VISIBLE_DEVICES>
    <MUJOCO_EGL_DEVICE_ID>` (`-` for unset)."""

    def __init__(self) -> None:
        super().__init__()
        seen = [os.environ.get(name, "-") for name in ("CUDA_VISIBLE_DEVICES", "MUJOCO_EGL_DEVICE_ID")]
        _log("devices " + " ".join(repr(value) for value in seen))


gym.register(id="Counted-v0", entry_point=CountedEnv)
gym.register(id="Devices-v0", entry_point=DevicesEnv)
gym.register(id="HangOnce-v0", entry_point=HangOnceEnv)
gym.register(id="Slow-v0", entry_point=SlowEnv)
gym.register(id="LateStep-v0", entry_point=LateStepEnv)


class Forward:
    """Always action 1: CountedEnv succeeds in 3 steps."""

    def act(self, obs):
        return ActionChunk.single(1)


class BatchForward(Forward):
    """`Forward` with an `act_batch`: it can serve a batched run."""

    def act_batch(self, observations, contexts):
        return [ActionChunk.single(1) for _ in observations]


class IndexSleeper:
    """Sleeps `seconds` per act in the episode of index `slow_index`, none in the others; moves forward (2)."""

    requirements = AgentRequirements(needs_images=False)  # it runs on BabyAI, whose frames it would not read

    def __init__(self, slow_index: int = 0, seconds: float = 0.3, action: int = 2) -> None:
        self.slow_index = slow_index
        self.seconds = seconds
        self.action = action

    def reset(self, ctx):
        self.slow = ctx.task.index == self.slow_index

    def act(self, obs):
        if self.slow:
            time.sleep(self.seconds)
        return ActionChunk.single(self.action)


class KillOnce:
    """Ends its own process in the first episode of index `index` to act, once across processes (`marker` is
    created then): `how` is `sigkill` (as the OOM killer would), `segfault` (a null read) or `exit` (`os._exit(0)`).
    Acts 1 otherwise, taking `seconds` per act."""

    def __init__(self, marker: str, index: int = 1, seconds: float = 0.0, how: str = "sigkill") -> None:
        self.marker = marker
        self.index = index
        self.seconds = seconds
        self.how = how

    def reset(self, ctx):
        self.mine = ctx.task.index == self.index

    def act(self, obs):
        if self.mine and _first_time(self.marker):
            if self.how == "segfault":
                import ctypes

                ctypes.string_at(0)
            elif self.how == "exit":
                os._exit(0)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.seconds)
        return ActionChunk.single(1)


class KillWhileBroken:
    """Kills its own process on every act while the file `broken` exists (a broken machine); acts 1 otherwise."""

    def __init__(self, broken: str) -> None:
        self.broken = broken

    def act(self, obs):
        if Path(self.broken).exists():
            os.kill(os.getpid(), signal.SIGKILL)
        return ActionChunk.single(1)


class HangOnceAgent:
    """The first act of the first episode to get there (across processes) never returns."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def act(self, obs):
        if _first_time(self.marker):
            time.sleep(3600)
        return ActionChunk.single(1)


class KillOnceThenFailToBuild(KillOnce):
    """KillOnce, and the first agent built after the kill (the replacement worker's) fails to build."""

    def __init__(self, marker: str, index: int = 1, seconds: float = 0.0) -> None:
        super().__init__(marker, index, seconds)
        if Path(marker).exists() and _first_time(marker + ".build-failed"):
            raise RuntimeError("cannot load the checkpoint (a flaky file system)")


class SpawnAndHang:
    """Starts a helper process (`sleep 600`, its pid written to `pidfile`), then never answers."""

    def __init__(self, pidfile: str) -> None:
        self.pidfile = pidfile

    def act(self, obs):
        import subprocess

        helper = subprocess.Popen(["sleep", "600"])
        Path(self.pidfile).write_text(str(helper.pid))
        time.sleep(3600)
