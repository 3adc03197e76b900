"""The arguments `hylo`'s commands share, each defined here once: where a run runs (`-E`, `--split`, `--task`), the
agent, `--episodes` and `--seed`, the run options and timing flags of `eval`, `ab`, `sweep` and `graph run`, `--log-dir`
and `--json`; and the parser class every command's parser is made of."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from hylo.argtypes import float_in, non_negative_int, positive_int
from hylo.cli.output import EXIT_BAD_INPUT

if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[Any]
    """What `add_parser` adds a command to: `hylo`'s commands (`ArgumentParser.add_subparsers`)."""
    ArgumentAdder: TypeAlias = argparse._ActionsContainer
    """A parser, an argument group or a mutually exclusive group: what arguments are added to."""


class Parser(argparse.ArgumentParser):
    """argparse, with errors on one line: `hylo eval: error: argument --episodes: ...`."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


DEFAULT_LOG_DIR = Path("hylo-runs")
LOG_DIR_HELP = "where runs are kept (default ./hylo-runs)"
JSON_HELP = "print one JSON object on stdout and nothing else"
SPLIT_HELP = "the split (default: the benchmark's)"
BENCHMARK_OPTION_HELP = "benchmark option"
AGENT_ARGS_HELP = "agent argument (JSON literal)"


def add_log_dir(parser: ArgumentAdder, help: str = LOG_DIR_HELP, default: Path | None = DEFAULT_LOG_DIR) -> None:
    """`--log-dir DIR`: where the command keeps (or reads) its runs."""
    parser.add_argument("--log-dir", type=Path, default=default, help=help)


def add_json(parser: ArgumentAdder, help: str | None = None) -> None:
    """`--json`: the command's result as JSON on stdout."""
    parser.add_argument("--json", action="store_true", help=help)


def add_placement(
    parser: ArgumentAdder,
    *,
    options: str | None = BENCHMARK_OPTION_HELP,
    split: str = SPLIT_HELP,
    task_flags: tuple[str, ...] = ("--task",),
) -> None:
    """Where a run runs on its benchmark: `-E K=V` benchmark options (help `options`; None leaves them out),
    `--split` and `--task T ...` (under the names `task_flags`)."""
    if options is not None:
        parser.add_argument("-E", dest="env_args", action="append", default=[], metavar="K=V", help=options)
    add_split(parser, split)
    parser.add_argument(*task_flags, dest="tasks", nargs="+", action="extend", default=[], metavar="T",
                        help="tasks to run")  # fmt: skip


def add_split(parser: ArgumentAdder, help: str = SPLIT_HELP) -> None:
    """`--split S`."""
    parser.add_argument("--split", default=None, help=help)


def add_agent(parser: ArgumentAdder, help: str) -> None:
    """`--agent A` and its arguments, `-A K=V`."""
    parser.add_argument("--agent", help=help)
    parser.add_argument("-A", dest="agent_args", action="append", default=[], metavar="K=V", help=AGENT_ARGS_HELP)


def add_episodes(parser: ArgumentAdder, default: int) -> None:
    """`--episodes N`: episodes per task."""
    parser.add_argument("--episodes", type=positive_int, default=default, help=f"episodes per task (default {default})")


def add_seed(parser: ArgumentAdder) -> None:
    """`--seed S`: the base seed."""
    parser.add_argument("--seed", type=non_negative_int, default=0, help="base seed (default 0)")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _video_size(text: str) -> tuple[int, int]:
    from hylo.eval.spec import parse_video_size  # start-up time: the evaluation stack

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


def add_run_options(parser: argparse.ArgumentParser, *, episodes: bool = True, grid: bool = True) -> None:
    """The options `hylo eval` and `hylo graph run` share (`hylo ab` too, with `episodes` False: it sizes its runs
    itself; `hylo sweep` too, with `grid` False: it takes lists of `--latency-steps` and `--execution-steps` of its
    own). `hylo.cli.evaluate.run_options` reads them into a spec's fields."""
    if episodes:
        add_episodes(parser, 10)
    seeds = parser.add_mutually_exclusive_group()
    add_seed(seeds)
    seeds.add_argument(
        "--seeds", type=non_negative_int, nargs="+", default=None, metavar="S", help="run every episode under each seed"
    )
    parser.add_argument("--max-steps", type=_int, default=None, help="step budget per episode (default: the panel's)")
    parser.add_argument(
        "--act-timeout", type=_seconds, default=None, metavar="SECONDS", help="an act slower is an error"
    )
    parser.add_argument("--no-shield", action="store_true", help="run without the default safety shield")
    add_log_dir(parser)
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
    add_timing_options(parser, grid=grid)


def add_timing_options(parser: argparse.ArgumentParser, *, grid: bool) -> None:
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
