"""The `hylo` command line: one parser with a subcommand per command; each command module adds its own."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import NoReturn

from hylo.argtypes import float_in, non_negative_int, positive_int
from hylo.cli.bridge import add_parser as add_bridge_parser
from hylo.cli.graph import add_parsers as add_graph_parsers
from hylo.cli.output import EXIT_BAD_INPUT
from hylo.cli.serve import add_parser as add_serve_parser
from hylo.cli.sweep import add_parser as add_sweep_parser
from hylo.core.status import EpisodeStatus
from hylo.version import __version__


class Parser(argparse.ArgumentParser):
    """argparse, with errors on one line: `hylo eval: error: argument --episodes: ...`."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _video_size(text: str) -> tuple[int, int]:
    from hylo.eval.spec import parse_video_size

    try:
        return parse_video_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


_gpus = float_in(0.0, math.inf, "a finite number of GPUs >= 0")
_milliseconds = float_in(0.0, math.inf, "a finite number of milliseconds >= 0")


def _add_log_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dir", type=Path, default=Path("hylo-runs"), help="where runs are kept (default ./hylo-runs)"
    )


def _add_run_options(parser: argparse.ArgumentParser, *, episodes: bool = True, grid: bool = True) -> None:
    """The options `hylo eval` and `hylo graph run` share (`hylo ab` too, which sizes its runs itself; `hylo sweep`
    too, with `grid` False: it takes lists of `--latency-steps` and `--execution-steps` of its own)."""
    if episodes:
        parser.add_argument("--episodes", type=positive_int, default=10, help="episodes per task (default 10)")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=non_negative_int, default=0, help="base seed (default 0)")
    seeds.add_argument(
        "--seeds", type=non_negative_int, nargs="+", default=None, metavar="S", help="run every episode under each seed"
    )
    parser.add_argument("--max-steps", type=_int, default=None, help="step budget per episode (default: the panel's)")
    parser.add_argument(
        "--act-timeout", type=_seconds, default=None, metavar="SECONDS", help="an act slower is an error"
    )
    parser.add_argument("--no-shield", action="store_true", help="run without the default safety shield")
    _add_log_dir(parser)
    parser.add_argument("--run-id", default=None, help="name the run (default: derived from the configuration)")
    parser.add_argument("--fresh", action="store_true", help="start a new run instead of resuming")
    parser.add_argument("--video", type=non_negative_int, default=0, metavar="N", help="mp4 of the first N per task")
    parser.add_argument(
        "--video-size",
        type=_video_size,
        default=None,
        metavar="SIZE",
        help="recorded frames' size: 256 or 320x240 (default: the env camera's); never changes what the agent sees",
    )
    parser.add_argument(
        "--no-images",
        action="store_true",
        help="withhold camera images from the agent and render none for it (default: it gets them unless it "
        "declares needs_images=False)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 3 when any episode is error or infra_invalid")
    parser.add_argument("--workers", type=positive_int, default=1, metavar="N", help="worker processes (default 1)")
    parser.add_argument(
        "--backend",
        choices=("auto", "inline", "process", "ray"),
        default="auto",
        help="inline (this process), process (isolated workers), ray; auto: inline for 1 worker, else process",
    )
    parser.add_argument("--address", default=None, help="ray: the cluster to join (default: start a local Ray)")
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        metavar="B",
        help="build the agent once, in a policy host, and batch up to B workers' act calls (needs act_batch)",
    )
    parser.add_argument(
        "--batch-wait-ms",
        type=_milliseconds,
        default=10.0,
        metavar="W",
        help="how long a batch waits for more requests after its first (default 10)",
    )
    parser.add_argument(
        "--host-gpus",
        type=_gpus,
        default=0.0,
        metavar="G",
        help="--backend ray --batch: the GPUs Ray gives the policy host (num_gpus; a fraction shares one)",
    )
    parser.add_argument(
        "--retry-infra", type=non_negative_int, default=0, metavar="K", help="retry infra_invalid K times"
    )
    parser.add_argument(
        "--max-infra-failures", type=positive_int, default=None, metavar="M", help="stop the run at M infra failures"
    )
    parser.add_argument(
        "--episode-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="cap on an episode's wall time, charged to whoever's call crosses it (default: none)",
    )
    parser.add_argument(
        "--env-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="limit of every env call (default: 10x the env's mean step, at least 10 s; a reset at least 60 s)",
    )
    _add_timing_options(parser, grid=grid)


def _add_timing_options(parser: argparse.ArgumentParser, *, grid: bool) -> None:
    """The timing flags (docs/protocols.md): a named `--protocol`, or the timing's own options. A latency in steps,
    a latency distribution or an execution horizon selects realtime timing with the chunked schedule on the virtual
    clock; `grid` False leaves out `--latency-steps` and `--execution-steps`."""
    timing = parser.add_argument_group("timing", "how policy time relates to robot time (docs/protocols.md)")
    timing.add_argument(
        "--protocol", default=None, metavar="NAME", help="a named protocol (hylo list protocols): fixes the timing"
    )
    timing.add_argument(
        "--timing",
        choices=("sync", "realtime"),
        default=None,
        help="loop timing (default sync; realtime with --latency-steps/--execution-steps/--latency-lognormal/"
        "--latency-samples)",
    )
    timing.add_argument(
        "--refill-steps", type=non_negative_int, default=None, metavar="N", help="realtime: refill threshold"
    )
    timing.add_argument(
        "--max-hold-steps", type=positive_int, default=None, metavar="N", help="realtime: watchdog holds"
    )
    latency = timing.add_mutually_exclusive_group()
    latency.add_argument("--latency", type=float, default=None, metavar="SECONDS", help="realtime: fixed act latency")
    if grid:
        latency.add_argument(
            "--latency-steps",
            type=non_negative_int,
            default=None,
            metavar="D",
            help="chunked realtime: D control steps of latency (virtual clock)",
        )
    latency.add_argument(
        "--latency-lognormal",
        type=float_in(0.0, math.inf, "a finite number >= 0"),
        nargs=2,
        default=None,
        metavar=("MEDIAN_S", "SIGMA"),
        help="chunked realtime: a lognormal latency per act, seeded per episode (virtual clock)",
    )
    latency.add_argument(
        "--latency-samples",
        type=Path,
        default=None,
        metavar="FILE",
        help="chunked realtime: latencies (s) measured from a policy server, one a line or a JSON list, drawn from",
    )
    if grid:
        timing.add_argument(
            "--execution-steps",
            type=positive_int,
            default=None,
            metavar="S",
            help="chunked realtime: a new chunk every S control steps (default: the agent's execution_steps)",
        )
    timing.add_argument("--clock", choices=("virtual", "wall"), default=None, help="realtime: clock")
    timing.add_argument(
        "--strategy",
        choices=("naive", "ensemble"),
        default=None,
        help="how a new chunk merges into the plan: replace it (naive, default) or temporal ensembling",
    )
    timing.add_argument(
        "--ensemble-m",
        type=float_in(0.0, 100.0, "a number in [0, 100]"),
        default=None,
        metavar="M",
        help="--strategy ensemble: the weights' decay exp(-M*i), i = 0 the oldest prediction (default 0.01)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="hylo", description="Truthful, fast, reproducible evaluation of embodied agents.")
    parser.add_argument("--version", action="version", version=f"hylo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    ev = commands.add_parser("eval", help="evaluate an agent on a benchmark (resumes the same run when re-run)")
    ev.add_argument("benchmark", nargs="?", help="a registered benchmark (hylo list benchmarks) or gym:<id>")
    ev.add_argument(
        "-E",
        dest="env_args",
        action="append",
        default=[],
        metavar="K=V",
        help="benchmark option (JSON literal): gymnasium.make's keyword argument for gym:<id>, e.g. -E obs_type=pixels",
    )
    ev.add_argument("--split", default=None, help="the split (default: the benchmark's)")
    ev.add_argument("--task", dest="tasks", nargs="+", action="extend", default=[], metavar="T", help="tasks to run")
    ev.add_argument("--agent", help="random, hold, expert, a registered agent or module:Class")
    ev.add_argument(
        "-A", dest="agent_args", action="append", default=[], metavar="K=V", help="agent argument (JSON literal)"
    )
    _add_run_options(ev)
    ev.add_argument(
        "--record-dataset",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep every episode's steps and write them as a LeRobot dataset into DIR, a new directory (hylo[lerobot])",
    )
    ev.add_argument("--spec", type=Path, default=None, metavar="FILE", help="read the whole spec from a JSON file")
    ev.add_argument("--json", action="store_true", help="print one JSON object on stdout and nothing else")

    runs = commands.add_parser("runs", help="list, show, export or delete evaluation runs")
    runs_commands = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True, parser_class=Parser)
    runs_list = runs_commands.add_parser("list", help="every run in the log dir")
    _add_log_dir(runs_list)
    runs_list.add_argument("--json", action="store_true")
    for name, help_ in (("show", "a run's summary"), ("export", "a run's full record"), ("delete", "delete a run")):
        sub = runs_commands.add_parser(name, help=help_)
        sub.add_argument("run", help="run id (or a unique prefix)")
        _add_log_dir(sub)
        if name == "export":
            sub.add_argument(
                "--format",
                choices=("json", "lerobot"),
                default="json",
                help="json: the run's record on stdout; lerobot: its recorded episodes as a LeRobot dataset (--out)",
            )
            sub.add_argument("--traces", action="store_true", help="json: include every episode's trace events")
            sub.add_argument("--out", type=Path, default=None, metavar="DIR", help="lerobot: the new directory")
            sub.add_argument(
                "--status",
                dest="statuses",
                nargs="+",
                action="extend",
                default=None,
                choices=[status.value for status in EpisodeStatus],
                metavar="S",
                help="lerobot: only the episodes of these statuses (success, failure, timeout, error, infra_invalid)",
            )
        if name == "show":
            sub.add_argument("--json", action="store_true")

    compare = commands.add_parser("compare", help="pair two runs' episodes and test the difference (McNemar)")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    _add_log_dir(compare)
    compare.add_argument("--json", action="store_true")
    compare.add_argument("--all-flips", action="store_true", help="list every flipped episode (default: 50)")

    ab = commands.add_parser(
        "ab", help="compare agents A and B pair by pair, stopping when the sequential test decides (ab show ID)"
    )
    ab.add_argument("benchmark", help="the benchmark both run on (or `show`, then the A/B id)")
    ab.add_argument("ab_id", nargs="?", help=argparse.SUPPRESS)
    ab.add_argument("-E", dest="env_args", action="append", default=[], metavar="K=V", help="benchmark option")
    ab.add_argument("--split", default=None, help="the split (default: the benchmark's)")
    ab.add_argument("--task", dest="tasks", nargs="+", action="extend", default=[], metavar="T", help="tasks to run")
    ab.add_argument("--a", dest="agent_a", help="agent A")
    ab.add_argument("-A", dest="agent_args_a", action="append", default=[], metavar="K=V", help="A's argument")
    ab.add_argument("--b", dest="agent_b", help="agent B")
    ab.add_argument("-B", dest="agent_args_b", action="append", default=[], metavar="K=V", help="B's argument")
    ab.add_argument("--max-episodes", type=positive_int, default=None, metavar="N", help="at most N pairs")
    ab.add_argument("--alpha", type=float, default=0.05, help="the test's two-sided level (default 0.05)")
    ab.add_argument(
        "--reuse-runs", action="store_true", help="compare on the runs hylo eval made for A and B, extending them"
    )
    _add_run_options(ab, episodes=False)
    ab.add_argument("--json", action="store_true", help="print one JSON object on stdout and nothing else")

    add_sweep_parser(commands, lambda parser: _add_run_options(parser, grid=False))

    plan = commands.add_parser("plan", help="episodes needed to tell two success rates apart")
    plan.add_argument("--p-a", type=float, required=True, help="A's success rate")
    plan.add_argument("--p-b", type=float, required=True, help="B's success rate")
    plan.add_argument("--correlation", type=float, default=None,
                      help="of A's and B's outcomes on a pair (phi: hylo compare of a pilot prints it); without it, "
                      "the paired count at r = 0, 0.25, 0.5, 0.75")  # fmt: skip
    plan.add_argument("--alpha", type=float, default=0.05, help="two-sided (default 0.05)")
    plan.add_argument("--power", type=float, default=0.8, help="chance of deciding for the better one (default 0.8)")
    plan.add_argument("--json", action="store_true")

    listing = commands.add_parser("list", help="what is registered; list tasks BENCH: a benchmark's tasks")
    listing.add_argument("what", choices=("benchmarks", "agents", "protocols", "tasks"))
    listing.add_argument("benchmark", nargs="?", help="list tasks: the benchmark (hylo list benchmarks)")
    listing.add_argument("--split", default=None, help="list tasks: only this split's (default: every split)")
    listing.add_argument("--json", action="store_true")

    demo = commands.add_parser("demo", help="evaluate experts and random agents on BabyAI and Meta-World")
    demo.add_argument("--episodes", type=positive_int, default=20, help="episodes per task (default 20)")
    demo.add_argument("--seed", type=non_negative_int, default=0, help="base seed (default 0)")
    demo.add_argument("--log-dir", type=Path, default=None, help="where the demo's runs are kept (default ./hylo-runs)")
    demo.add_argument("--builtin", action="store_true", help="the dependency-free Kernel demo on built-in envs")
    demo.add_argument("--trace", type=Path, default=None, help="--builtin: write the JSONL trace here")

    add_graph_parsers(commands, _add_run_options)

    add_serve_parser(commands)

    add_bridge_parser(commands)
    return parser
