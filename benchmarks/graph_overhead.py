"""What the graph engine costs against the Kernel running the same loop: on BabyAI with its expert, and per step on
the cheapest environment there is.

Both variants run the same episodes with the same agent, the default safety shield and no trace subscriber (the bus
is inactive); each env and runner is built once, before timing:

- `kernel`: `Kernel(env, agent).run(task)`;
- `graph`: `GraphRunner(compile_graph(graph), Runtime(...)).run(task)` on the canonical loop
  `reset → iterIn → observe → reason → step → iterOut → evaluate`.

BabyAI (`babyai`): the canonical expert graph, the built-in example `babyai_expert` (placed on `GoToLocal`), against
the Kernel with `make_agent("expert", {}, benchmark)`, episodes 0..N-1 of the placed split; figures in env steps per
second. Goal: ratio = graph / kernel ≥ 0.9.

Null env (`null_env`): `hylo.envs.null.NullEnv` with long episodes (the step budget only ends them) and the built-in
`hold` agent (a one-action `ActionChunk` of zeros per `act`); the graph is the same canonical shape built with
`agent_graph`, its env nodes from `env_nodeset("null")`. Figures in µs per step. Goal: the graph adds at most
50 µs per iteration (overhead = graph − kernel).

A warm-up pass of each checks that both score every episode with the same status and step count; then repeats are
interleaved (kernel, graph, kernel, graph, ...) so that drift in the machine's speed hits both alike, and each figure
is the median over repeats.

    python benchmarks/graph_overhead.py            # a short table
    python benchmarks/graph_overhead.py --json     # {"babyai": {...}, "null_env": {...}} on stdout
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

from hylo.agents.registry import make_agent
from hylo.core import Kernel, TaskInstance
from hylo.core.status import EpisodeOutcome
from hylo.envs.null import NullEnv
from hylo.envs.quiet import stdout_to_stderr
from hylo.envs.registry import get_benchmark
from hylo.graph import GraphRunner, Plan, Runtime, agent_graph, compile_graph, load_graph
from hylo.graph.env_nodes import env_nodeset
from hylo.graph.store import EXAMPLES_DIR

GOAL_RATIO = 0.9
GOAL_OVERHEAD_US = 50.0
BABYAI_GRAPH = EXAMPLES_DIR / "babyai_expert.json"
VARIANTS = ("kernel", "graph")

Runner = Callable[[TaskInstance], EpisodeOutcome]
"""`Kernel.run` or `GraphRunner.run`."""


def _compare(runners: dict[str, Runner], tasks: list[TaskInstance], repeats: int) -> tuple[int, dict[str, list[float]]]:
    """A warm-up pass of each runner over `tasks` (every episode must be scored, with the same status and step count
    under both), then `repeats` interleaved timed passes. Returns the steps per pass and the seconds per step of each
    timed pass, by runner."""
    seen = {name: list(map(run, tasks)) for name, run in runners.items()}
    for task, *ends in zip(tasks, *seen.values(), strict=True):
        if len({(o.status, o.steps) for o in ends}) != 1 or ends[0].status.value not in ("success", "failure"):
            got = {
                name: f"{o.status.value} after {o.steps} steps ({o.reason})" for name, o in zip(seen, ends, strict=True)
            }
            raise RuntimeError(f"episode {task.episode_id} ended differently or unscored: {got}")
    steps = sum(o.steps for o in next(iter(seen.values())))
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            gc.collect()
            start = time.perf_counter()
            done = sum(run(task).steps for task in tasks)
            elapsed = time.perf_counter() - start
            if done != steps:
                raise RuntimeError(f"{name}: {done} steps in a timed pass, {steps} in the warm-up")
            samples[name].append(elapsed / steps)
    return steps, samples


def babyai(episodes: int, repeats: int) -> dict[str, Any]:
    """The canonical BabyAI expert graph against the Kernel with the same expert, on the same episodes."""
    graph = load_graph(BABYAI_GRAPH)
    assert graph.placement is not None and graph.placement.task is not None
    bench = get_benchmark(graph.placement.benchmark)
    split = bench.check_split(graph.placement.split)
    task = graph.placement.task
    budget = bench.default_step_budget(task)
    tasks = [bench.task_instance(split, task, i) for i in range(episodes)]

    kernel_env, graph_env = bench.make_env(), bench.make_env()
    kernel = Kernel(kernel_env, make_agent("expert", {}, bench), max_steps=budget)
    privileged = graph_env.privileged_state if graph_env.capabilities.privileged_state else None
    runtime = Runtime(envs=lambda name: graph_env, benchmark=bench, env_spec=graph_env.spec,
                      env_capabilities=graph_env.capabilities, privileged=privileged)  # fmt: skip
    runner = GraphRunner(compile_graph(graph), runtime, max_steps=budget)
    try:
        steps, samples = _compare({"kernel": kernel.run, "graph": runner.run}, tasks, repeats)
    finally:
        runner.close()
        kernel.close()
        kernel_env.close()
        graph_env.close()
    rates = {name: [1 / s for s in per_step] for name, per_step in samples.items()}
    kernel_sps, graph_sps = (statistics.median(rates[v]) for v in VARIANTS)
    return {
        "kernel_steps_per_s": kernel_sps,
        "graph_steps_per_s": graph_sps,
        "ratio": graph_sps / kernel_sps,
        "task": task,
        "episodes": episodes,
        "steps": steps,
        "repeats": repeats,
        "samples_steps_per_s": {v: [round(r, 1) for r in rates[v]] for v in VARIANTS},
        "goal_ratio": GOAL_RATIO,
    }


def null_graph_plan(agent: str = "hold") -> Plan:
    """The canonical loop on the null benchmark's env nodes, with `agent` in the reason node."""
    graph = agent_graph("null", agent, name="null_canonical")
    return compile_graph(graph, nodesets={"null": env_nodeset("null")})


