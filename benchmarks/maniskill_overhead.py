"""What `hylo eval maniskill` costs against the bare ManiSkill3 loop, state-only, and how fast the motion-planning
expert runs with one and two workers.

Two loops run the same episodes of PickCube (the same seeds, the same fixed sequence of random joint deltas,
replayed), CPU-simulated (`physx_cpu`), state observations:

- `bare`: what a user's script does with the package — `gym.make("PickCube-v1", obs_mode="state",
  sim_backend="physx_cpu")`, `reset(seed=)`, then `step` for each action, the observation turned into numpy;
- `hylo`: `hylo.eval.Evaluation` on a fresh run with an agent that replays the actions — the panel's placement,
  the Kernel with the default shield, the full trace, every episode committed to the EvalLog.

`ratio` (hylo / bare) compares the control loops: the steps per second from the first observation to the end of the
last step (hylo's read from its trace), the median over interleaved repeats; the first episode of each loop, which
builds the scene, is not counted. Goal >= 0.95.

`expert` runs the motion-planning expert (`pd_joint_pos`, its planner in a process of its own) on PickCube with one
worker and with two, fresh runs of the same episodes: episodes per second of each (from the first episode's start to
the last one's end: the workers' start-up is left out), and their ratio.

    python benchmarks/maniskill_overhead.py            # a short table
    python benchmarks/maniskill_overhead.py --json     # {"ratio": ..., "bare_steps_per_s": ..., "expert": {...}}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation
from hylo.envs.maniskill import SIM_BACKEND, ManiSkillBenchmark, _mani_skill
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.evallog.store import EvalLog

GOAL_RATIO = 0.95
TASK = "PickCube-v1"
SPLIT = "tabletop"
ACTION_SEED = 7


def actions(n: int) -> np.ndarray[Any, Any]:
    """The replayed actions: random joint deltas and gripper targets in [-1, 1]."""
    return np.random.default_rng(ACTION_SEED).uniform(-1.0, 1.0, size=(n, 8)).astype(np.float32)


class ReplayAgent(AgentBase):
    """Replays `actions(steps)` from the start of every episode."""

    name = "replay"
    requirements = AgentRequirements(needs_images=False)

    def __init__(self, steps: int = 1000) -> None:
        self.actions = actions(steps)
        self.t = 0

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.t = 0

    def act(self, obs: Observation) -> ActionChunk:
        action = self.actions[self.t % len(self.actions)]
        self.t += 1
        return ActionChunk.single(action)


def bare_loop(episodes: int, steps: int) -> tuple[int, float]:
    """(steps, seconds of the control loops) of the bare loop, each timed from its first observation to its last
    step; the first episode warms up and is not counted."""
    registered = _mani_skill()
    env = registered[TASK].make(obs_mode="state", sim_backend=SIM_BACKEND, render_backend="cpu", num_envs=1)
    bench = ManiSkillBenchmark()
    plan = actions(steps)
    loop = 0.0
    for index in range(episodes + 1):
        obs, _ = env.reset(seed=bench.task_instance(SPLIT, TASK, index).seed)
        start = time.perf_counter()
        for action in plan:
            obs, _, _, _, _ = env.step(action[None])
            _ = obs.numpy()[0]
        if index:
            loop += time.perf_counter() - start
    env.close()
    return episodes * steps, loop


def hylo_loop(episodes: int, steps: int) -> tuple[int, float]:
    """(steps, seconds of the control loops) of `hylo eval`: each trace from the first observation to the last step."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = EvalSpec(benchmark="maniskill", split=SPLIT, tasks=[TASK], agent="maniskill_overhead:ReplayAgent",
                        agent_args={"steps": steps}, episodes=episodes + 1, max_steps=steps, log_dir=tmp)  # fmt: skip
        result = Evaluation(spec).run()
        counted = [row for row in result.episodes if row.index > 0]
        with EvalLog.open(result.log_dir) as log:
            loop = sum(_control_loop_s(log.trace(row.episode_id)) for row in counted)
        return sum(row.steps for row in counted), loop


def _control_loop_s(trace: list[dict[str, Any]]) -> float:
    first = next(e["wall_time"] for e in trace if e["event"] == "observation")
    last = [e["wall_time"] for e in trace if e["event"] == "step.result"][-1]
    return float(last - first)


def compare(episodes: int, steps: int, repeats: int) -> dict[str, float]:
    rates: dict[str, list[float]] = {"bare": [], "hylo": []}
    for _ in range(repeats):
        for name, run in (("bare", bare_loop), ("hylo", hylo_loop)):
            n, seconds = run(episodes, steps)
            rates[name].append(n / seconds)
    bare, hylo = statistics.median(rates["bare"]), statistics.median(rates["hylo"])
    return {"bare_steps_per_s": bare, "hylo_steps_per_s": hylo, "ratio": hylo / bare, "steps": episodes * steps}


def expert_rate(episodes: int, workers: int) -> dict[str, float]:
    """Episodes per second of the expert on PickCube with `workers` workers: a fresh run's episodes over the span
    from the first one's start to the last one's end (the workers' start-up, importing torch and ManiSkill and
    building the scene, is left out; `seconds` is the whole run's)."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = EvalSpec(benchmark="maniskill", split=SPLIT, tasks=[TASK], agent="expert", episodes=episodes,
                        max_steps=150, env_args={"control_mode": "pd_joint_pos"}, workers=workers,
                        log_dir=tmp)  # fmt: skip
        start = time.perf_counter()
        result = Evaluation(spec).run()
        seconds = time.perf_counter() - start
    rows = result.episodes
    span = max(row.ended_at for row in rows) - min(row.started_at for row in rows)
    return {"episodes_per_s": len(rows) / span, "success_rate": result.summary.success_rate, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats per loop (default 3)")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode (default 50, PickCube's budget)")
    parser.add_argument("--episodes", type=int, default=4, help="counted episodes per loop (default 4)")
    parser.add_argument("--expert-episodes", type=int, default=8, help="expert episodes per run (default 8)")
    parser.add_argument("--workers", type=int, default=2, help="the expert's second run's workers (default 2)")
    args = parser.parse_args(argv)
    available, why = ManiSkillBenchmark().available()
    if not available:
        parser.error(f"ManiSkill3 is not installed here: {why}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `maniskill_overhead:ReplayAgent` for hylo
    logging.disable(logging.WARNING)
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        results: dict[str, Any] = compare(args.episodes, args.steps, args.repeats)
        one = expert_rate(args.expert_episodes, 1)
        many = expert_rate(args.expert_episodes, args.workers)
    results["expert"] = {"workers_1": one, f"workers_{args.workers}": many,
                         "speedup": many["episodes_per_s"] / one["episodes_per_s"]}  # fmt: skip
    if args.json:
        sys.stdout.write(json.dumps(results) + "\n")
        return 0
    bare, hylo = results["bare_steps_per_s"], results["hylo_steps_per_s"]
    print(f"state-only control loop: bare {bare:.1f} steps/s, hylo {hylo:.1f} steps/s, "
          f"ratio {results['ratio']:.3f} (goal >= {GOAL_RATIO})")  # fmt: skip
    print(f"expert on {TASK}: {one['episodes_per_s']:.2f} episodes/s with 1 worker, {many['episodes_per_s']:.2f} "
          f"with {args.workers} ({results['expert']['speedup']:.2f}x); success {one['success_rate']:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
