"""Batched policy inference: `--workers 4` with one agent per worker against `--workers 4 --batch 4` (one agent, in a
policy host, answering the four workers' requests in `act_batch` calls).

The same episodes (Meta-World MT10 tasks, cameras off, hylo's `mlp` policy: a seeded numpy MLP over the 39-d state,
48 MB of weights, 2–3 ms per call on one thread, for one state as for four) run through the runner's dispatch loop
into an EvalLog, on pools built and warmed before timing (every worker has run an episode of every task: start-up and
simulator builds are left out). Each runs as `hylo eval` runs it: an unbatched worker's policy on the one BLAS thread
a worker gets, the host's on every CPU (its calls run while the workers in its batch wait). Repeats alternate the two;
each figure is the median over repeats. `rss_mb` is the summed resident memory of every process of the run, read at
the end of a timed pass, and `rss_by_role_mb` the same by role (this process, the workers and, batched, the host):
the workers' memory drops by a copy of the weights each, and the host holds one.

`--call-sleep-ms 20` makes every call of the policy a 20 ms wait on one shared device (a file lock that every copy
of the policy on this machine takes; the MLP shrinks to 64 units so that the CPU's part of a call is negligible), as
a GPU call is to the CPU: four unbatched workers then queue for the device one call at a time, while the host answers
four requests per call; the ratio approaches the batch size.

`--wire` measures instead what an observation costs on its way to the host and back: the median round trip of one
act through a worker's `HostedAgent` to a host with a trivial policy, for Meta-World's state observation alone and
with camera frames (Meta-World's 128×128, one 256×256, four 480×640 as gym-aloha renders), each sent as hylo sends it
(large arrays out of band, `hylo.eval.batching.wire`) and pickled whole in the stream, alternating.

Goal on 2 cores: throughput_ratio ≥ 1.3 with the CPU-bound policy.

    python benchmarks/batched_policy.py --json
    python benchmarks/batched_policy.py --json --call-sleep-ms 20
    python benchmarks/batched_policy.py --json --wire
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import psutil

from hylo.agents.mlp import MlpPolicy
from hylo.core.context import EpisodeContext
from hylo.envs.quiet import stdout_to_stderr
from hylo.eval.batched import BatchedPool, policy_host
from hylo.eval.batching import HostedAgent, wire
from hylo.eval.pool import Pool, ProcessPool
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.eval.worker import EpisodeJob, WorkerConfig
from hylo.evallog.store import EvalLog

GOAL_RATIO = 1.3
TASKS = ["reach-v3", "push-v3", "pick-place-v3", "door-open-v3"]
WORKERS = 4
BATCH = 4
DEVICE_ENV = "HYLO_BENCH_DEVICE_LOCK"


class OneDeviceMlp(MlpPolicy):
    """`mlp` whose calls take turns on one device (the file named by `HYLO_BENCH_DEVICE_LOCK`), as processes that
    share a GPU do; its `call_sleep_ms` is then the device's time per call."""

    def act_batch(self, observations: Sequence[Any], contexts: Sequence[Any]) -> list[Any]:
        with open(os.environ[DEVICE_ENV], "a") as device:
            fcntl.flock(device, fcntl.LOCK_EX)
            try:
                return super().act_batch(observations, contexts)
            finally:
                fcntl.flock(device, fcntl.LOCK_UN)


def rss_by_role(pool: Pool) -> dict[str, float]:
    """The resident memory (MB) of this process and all its descendants, summed by role: `runner` (this process and
    multiprocessing's resource tracker), `workers`, and, batched, `host`."""
    host = pool.host.pid if isinstance(pool, BatchedPool) else None
    me = psutil.Process()
    roles: dict[str, float] = {"runner": 0.0, "workers": 0.0}
    for process in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            if process.pid == host:
                role = "host"
            elif process.pid == me.pid or "resource_tracker" in " ".join(process.cmdline()):
                role = "runner"
            else:
                role = "workers"
            roles[role] = roles.get(role, 0.0) + process.memory_info().rss / 2**20
    return roles


def timed(
    evaluation: Evaluation, pool: Pool, jobs: list[EpisodeJob], root: Path, label: str
) -> tuple[float, dict[str, float]]:
    """(episodes per second, resident memory by role at the end) for `jobs` on a started `pool`, into a fresh
    EvalLog."""
    run_dir = root / f"{label}-{time.monotonic_ns()}"
    log = EvalLog.create(run_dir, run_id=run_dir.name, benchmark="metaworld", split="mt10", agent="mlp",
                         digest="batched", spec={}, n_planned=len(jobs), versions={}, git_commit=None)  # fmt: skip
    try:
        started = time.perf_counter()
        executed = evaluation.dispatch(log, pool, list(jobs), len(jobs))
        elapsed = time.perf_counter() - started
        memory = rss_by_role(pool)
    finally:
        log.close()
    with EvalLog.open(run_dir) as written:
        statuses = {row.status.value for row in written.attempts()}
    if executed != len(jobs) or not statuses <= {"success", "failure"}:
        raise SystemExit(f"{label}: expected {len(jobs)} scored episodes, got {executed} with {statuses}")
    return len(jobs) / elapsed, memory