def null_env(steps: int, episode_steps: int, repeats: int, dim: int = 7) -> dict[str, Any]:
    """µs per step of the Kernel and of the canonical graph on NullEnv with the hold agent."""
    episodes = math.ceil(steps / episode_steps)
    tasks = [TaskInstance(benchmark="null", task="null", index=i) for i in range(episodes)]
    kernel_env = NullEnv(dim=dim, max_episode_steps=episode_steps)
    graph_env = NullEnv(dim=dim, max_episode_steps=episode_steps)
    kernel = Kernel(kernel_env, make_agent("hold"))
    runtime = Runtime(envs=lambda name: graph_env, benchmark=None, env_spec=graph_env.spec,
                      env_capabilities=graph_env.capabilities)  # fmt: skip
    runner = GraphRunner(null_graph_plan(), runtime)
    try:
        done, samples = _compare({"kernel": kernel.run, "graph": runner.run}, tasks, repeats)
    finally:
        runner.close()
        kernel.close()
    if done != episodes * episode_steps:  # only the step budget ends a NullEnv episode
        raise RuntimeError(f"{done} steps in {episodes} episodes of {episode_steps}: an episode ended early")
    us = {name: [1e6 * s for s in per_step] for name, per_step in samples.items()}
    kernel_us, graph_us = (statistics.median(us[v]) for v in VARIANTS)
    return {
        "kernel_us_per_step": kernel_us,
        "graph_us_per_step": graph_us,
        "overhead_us_per_step": graph_us - kernel_us,
        "steps": episodes * episode_steps,
        "episode_steps": episode_steps,
        "repeats": repeats,
        "samples_us_per_step": {v: [round(x, 2) for x in us[v]] for v in VARIANTS},
        "goal_overhead_us_per_step": GOAL_OVERHEAD_US,
    }


def _spread(samples: list[float]) -> str:
    lo, hi = min(samples), max(samples)
    return f"±{50 * (hi - lo) / statistics.median(samples):.0f}%"


def table(result: dict[str, Any]) -> str:
    b, n = result["babyai"], result["null_env"]
    ratio_ok = "ok" if b["ratio"] >= GOAL_RATIO else "MISS"
    overhead_ok = "ok" if n["overhead_us_per_step"] <= GOAL_OVERHEAD_US else "MISS"
    bs, ns = b["samples_steps_per_s"], n["samples_us_per_step"]
    return "\n".join([
        f"hylo graph overhead: graph engine vs Kernel, median of interleaved repeats (babyai {b['repeats']}, "
        f"null env {n['repeats']})",
        "",
        f"babyai {b['task']}, expert, {b['episodes']} episodes ({b['steps']} steps) per repeat",
        f"  {'kernel':<8}{b['kernel_steps_per_s']:>12,.0f} steps/s{_spread(bs['kernel']):>7}",
        f"  {'graph':<8}{b['graph_steps_per_s']:>12,.0f} steps/s{_spread(bs['graph']):>7}",
        f"  ratio   {b['ratio']:>12.3f}  goal ≥ {GOAL_RATIO:g} {ratio_ok}",
        "",
        f"null env, hold agent, {n['steps']} steps (episodes of {n['episode_steps']}) per repeat",
        f"  {'kernel':<8}{n['kernel_us_per_step']:>12.2f} µs/step{_spread(ns['kernel']):>7}",
        f"  {'graph':<8}{n['graph_us_per_step']:>12.2f} µs/step{_spread(ns['graph']):>7}",
        f"  added   {n['overhead_us_per_step']:>12.2f} µs/step  goal ≤ {GOAL_OVERHEAD_US:g} {overhead_ok}",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--repeats", type=int, default=9, help="interleaved repeats per variant (default 9)")
    parser.add_argument("--episodes", type=int, default=200, help="BabyAI episodes per repeat (default 200)")
    parser.add_argument(
        "--steps",
        type=int,
        default=40_000,
        help="null-env steps per repeat, rounded up to whole episodes (default 40000)",
    )
    parser.add_argument("--episode-steps", type=int, default=2000, help="null-env steps per episode (default 2000)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.episodes < 1 or args.steps < 1 or args.episode_steps < 1:
        parser.error("--repeats, --episodes, --steps and --episode-steps must be >= 1")
    logging.disable(logging.WARNING)
    # stdout carries only the result: C-level prints go to stderr, Python ones (minigrid's "Sampling rejected") nowhere
    with stdout_to_stderr(), open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        result = {
            "babyai": babyai(args.episodes, args.repeats),
            "null_env": null_env(args.steps, args.episode_steps, args.repeats),
        }
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
