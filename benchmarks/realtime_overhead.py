"""What realtime timing costs against sync, on the same episodes: the chunked-execution protocol on the virtual clock
with no latency executes exactly the actions sync timing does, so any difference in speed is the realtime loop's.

Both loops are `hylo eval` runs (`hylo.eval.Evaluation` on a fresh log dir: env panel, Kernel, shield, full trace,
EvalLog) of the chunked Meta-World expert (`chunk_size=8`, each chunk run whole) on `reach-v3` and `pick-place-v3`:

- `sync`: `--timing sync`;
- `realtime`: `--latency-steps 0` (realtime timing, chunked schedule, virtual clock, s = the chunk's 8 steps).

The benchmark checks that both runs give the same statuses and steps, episode by episode, before it reports a
figure. Repeats are interleaved (sync, realtime, sync, ...); each figure is the median over repeats of total steps /
wall time. Goal: ratio = realtime / sync ≥ 0.95.

    python benchmarks/realtime_overhead.py            # a short table
    python benchmarks/realtime_overhead.py --json     # {"ratio", "sync_steps_per_s", "realtime_steps_per_s", ...}
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
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

from hylo.envs.quiet import stdout_to_stderr
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec

GOAL_RATIO = 0.95
TASKS = ["reach-v3", "pick-place-v3"]
REALTIME: dict[str, Any] = {
    "timing": "realtime",
    "timing_options": {"schedule": "chunked", "clock": "virtual", "adaptive_refill": False, "latency_steps": 0},
}


def run(timing: dict[str, Any], episodes: int) -> tuple[float, list[tuple[str, str, int]]]:
    """One fresh run: (steps per second, [(episode id, status, steps), ...])."""
    with tempfile.TemporaryDirectory(prefix="hylo-bench-") as tmp:
        spec = EvalSpec(
            benchmark="metaworld",
            tasks=TASKS,
            agent="expert",
            agent_args={"chunk_size": 8},
            episodes=episodes,
            log_dir=tmp,
            **timing,
        )
        gc.collect()
        start = time.perf_counter()
        result = Evaluation(spec).run()
        elapsed = time.perf_counter() - start
    rows = [(row.episode_id, row.status.value, row.steps) for row in result.episodes]
    return sum(steps for _, _, steps in rows) / elapsed, rows


def measure(episodes: int, repeats: int) -> dict[str, Any]:
    run({}, 1), run(REALTIME, 1)  # warm up: imports, the simulator's first build
    rates: dict[str, list[float]] = {"sync": [], "realtime": []}
    for _ in range(repeats):
        sync_rate, sync_rows = run({}, episodes)
        realtime_rate, realtime_rows = run(REALTIME, episodes)
        if sync_rows != realtime_rows:
            raise RuntimeError("realtime timing with no latency ran other episodes than sync timing")
        rates["sync"].append(sync_rate)
        rates["realtime"].append(realtime_rate)
    sync_sps = statistics.median(rates["sync"])
    realtime_sps = statistics.median(rates["realtime"])
    return {
        "ratio": realtime_sps / sync_sps,
        "sync_steps_per_s": sync_sps,
        "realtime_steps_per_s": realtime_sps,
        "episodes": episodes * len(TASKS),
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task (default 10)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.episodes < 1:
        parser.error(f"--repeats and --episodes must be >= 1, got {args.repeats} and {args.episodes}")
    logging.disable(logging.WARNING)
    with stdout_to_stderr(), contextlib.redirect_stderr(open(os.devnull, "w")):
        result = measure(args.episodes, args.repeats)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    print(f"{'sync steps/s':>14} {'realtime steps/s':>17} {'ratio':>7}  (goal >= {GOAL_RATIO})")
    print(f"{result['sync_steps_per_s']:>14.0f} {result['realtime_steps_per_s']:>17.0f} {result['ratio']:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
