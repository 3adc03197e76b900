"""What `hylo eval libero` costs against the bare LIBERO loop, with and without cameras, and how long an episode of
each standard suite takes.

Two loops run the same episodes of `libero_object`'s first task (same init states, same seeds, the same fixed
sequence of small random actions, replayed), each episode from its reset to its last step (building the simulator,
several seconds, is left out of both: the first episode of each loop, in which hylo's worker builds it, is not
counted):

- `bare`: what a user's script does with the package — libero's `ControlEnv` (`OffScreenRenderEnv` with cameras:
  agentview and wrist at 256², rendered by robosuite at every step, turned upright), `seed`, `reset`,
  `set_init_state`, 10 settle steps, then `step` for each action;
- `hylo`: `hylo.eval.Evaluation` on a fresh run with an agent that replays the actions — the panel's placement,
  the Kernel with the default shield, the full trace, every episode committed to the EvalLog; its time is the sum of
  the episodes' `wall_s`.

Two figures per loop, each the median over interleaved repeats of steps / seconds:

- `ratio` (hylo / bare), the control loop: from the first observation after the settle steps to the end of the last
  step, every step rendered when cameras are on. hylo's part is read from its trace (the `wall_time` of the first
  `observation` and of the last `step.result`), the bare loop's from the clock around its steps. Goal ≥ 0.95 with and
  without cameras.
- `episode_ratio`, whole episodes, reset included. With cameras it favours hylo by work the bare loop wastes:
  `OffScreenRenderEnv` renders both cameras at each of the 10 settle steps, hylo only for the observation after them.

`episode_wall_s` is the wall time of one state-only episode of each standard suite (its first task, the whole step
budget of the replayed actions), build included.

    python benchmarks/libero_overhead.py            # a short table
    python benchmarks/libero_overhead.py --json     # {"no_cameras": {...}, "cameras": {...}, "episode_wall_s": {...}}
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

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np

from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation
from hylo.envs.libero import SETTLE_ACTION, SETTLE_STEPS, LiberoBenchmark, checked_suite, load_init_states
from hylo.envs.quiet import stdout_to_stderr
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.evallog.store import EvalLog

GOAL_RATIO = 0.95
SPLIT = "libero_object"
STANDARD_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
ACTION_SEED = 7
ACTION_SCALE = 0.3


def actions(n: int) -> np.ndarray[Any, Any]:
    """The replayed actions: small random end-effector deltas, the gripper open."""
    rng = np.random.default_rng(ACTION_SEED)
    moves = rng.uniform(-ACTION_SCALE, ACTION_SCALE, size=(n, 7)).astype(np.float32)
    moves[:, 6] = -1.0
    return moves


class ReplayAgent(AgentBase):
    """Replays `actions(steps)` from the start of every episode (needs images when `images`)."""

    name = "replay"

    def __init__(self, steps: int = 1000, images: bool = False) -> None:
        self.actions = actions(steps)
        self.requirements = AgentRequirements(needs_images=images)
        self.t = 0

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.t = 0

    def act(self, obs: Observation) -> ActionChunk:
        action = self.actions[self.t % len(self.actions)]
        self.t += 1
        return ActionChunk.single(action)


def bare_loop(episodes: int, steps: int, cameras: bool) -> tuple[int, float, float]:
    """(steps, seconds of the whole episodes, seconds of their control loops) of the bare loop: each episode timed
    from its reset to its last step, and from the end of its settle steps to its last step."""
    from libero.libero.envs.env_wrapper import ControlEnv, OffScreenRenderEnv

    bench = LiberoBenchmark()
    task = bench.tasks(SPLIT)[0]
    _, entry = checked_suite(SPLIT).task(task)
    states = load_init_states(entry)
    with stdout_to_stderr():
        if cameras:
            env = OffScreenRenderEnv(bddl_file_name=str(entry.bddl), camera_heights=256, camera_widths=256)
        else:
            env = ControlEnv(bddl_file_name=str(entry.bddl), use_camera_obs=False, has_offscreen_renderer=False)
    plan = actions(steps)
    total = loop = 0.0
    for index in range(episodes + 1):
        seed = bench.task_instance(SPLIT, task, index).seed
        start = time.perf_counter()
        env.seed(seed)
        with stdout_to_stderr():
            env.reset()
        obs = env.set_init_state(states[index % len(states)])
        for _ in range(SETTLE_STEPS):
            obs, _, _, _ = env.step(np.asarray(SETTLE_ACTION))
        settled = time.perf_counter()
        for action in plan:
            obs, _, _, _ = env.step(action)
            if cameras:  # what a user's script does with the frames: turn them upright
                _ = (obs["agentview_image"][::-1, ::-1], obs["robot0_eye_in_hand_image"][::-1, ::-1])
        if index:  # the first episode warms up, as hylo's does
            end = time.perf_counter()
            total, loop = total + end - start, loop + end - settled
    env.close()
    return episodes * steps, total, loop


def hylo_loop(episodes: int, steps: int, cameras: bool) -> tuple[int, float, float]:
    """(steps, seconds of the whole episodes, seconds of their control loops) of `hylo eval`: the episodes' own wall
    times as the EvalLog records them, and the span of each trace from the first observation to the last step."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = EvalSpec(
            benchmark="libero",
            split=SPLIT,
            tasks=[LiberoBenchmark().tasks(SPLIT)[0]],
            agent="libero_overhead:ReplayAgent",
            agent_args={"steps": steps, "images": cameras},
            episodes=episodes + 1,
            max_steps=steps,
            log_dir=tmp,
        )
        result = Evaluation(spec).run()
        counted = [row for row in result.episodes if row.index > 0]  # the first one builds the env
        with EvalLog.open(result.log_dir) as log:
            loop = sum(_control_loop_s(log.trace(row.episode_id)) for row in counted)
        return sum(row.steps for row in counted), sum(row.metrics["wall_s"] for row in counted), loop


