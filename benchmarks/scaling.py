"""How `hylo eval` scales with workers: one worker (inline) against two worker processes and two Ray actors.

The same episodes (Meta-World MT10 tasks, the scripted expert, no rendering) run through the runner's dispatch loop
— a dynamic queue, every episode committed to an EvalLog with its trace — on three pools built once before timing:

- `workers_1`: `--workers 1` (the inline worker, in this process);
- `workers_2`: `--workers 2` (two isolated worker processes);
- `ray_2`: `--backend ray --workers 2` (two Ray actors on a local Ray).

Pool and Ray start-up are left out of the timed part. Repeats are interleaved (1, 2, ray, 1, 2, ray, ...); each
figure is the median over repeats of episodes / wall time. Goal on 2 cores: ratio ≥ 1.8, ray_ratio ≥ 1.6.

    python benchmarks/scaling.py          # a short table
    python benchmarks/scaling.py --json   # {"workers_1_eps_per_s", "workers_2_eps_per_s", "ratio", ...}
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
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from hylo.envs.quiet import stdout_to_stderr
from hylo.eval.pool import InlinePool, Pool, ProcessPool
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.eval.worker import EpisodeJob, EpisodeWorker, WorkerConfig
from hylo.evallog.store import EvalLog

GOAL_RATIO = 1.8
GOAL_RAY_RATIO = 1.6
TASKS = ["reach-v3", "push-v3", "pick-place-v3", "door-open-v3"]


def timed(evaluation: Evaluation, pool: Pool, jobs: list[EpisodeJob], root: Path, label: str) -> float:
    """Episodes per second for `jobs` on a started `pool`, through the runner's dispatch loop into a fresh EvalLog."""
    run_dir = root / f"{label}-{time.monotonic_ns()}"
    log = EvalLog.create(run_dir, run_id=run_dir.name, benchmark="metaworld", split="mt10", agent="expert",
                         digest="scaling", spec={}, n_planned=len(jobs), versions={}, git_commit=None)  # fmt: skip
    try:
        started = time.perf_counter()
        executed = evaluation.dispatch(log, pool, list(jobs), len(jobs))
        elapsed = time.perf_counter() - started
    finally:
        log.close()
    statuses = {row.status.value for row in EvalLog.open(run_dir).attempts()}
    if executed != len(jobs) or not statuses <= {"success", "failure"}:
        raise SystemExit(f"{label}: expected {len(jobs)} scored episodes, got {executed} with {statuses}")
    return len(jobs) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=30, help="episodes per task per repeat (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray pool")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    with tempfile.TemporaryDirectory() as tmp, stdout_to_stderr():
        root = Path(tmp)
        spec = EvalSpec(benchmark="metaworld", agent="expert", tasks=TASKS, episodes=args.episodes, log_dir=tmp)
        evaluation = Evaluation(spec)
        config = WorkerConfig(evaluation.spec, evaluation.run_id, root / "videos", evaluation.resolved.budgets)
        jobs = [EpisodeJob(task) for task in evaluation._plan()]
        limits = evaluation.episode_limits()
        pools: dict[str, Pool] = {
            "workers_1": InlinePool(EpisodeWorker(config, agent=evaluation.agent)),
            "workers_2": ProcessPool(config, 2, limits),
        }
        if not args.no_ray:
            from hylo.eval.raypool import RayPool

            pools["ray_2"] = RayPool(config, 2, limits)
        rates: dict[str, list[float]] = {label: [] for label in pools}
        try:
            for pool in pools.values():
                pool.start()
            for label, pool in pools.items():  # one warm-up pass each: first renders, caches, JIT of numpy paths
                timed(evaluation, pool, jobs[: 2 * len(TASKS)], root, f"warm-{label}")
            for _ in range(args.repeats):
                for label, pool in pools.items():
                    rates[label].append(timed(evaluation, pool, jobs, root, label))
        finally:
            for pool in reversed(pools.values()):
                with contextlib.suppress(Exception):
                    pool.close()

    median = {label: statistics.median(values) for label, values in rates.items()}
    figures: dict[str, float | None] = {
        "workers_1_eps_per_s": median["workers_1"],
        "workers_2_eps_per_s": median["workers_2"],
        "ratio": median["workers_2"] / median["workers_1"],
        "ray_2_eps_per_s": median.get("ray_2"),
        "ray_ratio": median["ray_2"] / median["workers_1"] if "ray_2" in median else None,
    }
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
        return
    print(f"Meta-World expert, {len(jobs)} episodes per repeat, {args.repeats} interleaved repeats (median)")
    for label in pools:
        print(f"  {label:<10} {median[label]:7.2f} episodes/s   {[round(v, 2) for v in rates[label]]}")
    print(f"  ratio      {figures['ratio']:.2f}  (goal ≥ {GOAL_RATIO})")
    if figures["ray_ratio"] is not None:
        print(f"  ray_ratio  {figures['ray_ratio']:.2f}  (goal ≥ {GOAL_RAY_RATIO})")


if __name__ == "__main__":
    main()
