"""What the bridge tests serve and step: a scripted hylo agent and a small vla-eval benchmark.

This directory is put on PYTHONPATH, so the bridge names the agent `vlaeval_fixtures:ScriptedAgent` and vla-eval
names the benchmark `vlaeval_fixtures:ToyBenchmark`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from vla_eval.benchmarks.base import StepBenchmark, StepResult
from vla_eval.specs import DimSpec

from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation
from hylo.evallog.store import EvalLog

HERE = Path(__file__).resolve().parent

ACTION_DIM = 4


class ScriptedAgent(AgentBase):
    """Acts by the task the harness named, and writes what it saw into the trace (`agent.decision`):

    - `fail`: raises ValueError at its third act
    - `chunked`: returns 4 actions per act (action k of the episode is 0.01·k in every dimension)
    - `wild`: 5.0 first (outside the ±1 bounds: clipped), then NaN (rejected)
    - `gated`: each act waits (up to a minute) until the file named by the task's `instruction` exists
    - `text`: returns a string, which no ACTION can carry
    - `surrogate`: raises ValueError with a lone surrogate in its message (which SQLite cannot store)
    - `glance`: as any other, but notes only the images' shapes (summing large ones costs seconds)
    - anything else: 0.25 in every dimension
    """

    name = "scripted"
    requirements = AgentRequirements(
        action_space=spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32), needs_images=True
    )

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.task = ctx.task.task
        self.gate = Path(ctx.task.instruction or "")
        self.calls = 0

    def act(self, obs: Observation) -> Any:
        self.calls += 1
        if self.task == "gated":
            deadline = time.monotonic() + 60
            while not self.gate.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        if self.task == "text":
            return "hello"
        if self.task == "surrogate":
            raise ValueError("bad \udcff text")
        images = obs.get("images", {})
        self.ctx.emit(
            "agent.decision",
            {
                "call": self.calls,
                "keys": sorted(obs),
                "instruction": obs.instruction,
                "image_shapes": {name: list(np.shape(image)) for name, image in images.items()},
                "image_sums": {} if self.task == "glance" else _sums(images),
                "state": np.asarray(obs.state).tolist() if obs.state is not None else None,
            },
        )
        if self.task == "fail" and self.calls == 3:
            raise ValueError("scripted failure at the third act")
        if self.task == "chunked":
            first = (self.calls - 1) * 4
            return ActionChunk([np.full(ACTION_DIM, 0.01 * (first + k), dtype=np.float32) for k in range(4)])
        if self.task == "wild":
            value = 5.0 if self.calls == 1 else float("nan")
            return ActionChunk.single(np.full(ACTION_DIM, value, dtype=np.float32))
        return ActionChunk.single(np.full(ACTION_DIM, 0.25, dtype=np.float32))


class ExactBatchAgent(AgentBase):
    """A batched agent whose arithmetic is exact whatever the batch: an integer network over the 5-d state, plus
    per-episode noise from `ctx.rng` and a term from how often that episode asked (kept by episode id, as one
    instance serving every connection must), in chunks of 2. An episode given another's observation, context or
    count would act otherwise. On an `explode` task, the call that holds its second request raises."""

    name = "exact-batch"
    requirements = AgentRequirements(
        action_space=spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32), needs_images=False
    )

    def __init__(self) -> None:
        self.weights = np.random.default_rng(0).integers(-50, 50, size=(5, ACTION_DIM), dtype=np.int64)
        self.asked: dict[str, int] = {}

    def on_episode_end(self, outcome: Any, ctx: EpisodeContext | None = None) -> None:
        self.asked.pop((ctx or self.ctx).episode_id, None)

    def act(self, obs: Observation) -> Any:
        return self.act_batch([obs], [self.ctx])[0]

    def act_batch(self, observations: list[Observation], contexts: list[EpisodeContext]) -> list[ActionChunk]:
        for ctx in contexts:
            self.asked[ctx.episode_id] = self.asked.get(ctx.episode_id, 0) + 1
            if ctx.task.task == "explode" and self.asked[ctx.episode_id] == 2:
                raise RuntimeError("policy exploded")
        states = np.stack([np.asarray(obs["state"], dtype=np.float64) for obs in observations])
        hidden = np.rint(states * 1000).astype(np.int64) @ self.weights  # exact whatever the batch
        base = ((hidden % 2001) - 1000).astype(np.float32) / np.float32(2000.0)
        chunks = []
        for row, ctx in zip(base, contexts, strict=True):
            noise = ctx.rng.integers(-100, 100, size=(2, ACTION_DIM)).astype(np.float32) / np.float32(400.0)
            asked = np.float32(self.asked[ctx.episode_id] % 7) / np.float32(100.0)
            chunks.append(ActionChunk([row + n - asked for n in noise]))
        return chunks


def _sums(images: dict[str, Any]) -> dict[str, int]:
    return {name: int(np.asarray(image, dtype=np.int64).sum()) for name, image in images.items()}


class HeavyAgent(ScriptedAgent):
    """A ScriptedAgent that holds `BALLAST_BYTES` of memory of its own (as a model's weights would), released by
    `close`, so whether the bridge keeps or closes idle agents shows in its memory."""

    BALLAST_BYTES = 8 * 2**20

    def __init__(self) -> None:
        self.ballast: np.ndarray | None = np.ones(self.BALLAST_BYTES, dtype=np.uint8)  # written: resident

    def close(self) -> None:
        self.ballast = None


def frame(height: int, width: int, channels: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(height, width, channels), dtype=np.uint8)


class ToyBenchmark(StepBenchmark):
    """Deterministic and fast: a 3-channel and a 4-channel camera, a 5-d state, `steps` steps per episode; the
    episode succeeds when the last action's first component is positive."""

    render_backends = frozenset({"gpu", "cpu"})

    def __init__(self, tasks: list[str] | None = None, steps: int = 6) -> None:
        super().__init__()
        self.task_names = tasks or ["reach", "push"]
        self.steps = steps
        self.front = frame(16, 16, 3, 1)
        self.wrist = frame(8, 8, 4, 2)
        self.t = 0
        self.last: np.ndarray | None = None

    @classmethod
    def configure_render(cls, mode: str) -> dict[str, str]:
        return {}

    def get_tasks(self) -> list[dict[str, Any]]:
        return [{"name": name, "suite": "toy"} for name in self.task_names]

    def reset(self, task: dict[str, Any]) -> Any:
        self.t = 0
        self.last = None
        return self.t

    def step(self, action: dict[str, Any]) -> StepResult:
        self.last = np.asarray(action["actions"], dtype=np.float64)
        self.t += 1
        return StepResult(obs=self.t, reward=0.0, done=self.t >= self.steps, info={})

    def make_obs(self, raw_obs: Any, task: dict[str, Any]) -> dict[str, Any]:
        return {
            "images": {"front": self.front, "wrist": self.wrist},
            "state": np.arange(5, dtype=np.float64) + raw_obs,
            "task_description": f"{task['name']} the cube",
        }

    def get_step_result(self, step_result: StepResult) -> dict[str, Any]:
        first = float(self.last[0]) if self.last is not None else 0.0
        return {"success": first > 0}

    def get_metadata(self) -> dict[str, Any]:
        return {"max_steps": 50}

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"actions": DimSpec("actions", ACTION_DIM, "continuous", (-1.0, 1.0))}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        return {"state": DimSpec("state", 5, "raw")}