def _control_loop_s(trace: list[dict[str, Any]]) -> float:
    """From the first observation (the reset's, after the settle steps) to the end of the last step."""
    first = next(e["wall_time"] for e in trace if e["event"] == "observation")
    last = [e["wall_time"] for e in trace if e["event"] == "step.result"][-1]
    return float(last - first)


def compare(episodes: int, steps: int, cameras: bool, repeats: int) -> dict[str, float]:
    episode: dict[str, list[float]] = {"bare": [], "hylo": []}
    control: dict[str, list[float]] = {"bare": [], "hylo": []}
    for _ in range(repeats):
        for name, run in (("bare", bare_loop), ("hylo", hylo_loop)):
            n, whole, loop = run(episodes, steps, cameras)
            episode[name].append(n / whole)
            control[name].append(n / loop)
    bare, hylo = statistics.median(control["bare"]), statistics.median(control["hylo"])
    bare_episode, hylo_episode = statistics.median(episode["bare"]), statistics.median(episode["hylo"])
    return {
        "bare_steps_per_s": bare,
        "hylo_steps_per_s": hylo,
        "ratio": hylo / bare,
        "bare_episode_steps_per_s": bare_episode,
        "hylo_episode_steps_per_s": hylo_episode,
        "episode_ratio": hylo_episode / bare_episode,
        "steps": episodes * steps,
    }


def episode_wall(suite: str) -> float:
    """The wall time of `hylo eval` of one state-only episode of the suite's first task, its whole step budget."""
    bench = LiberoBenchmark()
    budget = bench.default_step_budget(bench.tasks(suite)[0])
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        spec = EvalSpec(benchmark="libero", split=suite, tasks=[bench.tasks(suite)[0]],
                        agent="libero_overhead:ReplayAgent", agent_args={"steps": budget}, episodes=1,
                        log_dir=tmp)  # fmt: skip
        Evaluation(spec).run()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats per loop (default 3)")
    parser.add_argument("--steps", type=int, default=120, help="steps per state-only episode (default 120)")
    parser.add_argument("--camera-steps", type=int, default=20, help="steps per episode with cameras (default 20)")
    parser.add_argument("--episodes", type=int, default=2, help="counted episodes per loop (default 2)")
    parser.add_argument("--suites", default=",".join(STANDARD_SUITES), help="suites timed for episode_wall_s")
    args = parser.parse_args(argv)
    available, why = LiberoBenchmark().available()
    if not available:
        parser.error(f"LIBERO is not installed here: {why}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `libero_overhead:ReplayAgent` for hylo
    logging.disable(logging.WARNING)
    results: dict[str, Any] = {}
    with stdout_to_stderr(), contextlib.redirect_stderr(open(os.devnull, "w")):
        results["no_cameras"] = compare(args.episodes, args.steps, False, args.repeats)
        results["cameras"] = compare(args.episodes, args.camera_steps, True, args.repeats)
        results["episode_wall_s"] = {suite: episode_wall(suite) for suite in args.suites.split(",") if suite}
    if args.json:
        sys.stdout.write(json.dumps(results) + "\n")
        return 0
    print(f"{'loop':<11} {'bare steps/s':>13} {'hylo steps/s':>13} {'ratio':>7}  (goal >= {GOAL_RATIO})"
          f"  {'episode ratio':>13} (reset included)")  # fmt: skip
    for name in ("no_cameras", "cameras"):
        r = results[name]
        print(f"{name:<11} {r['bare_steps_per_s']:>13.1f} {r['hylo_steps_per_s']:>13.1f} {r['ratio']:>7.3f}"
              f"  {r['episode_ratio']:>13.3f}")  # fmt: skip
    for suite, seconds in results["episode_wall_s"].items():
        print(f"one {suite} episode: {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
