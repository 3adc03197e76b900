"""Where `hylo eval`'s overhead goes, layer by layer, on BabyAI GoToLocal with minigrid's BabyAIBot.

Six loops run the same episodes (same seeds, same expert), each adding one layer to the one before:

1. `raw`: the bare gymnasium loop of `eval_overhead.py`
2. `env`: hylo's BabyAI environment and expert, driven by a hand-written loop
3. `kernel`: the Kernel (default shield, no trace subscriber)
4. `panel`: plus placement of every episode through the env panel
5. `eval_no_trace`: `hylo.eval.Evaluation` with nothing subscribed to the bus (EvalLog rows only)
6. `eval`: the full `hylo eval` (trace recorded and committed with each episode)

Repeats are interleaved; each figure is the median over repeats of steps / wall time, with its ratio to `raw`.

    python benchmarks/eval_breakdown.py [--json] [--episodes N] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval_overhead
import hylo.core.bus as bus_module
from hylo.core import EventBus, Kernel
from hylo.core.context import EpisodeContext
from hylo.envs.babyai import BabyAIBenchmark
from hylo.envs.quiet import stdout_to_stderr
from hylo.panels import BenchmarkPanel
from hylo.panels.placement import PanelDriver

TASK = "GoToLocal"


def loops(episodes: int) -> dict[str, Callable[[], int]]:
    bench = BabyAIBenchmark()
    budget = bench.default_step_budget(TASK)
    tasks = [bench.task_instance("default", TASK, i) for i in range(episodes)]

    def env_loop() -> int:
        env, agent, steps = bench.make_env(), bench.expert(), 0
        for task in tasks:
            obs = env.reset(task)
            agent.reset(EpisodeContext(task.seed, env.spec, task, read_privileged=env.privileged_state))
            for _ in range(budget):
                result = env.step(agent.act(obs).actions[0])
                obs, steps = result.obs, steps + 1
                if result.terminated or result.truncated:
                    break
        env.close()
        return steps

    def kernel_loop() -> int:
        env = bench.make_env()
        kernel = Kernel(env, bench.expert(), max_steps=budget, bus=EventBus("breakdown"))
        steps = sum(kernel.run(task).steps for task in tasks)
        env.close()
        return steps

    def panel_loop() -> int:
        env = bench.make_env()
        kernel = Kernel(env, bench.expert(), max_steps=budget, bus=EventBus("breakdown"), auto_episode_reset=False)
        driver = PanelDriver(BenchmarkPanel(bench), kernel)
        steps = sum(kernel.run(driver.place(task)).steps for task in tasks)
        env.close()
        return steps

    full = eval_overhead.hylo_loop("babyai", [TASK], episodes)
    subscribe = bus_module.EventBus.subscribe

    def eval_no_trace() -> int:
        bus_module.EventBus.subscribe = lambda self, subscriber, critical=False: subscriber  # type: ignore[method-assign]
        try:
            return full()
        finally:
            bus_module.EventBus.subscribe = subscribe  # type: ignore[method-assign]

    return {
        "raw": eval_overhead.babyai_bare(TASK, episodes),
        "env": env_loop,
        "kernel": kernel_loop,
        "panel": panel_loop,
        "eval_no_trace": eval_no_trace,
        "eval": full,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    variants = loops(args.episodes)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    with stdout_to_stderr():
        for loop in variants.values():
            loop()  # warm up
        for _ in range(args.repeats):
            for name, loop in variants.items():
                samples[name].append(eval_overhead.measure(loop)[0])  # steps per second
    raw = statistics.median(samples["raw"])
    figures = {
        name: {"steps_per_s": statistics.median(v), "ratio": statistics.median(v) / raw} for name, v in samples.items()
    }
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
        return 0
    for name, row in figures.items():
        per_step = 1e6 / row["steps_per_s"]
        print(f"{name:<14} {row['steps_per_s']:>8.0f} steps/s  {per_step:>7.1f} µs/step  ratio {row['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
