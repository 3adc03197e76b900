"""`hylo demo`: a real evaluation of BabyAI's expert against a random agent (and, with `--builtin`, the Kernel on
the dependency-free built-in environments)."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hylo.agents import HoldAgent, RandomAgent
from hylo.cli.output import console
from hylo.core import EpisodeOutcome, EpisodeStatus, EventBus, JsonlRecorder, Kernel, TaskInstance
from hylo.core.environment import Environment
from hylo.envs import GridGoal, GridGoalExpert, PointReach, PointReachExpert


@dataclass(frozen=True)
class DemoRow:
    env: str
    agent: str
    outcomes: list[EpisodeOutcome]
    seconds: float

    @property
    def counts(self) -> Counter[EpisodeStatus]:
        return Counter(o.status for o in self.outcomes)

    @property
    def success_rate(self) -> float | None:
        scored = [o for o in self.outcomes if o.status.scored]
        return sum(o.success for o in scored) / len(scored) if scored else None

    @property
    def conservative_rate(self) -> float:
        return sum(o.success for o in self.outcomes) / len(self.outcomes)


ENVS: dict[str, Callable[[], Environment]] = {"point_reach": PointReach, "grid_goal": GridGoal}
AGENTS: dict[str, dict[str, Callable[[], Any]]] = {
    "point_reach": {"expert": PointReachExpert, "random": RandomAgent, "hold": HoldAgent},
    "grid_goal": {"expert": GridGoalExpert, "random": RandomAgent, "hold": HoldAgent},
}


def run_demo(episodes: int = 50, seed: int = 0, trace: Path | None = None) -> list[DemoRow]:
    rows: list[DemoRow] = []
    recorder = JsonlRecorder(trace) if trace is not None else None
    try:
        for env_name, make_env in ENVS.items():
            env = make_env()
            for agent_name, make_agent in AGENTS[env_name].items():
                bus = EventBus(run_id=f"demo-{env_name}-{agent_name}")
                if recorder is not None:
                    bus.subscribe(recorder)
                kernel = Kernel(env, make_agent(), bus=bus)
                start = time.perf_counter()
                outcomes = [kernel.run(TaskInstance("builtin", env_name, i, base_seed=seed)) for i in range(episodes)]
                rows.append(DemoRow(env_name, agent_name, outcomes, time.perf_counter() - start))
            env.close()
    finally:
        if recorder is not None:
            recorder.close()
    return rows


def render(rows: list[DemoRow], console: Console) -> None:
    table = Table(title="hylo demo: Kernel on the built-in environments")
    for column in ("env", "agent", "n", *[s.value for s in EpisodeStatus], "rate", "conservative", "steps", "ep/s"):
        table.add_column(column, justify="left" if column in ("env", "agent") else "right", no_wrap=True)
    for row in rows:
        counts = row.counts
        rate = row.success_rate
        table.add_row(
            row.env,
            row.agent,
            str(len(row.outcomes)),
            *[str(counts.get(s, 0)) for s in EpisodeStatus],
            "—" if rate is None else f"{rate:.2f}",
            f"{row.conservative_rate:.2f}",
            f"{sum(o.steps for o in row.outcomes) / len(row.outcomes):.1f}",
            f"{len(row.outcomes) / row.seconds:.0f}",
        )
    console.print(table)
    console.print(
        "rate = successes / scored episodes (error and infra_invalid abstain); conservative = successes / all episodes."
    )


DEMO_SUITES: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    ("babyai", "BabyAI", ("GoToLocal", "PickupLoc", "OpenDoor"), 1),
    ("metaworld", "Meta-World", ("reach-v3", "pick-place-v3"), 2),
)
"""(benchmark, display name, tasks, divisor of the episode count): Meta-World's random episodes run 500 steps."""


def run_real_demo(console: Console, episodes: int = 20, seed: int = 0, log_dir: Path | None = None) -> int:
    """Evaluate each benchmark's expert and a random agent, show both tables and their paired comparison."""
    import tempfile

    from hylo.envs.quiet import stdout_to_stderr
    from hylo.eval.progress import ProgressBar
    from hylo.eval.report import print_comparison, print_summary
    from hylo.eval.runner import Evaluation
    from hylo.eval.spec import EvalSpec
    from hylo.eval.stats import compare_runs
    from hylo.eval.store import records

    with tempfile.TemporaryDirectory(prefix="hylo-demo-") as tmp:
        root = log_dir if log_dir is not None else Path(tmp)
        for benchmark, display, tasks, divisor in DEMO_SUITES:
            n = max(1, episodes // divisor)
            results = []
            for agent in ("expert", "random"):
                spec = EvalSpec(
                    benchmark=benchmark, tasks=list(tasks), agent=agent, episodes=n, seed=seed, log_dir=str(root)
                )
                with stdout_to_stderr():
                    evaluation = Evaluation(spec)
                    with ProgressBar(Console(stderr=True), f"{benchmark} · {agent}") as bar:
                        evaluation.progress = bar.update
                        result = evaluation.run()
                results.append(result)
                title = f"{agent} on {display} ({n} episodes per task, seed {seed})"
                print_summary(console, title, result.per_task, result.summary)
            expert, random_ = results
            comparison = compare_runs(records(expert.episodes), records(random_.episodes))
            print_comparison(console, f"expert on {display}", "random", comparison, max_flips=5)
        if log_dir is not None:
            console.print(f"runs kept in {log_dir}: hylo runs list --log-dir {log_dir}")
    return 0


def run(args: argparse.Namespace) -> int:
    out = console()
    if args.builtin:
        rows = run_demo(episodes=args.episodes, seed=args.seed, trace=args.trace)
        render(rows, out)
        if args.trace is not None:
            out.print(f"trace: {args.trace}")
        return 0
    return run_real_demo(out, episodes=args.episodes, seed=args.seed, log_dir=args.log_dir)