def warm(pool: Pool, jobs: list[EpisodeJob]) -> None:
    """Every worker of an idle `pool` runs one episode of each task (its simulator built, its caches and the policy's
    first calls behind it): a worker builds a task's simulator at its first episode of the task, which a timed pass
    would otherwise count."""
    for task in dict.fromkeys(job.task.task for job in jobs):
        first = next(job for job in jobs if job.task.task == task)
        for _ in range(pool.size):  # an idle pool hands each job to another idle worker
            if not pool.submit(first):
                raise SystemExit(f"a worker died while warming up on {task}")
        while pool.busy():
            pool.poll(1.0)


WIRE_OBSERVATIONS = {  # name: the camera frames added to Meta-World's state observation
    "state": [],
    "metaworld_camera": [(128, 128)],
    "frame_256": [(256, 256)],
    "aloha_4_cameras": [(480, 640)] * 4,
}


def wire_costs(calls: int = 300) -> dict[str, Any]:
    """Median round trips (ms) of one act through the wire to a host with a trivial policy, for each observation of
    `WIRE_OBSERVATIONS`: with large arrays out of band (as hylo sends them) and with everything pickled in the stream
    (as `Connection.send` would), alternating, in one run."""
    # Imported here, not at the top: the policy host and the workers are spawned, and each runs this script's top
    # level again; the host imports no simulator in `hylo eval`, and should not here either.
    from hylo.envs.metaworld import MetaWorldBenchmark

    benchmark = MetaWorldBenchmark()
    task = benchmark.task_instance("mt10", "reach-v3", 0, 0)
    env = benchmark.make_env()
    spec = EvalSpec(benchmark="metaworld", agent="mlp", agent_args={"hidden": 16, "layers": 1}, workers=1, batch=1,
                    batch_wait_ms=0)  # fmt: skip
    host = policy_host(spec, "process")
    host.start()
    rng = np.random.default_rng(0)
    try:
        state = env.reset(task)
        agent = HostedAgent(host.endpoint)
        agent.reset(EpisodeContext(seed=0, env_spec=env.spec, task=task))
        figures: dict[str, Any] = {}
        for label, frames in WIRE_OBSERVATIONS.items():
            images = {f"camera{i}": rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for i, (h, w) in enumerate(frames)}
            obs = {**state, "images": images} if images else dict(state)
            times: dict[str, list[float]] = {"out_of_band": [], "pickled": []}
            for _ in range(calls):
                for way, threshold in (("out_of_band", wire.OUT_OF_BAND_BYTES), ("pickled", 2**62)):
                    with _out_of_band_from(threshold):
                        started = time.perf_counter()
                        agent.act(obs)
                        times[way].append(time.perf_counter() - started)
            median = {way: 1000 * statistics.median(values[calls // 10 :]) for way, values in times.items()}
            figures[label] = {
                "bytes": sum(frame.nbytes for frame in images.values()) + obs["state"].nbytes,
                "round_trip_ms": round(median["out_of_band"], 3),
                "pickled_round_trip_ms": round(median["pickled"], 3),
                "speedup": round(median["pickled"] / median["out_of_band"], 2),
            }
        agent.close()
    finally:
        host.close()
        env.close()
    return figures


@contextlib.contextmanager
def _out_of_band_from(threshold: int) -> Iterator[None]:
    """Send (from this process) buffers of at least `threshold` bytes out of band."""
    saved, wire.OUT_OF_BAND_BYTES = wire.OUT_OF_BAND_BYTES, threshold
    try:
        yield
    finally:
        wire.OUT_OF_BAND_BYTES = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=None, help="episodes per task per repeat (default 8; 2 slept)")
    parser.add_argument("--max-steps", type=int, default=None, help="steps per episode (default 150; 100 slept)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats (default 3)")
    parser.add_argument("--call-sleep-ms", type=float, default=0.0, help="device time per policy call (default 0)")
    parser.add_argument("--batch-wait-ms", type=float, default=10.0, help="the host's --batch-wait-ms (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--wire", action="store_true", help="measure an observation's round trip to the host")
    parser.add_argument("--calls", type=int, default=300, help="round trips per observation and way (--wire)")
    args = parser.parse_args()
    if args.wire:
        with stdout_to_stderr():
            costs = wire_costs(args.calls)
        print(json.dumps(costs) if args.json else "\n".join(f"  {key:<18} {value}" for key, value in costs.items()))
        return
    slept = args.call_sleep_ms > 0
    episodes = args.episodes or (2 if slept else 8)
    max_steps = args.max_steps or (100 if slept else 150)
    logging.disable(logging.WARNING)

    with tempfile.TemporaryDirectory() as tmp, stdout_to_stderr():
        root = Path(tmp)
        os.environ[DEVICE_ENV] = str(root / "device.lock")  # inherited by the workers and the host
        agent = "batched_policy:OneDeviceMlp" if slept else "mlp"
        agent_args: dict[str, Any] = {"call_sleep_ms": args.call_sleep_ms, "hidden": 64} if slept else {}
        spec = EvalSpec(benchmark="metaworld", agent=agent, tasks=TASKS, episodes=episodes, max_steps=max_steps,
                        agent_args=agent_args, log_dir=tmp, backend="process")  # fmt: skip
        evaluation = Evaluation(spec)  # pooled: it builds no agent in this process (the RSS counts the workers' copies)
        config = WorkerConfig(evaluation.spec, evaluation.run_id, root / "files", evaluation.resolved.budgets)
        jobs = [EpisodeJob(task) for task in evaluation._plan()]
        limits = evaluation.episode_limits()
        batched_spec = evaluation.spec.model_copy(
            update={"workers": WORKERS, "batch": BATCH, "batch_wait_ms": args.batch_wait_ms}
        )

        def unbatched() -> Pool:
            return ProcessPool(config, WORKERS, limits)

        def batched() -> Pool:
            host = policy_host(batched_spec, "process", limits.values())
            hosted = WorkerConfig(batched_spec, evaluation.run_id, root / "files", evaluation.resolved.budgets,
                                  policy_host=host.endpoint)  # fmt: skip
            return BatchedPool(ProcessPool(hosted, WORKERS, limits), host)

        rates: dict[str, list[float]] = {"unbatched": [], "batched": []}
        memory: dict[str, list[dict[str, float]]] = {"unbatched": [], "batched": []}
        batch_calls = batch_requests = 0
        queue_ms: list[float] = []
        busy: list[float] = []
        for _ in range(args.repeats):
            for label, make in (("unbatched", unbatched), ("batched", batched)):
                pool = make()
                pool.start()
                try:
                    warm(pool, jobs)
                    before = pool.figures() if isinstance(pool, BatchedPool) else None
                    rate, rss = timed(evaluation, pool, jobs, root, label)
                    rates[label].append(rate)
                    memory[label].append(rss)
                    if isinstance(pool, BatchedPool) and before is not None:
                        after = pool.figures()
                        calls, requests = after.calls - before.calls, after.requests - before.requests
                        batch_calls += calls
                        batch_requests += requests
                        queue_ms.append(after.mean_queue_wait_ms)
                        busy.append(after.utilisation)
                finally:
                    pool.close()

    median = {label: statistics.median(values) for label, values in rates.items()}
    figures: dict[str, Any] = {
        "throughput_ratio": round(median["batched"] / median["unbatched"], 3),
        "unbatched_eps_per_s": round(median["unbatched"], 3),
        "batched_eps_per_s": round(median["batched"], 3),
        "mean_batch_size": round(batch_requests / batch_calls, 3) if batch_calls else None,
        "rss_mb": {
            label: round(statistics.median(sum(m.values()) for m in values), 1) for label, values in memory.items()
        },
        "rss_by_role_mb": {
            label: {role: round(statistics.median(m[role] for m in values), 1) for role in values[0]}
            for label, values in memory.items()
        },
        "mean_queue_wait_ms": round(statistics.median(queue_ms), 3) if queue_ms else None,
        "host_utilisation": round(statistics.median(busy), 3) if busy else None,
        "call_sleep_ms": args.call_sleep_ms,
        "workers": WORKERS,
        "batch": BATCH,
        "episodes_per_repeat": len(jobs),
        "max_steps": max_steps,
    }
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
        return
    print(f"Meta-World, mlp policy (call sleep {args.call_sleep_ms:g} ms), {len(jobs)} episodes of {max_steps} steps")
    for label in rates:
        print(f"  {label:<10} {median[label]:7.2f} episodes/s   {[round(v, 2) for v in rates[label]]}   "
              f"rss {figures['rss_mb'][label]:.0f} MB")  # fmt: skip
    for label, roles in figures["rss_by_role_mb"].items():
        print(f"  {label:<10} rss by role: " + ", ".join(f"{role} {mb:.0f} MB" for role, mb in roles.items()))
    print(f"  ratio      {figures['throughput_ratio']:.2f}  (goal ≥ {GOAL_RATIO} with the CPU-bound policy)")
    print(f"  mean batch {figures['mean_batch_size']}, queue wait {figures['mean_queue_wait_ms']} ms")


if __name__ == "__main__":
    main()
