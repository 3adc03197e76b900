"""`hylo demo`: a real evaluation of BabyAI's expert against a random agent (and, with `--builtin`, the Kernel on
the dependency-free built-in environments)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from hylo.cli.arguments import DEFAULT_LOG_DIR, add_episodes, add_log_dir, add_seed
from hylo.cli.output import console as output_console

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers


def add_parser(commands: Subparsers) -> None:
    """Add `demo` to `hylo`'s commands."""
    demo = commands.add_parser("demo", help="evaluate experts and random agents on BabyAI and Meta-World")
    add_episodes(demo, 20)
    add_seed(demo)
    add_log_dir(demo, "where the demo's runs are kept (default ./hylo-runs)", default=None)
    demo.add_argument("--builtin", action="store_true", help="the dependency-free Kernel demo on built-in envs")
    demo.add_argument("--trace", type=Path, default=None, help="--builtin: write the JSONL trace here")


DEMO_SUITES: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    ("babyai", "BabyAI", ("GoToLocal", "PickupLoc", "OpenDoor"), 1),
    ("metaworld", "Meta-World", ("reach-v3", "pick-place-v3"), 2),
)
"""(benchmark, display name, tasks, divisor of the episode count): Meta-World's random episodes run 500 steps."""


def run_real_demo(console: Console, episodes: int = 20, seed: int = 0, log_dir: Path = DEFAULT_LOG_DIR) -> int:
    """Evaluate each benchmark's expert and a random agent into `log_dir` (a second demo finds them complete there
    and runs nothing), show both tables and their paired comparison, and how to look at the runs again."""
    from hylo.envs.quiet import stdout_to_stderr  # start-up time: the envs package
    from hylo.eval.progress import ProgressBar  # start-up time: the evaluation stack
    from hylo.eval.runner import Evaluation  # start-up time: the evaluation stack
    from hylo.eval.spec import EvalSpec  # start-up time: the evaluation stack
    from hylo.evallog.report import print_comparison, print_summary  # start-up time: the report tables
    from hylo.evallog.store import records  # start-up time: the EvalLog reader
    from hylo.stats.success import compare_runs  # start-up time: the statistics

    where = "" if log_dir == DEFAULT_LOG_DIR else f" --log-dir {shlex.quote(str(log_dir))}"
    run_ids: list[str] = []
    for benchmark, display, tasks, divisor in DEMO_SUITES:
        n = max(1, episodes // divisor)
        results = []
        for agent in ("expert", "random"):
            spec = EvalSpec(
                benchmark=benchmark, tasks=list(tasks), agent=agent, episodes=n, seed=seed, log_dir=str(log_dir)
            )
            with stdout_to_stderr():
                evaluation = Evaluation(spec)
                with ProgressBar(output_console(stderr=True), f"{benchmark} · {agent}") as bar:
                    evaluation.progress = bar.update
                    result = evaluation.run()
            results.append(result)
            run_ids.append(result.run_id)
            title = f"{agent} on {display} ({n} episodes per task, seed {seed}): run {result.run_id}"
            print_summary(console, title, result.per_task, result.summary)
        expert, random_ = results
        comparison = compare_runs(records(expert.episodes), records(random_.episodes))
        every_flip = f"hylo compare {expert.run_id} {random_.run_id} --all-flips{where}"
        print_comparison(console, f"expert on {display}", "random", comparison, max_flips=5, all_flips=every_flip)
    console.print(f"the demo's runs are in {log_dir.resolve()}", highlight=False, soft_wrap=True)
    console.print("(a second hylo demo finds them complete and runs nothing); look at them again with:")
    for command in (f"hylo runs list{where}", f"hylo runs show {run_ids[0]}{where}",
                    f"hylo compare {run_ids[0]} {run_ids[1]} --all-flips{where}"):  # fmt: skip
        console.print(f"  {command}", highlight=False, markup=False, soft_wrap=True)
    return 0


def run(args: argparse.Namespace) -> int:
    """`hylo demo`, or `hylo demo --builtin`."""
    out = output_console()
    if args.builtin:
        from hylo.cli.builtin_demo import render, run_demo  # start-up time: the built-in envs

        rows = run_demo(episodes=args.episodes, seed=args.seed, trace=args.trace)
        render(rows, out)
        if args.trace is not None:
            out.print(f"trace: {args.trace}")
        return 0
    log_dir = DEFAULT_LOG_DIR if args.log_dir is None else args.log_dir  # --builtin writes none
    return run_real_demo(out, episodes=args.episodes, seed=args.seed, log_dir=log_dir)
