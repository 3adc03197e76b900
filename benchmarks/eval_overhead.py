"""What `hylo eval` costs against the bare gymnasium loop, on real simulators with their real experts.

For each benchmark, two loops do the same work — the same episodes (same seeds), the same expert, the same
observations, no rendering (the experts need no images), the env built once:

- `bare`: the simulator's own gymnasium env, `reset(seed=...)`, then `action = expert(obs)`, `env.step(action)` until
  success or the step budget — what a user's hand-written eval script does, minus any bookkeeping;
- `hylo`: `hylo.eval.Evaluation` on a fresh run — episodes placed through the env panel, the Kernel with the default
  shield, the full trace recorded, every episode committed to the EvalLog (SQLite) with its trace.

BabyAI: the `GoToLocal` level with minigrid's `BabyAIBot`. Meta-World: `reach-v3` and `pick-place-v3` with the
scripted v3 policies. Repeats are interleaved (bare, hylo, bare, hylo, ...); each figure is the median over repeats
of total steps / wall time. Goals: ratio = hylo / bare ≥ 0.9 on BabyAI (5-step episodes: the per-episode costs show),
≥ 0.95 on Meta-World.

Where the time goes: for the hylo loop, the CPU time of the thread that runs the episodes (the inline pool runs them
on the calling thread) and of the whole process (the EvalLog's writer thread included), each per 1,000 steps, medians
over the repeats.

    python benchmarks/eval_overhead.py            # a short table
    python benchmarks/eval_overhead.py --json     # {"babyai": {"bare_steps_per_s", "hylo_steps_per_s", "ratio",
                                                  #   "bare_cpu_ms_per_1k", "loop_thread_cpu_ms_per_1k",
                                                  #   "process_cpu_ms_per_1k"}, ...}
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from hylo.envs.quiet import stdout_to_stderr
from hylo.envs.registry import get_benchmark
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec

GOALS = {"babyai": 0.9, "metaworld": 0.95}

Loop = Callable[[], int]
"""Runs the episodes and returns the number of env steps taken."""


def babyai_bare(task: str, episodes: int) -> Loop:
    import gymnasium as gym
    from minigrid.utils.baby_ai_bot import BabyAIBot

    bench = get_benchmark("babyai")
    budget = bench.default_step_budget(task)
    seeds = [bench.task_instance("default", task, i).seed for i in range(episodes)]

    def run() -> int:
        env = gym.make(f"BabyAI-{task}-v0")
        steps = 0
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            bot = BabyAIBot(env.unwrapped)
            action = None
            for _ in range(budget):
                action = bot.replan(action)
                obs, _reward, terminated, truncated, _ = env.step(action)
                _ = (obs["image"], obs["direction"], obs["mission"])
                steps += 1
                if terminated or truncated:
                    break
        env.close()
        return steps

    return run


def metaworld_bare(tasks: list[str], episodes: int) -> Loop:
    from metaworld import policies
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE as GOAL_OBSERVABLE

    bench = get_benchmark("metaworld")
    plan = [(task, bench.task_instance("mt10", task, i).seed) for task in tasks for i in range(episodes)]

    def policy_for(task: str) -> Any:
        name = "Sawyer" + "".join(part.capitalize() for part in task.removesuffix("-v3").split("-")) + "V3Policy"
        return getattr(policies, name)()

    def run() -> int:
        sims = {task: GOAL_OBSERVABLE[f"{task}-goal-observable"](seed=0) for task in tasks}
        for sim in sims.values():
            sim.max_path_length = 500
            sim._freeze_rand_vec = False
            sim.seeded_rand_vec = True
        steps = 0
        for task, seed in plan:
            sim, policy = sims[task], policy_for(task)
            sim.np_random = np.random.default_rng(seed)
            obs, _ = sim.reset()
            for _ in range(500):
                action = np.clip(policy.get_action(obs), -1, 1).astype(np.float32)
                obs, _reward, _, truncated, info = sim.step(action)
                steps += 1
                if info["success"] or truncated:
                    break
        for sim in sims.values():
            sim.close()
        return steps

    return run


def hylo_loop(benchmark: str, tasks: list[str], episodes: int) -> Loop:
    def run() -> int:
        with tempfile.TemporaryDirectory() as tmp:
            spec = EvalSpec(benchmark=benchmark, tasks=tasks, agent="expert", episodes=episodes, log_dir=tmp)
            result = Evaluation(spec).run()
            return sum(row.steps for row in result.episodes)

    return run


def measure(loop: Loop) -> tuple[float, float, float]:
    """Steps per second, and the calling thread's and the process's CPU milliseconds per 1,000 steps."""
    gc.collect()
    start, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    steps = loop()
    wall = time.perf_counter() - start
    per_1k = 1e6 / max(steps, 1)
    return steps / wall, (time.thread_time() - thread) * per_1k, (time.process_time() - process) * per_1k


def compare(bare: Loop, hylo: Loop, repeats: int) -> dict[str, float]:
    bare(), hylo()  # warm up: imports, caches, first renders of nothing
    bare_runs, hylo_runs = [], []
    for _ in range(repeats):
        bare_runs.append(measure(bare))
        hylo_runs.append(measure(hylo))
    bare_sps = statistics.median(run[0] for run in bare_runs)
    hylo_sps = statistics.median(run[0] for run in hylo_runs)
    return {
        "bare_steps_per_s": bare_sps,
        "hylo_steps_per_s": hylo_sps,
        "ratio": hylo_sps / bare_sps,
        "bare_cpu_ms_per_1k": statistics.median(run[1] for run in bare_runs),
        "loop_thread_cpu_ms_per_1k": statistics.median(run[1] for run in hylo_runs),
        "process_cpu_ms_per_1k": statistics.median(run[2] for run in hylo_runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats per loop (default 5, at least 5)")
    parser.add_argument("--babyai-episodes", type=int, default=200)
    parser.add_argument("--metaworld-episodes", type=int, default=10, help="per task")
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error(f"--repeats must be at least 5, got {args.repeats}")
    logging.disable(logging.WARNING)
    results: dict[str, Any] = {}
    with stdout_to_stderr(), contextlib.redirect_stderr(open(os.devnull, "w")):
        results["babyai"] = compare(
            babyai_bare("GoToLocal", args.babyai_episodes),
            hylo_loop("babyai", ["GoToLocal"], args.babyai_episodes),
            args.repeats,
        )
        mw_tasks = ["reach-v3", "pick-place-v3"]
        results["metaworld"] = compare(
            metaworld_bare(mw_tasks, args.metaworld_episodes),
            hylo_loop("metaworld", mw_tasks, args.metaworld_episodes),
            args.repeats,
        )
    if args.json:
        sys.stdout.write(json.dumps(results) + "\n")
        return 0
    print(
        f"{'benchmark':<10} {'bare steps/s':>13} {'hylo steps/s':>13} {'ratio':>6} {'goal':>5}"
        f" {'bare cpu ms/1k':>15} {'loop thread ms/1k':>18} {'process ms/1k':>14}"
    )
    for name, r in results.items():
        print(
            f"{name:<10} {r['bare_steps_per_s']:>13.0f} {r['hylo_steps_per_s']:>13.0f} {r['ratio']:>6.3f}"
            f" {GOALS[name]:>5} {r['bare_cpu_ms_per_1k']:>15.0f} {r['loop_thread_cpu_ms_per_1k']:>18.0f}"
            f" {r['process_cpu_ms_per_1k']:>14.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
