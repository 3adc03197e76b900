"""Success rate and steps of `LiberoExpert` on raw LIBERO envs (state only, no cameras).

Each episode mimics hylo's LIBERO environment: seed, reset, `set_init_state`, 10 settle steps (arm still, gripper
open), then the expert's actions until success or the suite's step budget. Prints one row per task.

    python benchmarks/libero_expert_eval.py --suite libero_object [--tasks 0,3,7] [--init-states 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.context import EpisodeContext
from hylo.core.types import EnvSpec, TaskInstance
from hylo.envs.libero_expert import LiberoExpert

BUDGETS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
SETTLE_STEPS = 10


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """LIBERO prints `[info]` lines to stdout while it builds a suite or an env: send them to stderr."""
    saved = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = saved


def make_env(suite: Any, index: int) -> Any:
    """A state-only LIBERO env for task `index` of `suite`."""
    from libero.libero import get_libero_path
    from libero.libero.envs import OffScreenRenderEnv

    task = suite.get_task(index)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    with _quiet():
        return OffScreenRenderEnv(
            bddl_file_name=bddl,
            has_renderer=False,
            has_offscreen_renderer=False,
            use_camera_obs=False,
            camera_heights=64,
            camera_widths=64,
        )


def run_episode(
    env: Any, suite_name: str, task: Any, init_state: Any, seed: int, budget: int, expert: LiberoExpert
) -> tuple[bool, int]:
    """One episode: (success, the expert's steps)."""
    env.seed(seed)
    env.reset()
    env.set_init_state(init_state)
    for _ in range(SETTLE_STEPS):
        env.step([0.0] * 6 + [-1.0])
    spec = EnvSpec(
        observation_space=spaces.Dict({}),
        action_space=spaces.Box(-1.0, 1.0, (7,), dtype=np.float32),
        control_rate_hz=20.0,
        max_episode_steps=budget,
        name="libero",
    )
    instance = TaskInstance(benchmark="libero", task=task.name, split=suite_name, seed=seed, instruction=task.language)
    expert.reset(EpisodeContext(seed=seed, env_spec=spec, task=instance, read_privileged=lambda name: env))
    obs: dict[str, Any] = {}
    for step in range(1, budget + 1):
        action = expert.act(obs).actions[0]
        obs, _, done, _ = env.step(np.asarray(action, dtype=np.float64).tolist())
        if done or env.check_success():
            return True, step
    return False, budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="libero_object", choices=sorted(BUDGETS))
    parser.add_argument("--tasks", default="", help="comma-separated task indices (default: all)")
    parser.add_argument("--init-states", type=int, default=5, help="init states per task, from the first")
    parser.add_argument("--first-init-state", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print every episode")
    args = parser.parse_args()

    with _quiet():
        from libero.libero import benchmark

        suite = benchmark.get_benchmark_dict()[args.suite]()
    tasks = [int(t) for t in args.tasks.split(",") if t] or list(range(suite.n_tasks))
    budget = BUDGETS[args.suite]
    expert = LiberoExpert()
    rows: list[tuple[int, str, int, int, float, int, list[int]]] = []
    for index in tasks:
        task = suite.get_task(index)
        init_states = suite.get_task_init_states(index)
        env = make_env(suite, index)
        wins: list[int] = []
        failed: list[int] = []
        started = time.perf_counter()
        states = range(args.first_init_state, min(args.first_init_state + args.init_states, len(init_states)))
        for k in states:
            with _quiet():
                success, steps = run_episode(env, args.suite, task, init_states[k], args.seed, budget, expert)
            (wins if success else failed).append(steps if success else k)
            if args.verbose:
                print(f"  task {index} init {k}: {'ok' if success else 'FAIL'} {steps} steps {expert.phase_starts}")
        env.close()
        mean = float(np.mean(wins)) if wins else float("nan")
        rows.append((index, task.name, len(wins), len(states), mean, max(wins, default=0), failed))
        seconds = time.perf_counter() - started
        print(
            f"task {index}: {len(wins)}/{len(states)}, mean steps {mean:.1f}, failed {failed} ({seconds:.0f} s)",
            flush=True,
        )

    print(f"\n{args.suite} (budget {budget} steps, seed {args.seed})\n")
    print("| task | name | success | mean steps (successes) | max steps | failed init states |")
    print("|---:|---|---:|---:|---:|---|")
    for index, name, won, total, mean, longest, failed in rows:
        print(f"| {index} | {name} | {won}/{total} | {mean:.1f} | {longest} | {failed or ''} |")
    won = sum(r[2] for r in rows)
    total = sum(r[3] for r in rows)
    print(f"| all | | {won}/{total} ({100.0 * won / max(total, 1):.0f}%) | | | |")


if __name__ == "__main__":
    main()
