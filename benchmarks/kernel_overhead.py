"""What the Kernel costs per step, with and without a JSONL trace, on the cheapest environment there is.

Three loops run the same work on the same `NullEnv` with the same agent (a one-action `ActionChunk` holding a fixed,
in-bounds float32 array, built once):

- `bare`: `obs = env.reset(task)`, then per step `chunk = agent.act(obs)`, `result = env.step(chunk.actions[0])`,
  `obs = result.obs` — the work without the harness
- `kernel`: `Kernel(env, agent).run(task)` — default shield on, no subscriber on the bus
- `kernel_trace`: the same with a `JsonlRecorder` (writing to a temp file) subscribed to the Kernel's `EventBus`

Repeats are interleaved (bare, kernel, trace, bare, kernel, trace, ...) so that drift in the machine's speed hits
every variant alike; each figure is the median over repeats. Goals (spec): the Kernel adds at most 10 µs per step
with no subscriber, and at most 40 µs per step with the JSONL trace.

    python benchmarks/kernel_overhead.py            # a short table
    python benchmarks/kernel_overhead.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hylo.core import ActionChunk, EventBus, JsonlRecorder, Kernel, Observation, TaskInstance
from hylo.envs import NullEnv

GOAL_OVERHEAD_US = 10.0
GOAL_TRACE_OVERHEAD_US = 40.0
VARIANTS = ("bare", "kernel", "kernel_trace")


class FixedAgent:
    """Returns the same one-action chunk every step: the cheapest possible agent."""

    name = "fixed"

    def __init__(self, dim: int) -> None:
        self._chunk = ActionChunk.single(np.full(dim, 0.25, dtype=np.float32))

    def act(self, obs: Observation) -> ActionChunk:
        return self._chunk


def _bare(env: NullEnv, agent: FixedAgent, task: TaskInstance, episodes: int, episode_steps: int) -> int:
    steps = 0
    for _ in range(episodes):
        obs = env.reset(task)
        for _ in range(episode_steps):
            chunk = agent.act(obs)
            result = env.step(chunk.actions[0])
            obs = result.obs
        steps += episode_steps
    return steps


def _kernel(kernel: Kernel, task: TaskInstance, episodes: int) -> int:
    steps = 0
    for _ in range(episodes):
        outcome = kernel.run(task)
        if outcome.reason != "max_steps":
            raise RuntimeError(f"benchmark episode ended early: {outcome}")
        steps += outcome.steps
    return steps


def _timed(run: Callable[[], int]) -> tuple[int, float]:
    gc.collect()
    start = time.perf_counter()
    steps = run()
    return steps, time.perf_counter() - start


def measure(repeats: int, steps: int, episode_steps: int, dim: int = 7, warmup: bool = True) -> dict[str, Any]:
    """Run the interleaved repeats; returns the figures (steps per repeat are rounded up to whole episodes)."""
    if repeats < 1 or steps < 1 or episode_steps < 1:
        raise ValueError("repeats, steps and episode_steps must be >= 1")
    episodes = math.ceil(steps / episode_steps)
    env = NullEnv(dim=dim, max_episode_steps=episode_steps)
    agent = FixedAgent(dim)
    task = TaskInstance(benchmark="bench", task="null")
    kernel = Kernel(env, agent)
    trace_bus = EventBus(run_id="bench")
    trace_kernel = Kernel(env, agent, bus=trace_bus)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    trace_bytes = 0

    with tempfile.TemporaryDirectory(prefix="hylo-bench-") as tmp:
        path = Path(tmp) / "trace.jsonl"

        def traced(n: int) -> tuple[int, float]:
            nonlocal trace_bytes
            path.unlink(missing_ok=True)  # a fresh file per repeat: the trace of all repeats would be large
            recorder = JsonlRecorder(path)
            trace_bus.subscribe(recorder)
            try:
                result = _timed(lambda: _kernel(trace_kernel, task, n))
            finally:
                trace_bus.unsubscribe(recorder)
                recorder.close()
            if trace_bus.detached:
                raise RuntimeError(f"the JSONL recorder was detached: {trace_bus.detached[0][1]!r}")
            trace_bytes = path.stat().st_size
            return result

        if warmup:
            _bare(env, agent, task, 1, episode_steps)
            _kernel(kernel, task, 1)
            traced(1)

        for _ in range(repeats):
            for variant in VARIANTS:
                if variant == "bare":
                    done, elapsed = _timed(lambda: _bare(env, agent, task, episodes, episode_steps))
                elif variant == "kernel":
                    done, elapsed = _timed(lambda: _kernel(kernel, task, episodes))
                else:
                    done, elapsed = traced(episodes)
                rates[variant].append(done / elapsed)

    bare, plain, trace = (statistics.median(rates[v]) for v in VARIANTS)
    return {
        "bare_steps_per_s": bare,
        "kernel_steps_per_s": plain,
        "kernel_trace_steps_per_s": trace,
        "overhead_us_per_step": 1e6 / plain - 1e6 / bare,
        "trace_overhead_us_per_step": 1e6 / trace - 1e6 / plain,
        "repeats": repeats,
        "steps": episodes * episode_steps,
        "episode_steps": episode_steps,
        "trace_bytes_per_step": trace_bytes / (episodes * episode_steps),
        "samples_steps_per_s": {v: [round(r, 1) for r in rates[v]] for v in VARIANTS},
        "goals_us_per_step": {"overhead": GOAL_OVERHEAD_US, "trace_overhead": GOAL_TRACE_OVERHEAD_US},
        "python": sys.version.split()[0],
    }


def _spread(samples: list[float]) -> str:
    lo, hi = min(samples), max(samples)
    return f"±{50 * (hi - lo) / statistics.median(samples):.0f}%"


def table(result: dict[str, Any]) -> str:
    samples = result["samples_steps_per_s"]
    rows = [
        ("bare", result["bare_steps_per_s"], None, None),
        ("kernel", result["kernel_steps_per_s"], result["overhead_us_per_step"], GOAL_OVERHEAD_US),
        (
            "kernel + jsonl",
            result["kernel_trace_steps_per_s"],
            result["trace_overhead_us_per_step"],
            GOAL_TRACE_OVERHEAD_US,
        ),
    ]
    lines = [
        f"hylo kernel overhead: NullEnv, {result['steps']} steps per repeat "
        f"(episodes of {result['episode_steps']}), median of {result['repeats']} interleaved repeats",
        "",
        f"{'variant':<16}{'steps/s':>12}{'µs/step':>10}{'spread':>8}{'added µs/step':>15}  goal",
    ]
    for (name, rate, added, goal), key in zip(rows, VARIANTS, strict=True):
        added_s = "" if added is None else f"{added:.2f}"
        goal_s = "" if goal is None else f"≤ {goal:g} " + ("ok" if added is not None and added <= goal else "MISS")
        row = f"{name:<16}{rate:>12,.0f}{1e6 / rate:>10.2f}{_spread(samples[key]):>8}{added_s:>15}  {goal_s}"
        lines.append(row.rstrip())
    lines += [
        "",
        "added µs/step: kernel vs bare; kernel + jsonl vs kernel "
        f"(trace: {result['trace_bytes_per_step']:.0f} bytes per step)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repeats per variant (default 7, min 5)")
    parser.add_argument(
        "--steps", type=int, default=10_000, help="steps per repeat, rounded up to whole episodes (default 10000)"
    )
    parser.add_argument("--episode-steps", type=int, default=1000, help="steps per episode (default 1000)")
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error("--repeats must be >= 5 (each figure is a median)")
    if args.steps < 1 or args.episode_steps < 1:
        parser.error("--steps and --episode-steps must be >= 1")
    result = measure(args.repeats, args.steps, args.episode_steps)
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
