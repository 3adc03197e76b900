"""What the full trace costs per step of `hylo eval`, counted in CPU time rather than wall time.

One worker's env, expert and Kernel (as `hylo eval` builds them, inline) run the same few episodes again and again,
alternately without a trace subscriber (`bare`) and with the EvalLog's trace buffer (`trace`), whose events are then
encoded and compressed as the EvalLog writer does (`serialize`, zlib) inside the timed region: that is all the work
the trace adds, counted as if none of it overlapped with the loop. Each figure is the least, over many short repeats,
of the process's CPU time per step (wall time also counts the moments other processes held the CPU). It still moves
with the machine's load (shared cores, frequency): compare figures taken together, several times.

    python benchmarks/trace_cost.py [--json] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import zlib
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

from hylo.envs.quiet import stdout_to_stderr
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.eval.worker import EpisodeJob, EpisodeWorker, WorkerConfig
from hylo.evallog.recording import serialize

CASES = {"babyai": (["GoToLocal"], 5), "metaworld": (["reach-v3"], 1)}
"""benchmark -> (tasks, episodes per repeat)."""


def measure(benchmark: str, repeats: int) -> dict[str, float]:
    tasks, episodes = CASES[benchmark]
    with tempfile.TemporaryDirectory() as tmp:
        spec = EvalSpec(benchmark=benchmark, tasks=tasks, agent="expert", episodes=episodes, log_dir=tmp)
        evaluation = Evaluation(spec)
        plan = [
            evaluation.resolved.benchmark.task_instance(evaluation.resolved.split, task, i)
            for task in tasks
            for i in range(episodes)
        ]
        config = WorkerConfig(evaluation.spec, evaluation.run_id, evaluation.run_dir, evaluation.resolved.budgets)
        worker = EpisodeWorker(config, agent=evaluation.agent)
        worker.initialize()
        kernel = worker._kernel
        assert kernel is not None
        buffer = worker._trace

        def run(traced: bool) -> int:
            steps = 0
            for task in plan:
                result = worker.run(EpisodeJob(task))
                steps += result.row.steps
                if traced:
                    zlib.compress(b"\n".join(serialize(result.trace)), 1)  # type: ignore[arg-type]
            return steps

        best = {"bare": float("inf"), "trace": float("inf")}
        try:
            for _ in range(repeats):
                for name in best:
                    if name == "bare":
                        kernel.bus.unsubscribe(buffer)
                    else:
                        kernel.bus.subscribe(buffer, critical=True)
                    start = time.process_time()
                    steps = run(name == "trace")
                    best[name] = min(best[name], (time.process_time() - start) / steps)
        finally:
            worker.shutdown()
    bare_us, trace_us = best["bare"] * 1e6, best["trace"] * 1e6
    return {"bare_us_per_step": bare_us, "trace_us_per_step": trace_us, "trace_cost_us": trace_us - bare_us,
            "trace_cost_pct": 100 * (trace_us / bare_us - 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    results: dict[str, Any] = {}
    with stdout_to_stderr():
        for benchmark in CASES:
            results[benchmark] = measure(benchmark, args.repeats)
    if args.json:
        sys.stdout.write(json.dumps(results) + "\n")
        return 0
    for name, r in results.items():
        print(f"{name:<10} bare {r['bare_us_per_step']:8.1f} µs/step  traced {r['trace_us_per_step']:8.1f} µs/step  "
              f"trace {r['trace_cost_us']:6.1f} µs/step ({r['trace_cost_pct']:.1f}%)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