class BridgeProcess:
    """`python -m hylo bridge vlaeval ...` on a free loopback port, as an operator starts it."""

    def __init__(self, *args: str, log_dir: Path, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hylo", "bridge", "vlaeval", *args, "--port", "0", "--log-dir", str(log_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=bridge_env(),
            cwd=cwd,
        )
        assert self.proc.stderr is not None
        self.lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError(f"bridge exited early: {self.proc.wait()} {''.join(self.lines)}")
            self.lines.append(line)
            found = re.search(r"on ws://127\.0\.0\.1:(\d+) \(run (\S+), log (.+)\)$", line.strip())
            if found:
                self.port = int(found.group(1))
                self.run_id = found.group(2)
                self.run_dir = Path(found.group(3))
                break
        else:
            raise RuntimeError("the bridge did not say where it listens")
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=10) as response:
            assert response.status == 200
            return json.loads(response.read())

    def wait_health(self, done: Callable[[dict[str, Any]], bool], timeout: float = 20) -> dict[str, Any]:
        """`/health` once `done` holds for it (or as it is when `timeout` s have passed)."""
        deadline = time.monotonic() + timeout
        while not done(health := self.health()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return health

    def rows(self) -> list[Any]:
        with EvalLog.open(self.run_dir) as log:
            return log.attempts()

    def trace(self, episode_id: str) -> list[dict[str, Any]]:
        with EvalLog.open(self.run_dir) as log:
            return log.trace(episode_id)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def bridge_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return env


def refused_in_one_line(argv: list[str], log_dir: Path, err: Callable[[], str]) -> str:
    """Run `hylo` with `argv`; it must exit 2 with one line on stderr (`err()` reads it) and leave `log_dir` empty.
    Returns the line."""
    from hylo.cli import main

    try:
        code = main(argv)
    except SystemExit as exit:  # argparse refuses it
        code = exit.code
    assert code == 2
    lines = err().splitlines()
    assert len(lines) == 1 and "error: " in lines[0]
    assert not any(log_dir.iterdir())
    return lines[0]
