"""The `hylo` command: `eval`, `runs`, `compare`, `list`, `demo`, `graph`, `nodes`, `serve`, `bridge`.

Exit status: 0 when a run completes (whatever its episodes' statuses); 3 with `--strict` when an episode is `error`
or `infra_invalid`; 2 with one line naming the bad value for bad input; 1 for an aborted run; 130 when interrupted
(Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError
from rich.console import Console

from hylo import __version__
from hylo.argtypes import non_negative_int, positive_int
from hylo.core.errors import HyloError

if TYPE_CHECKING:
    from hylo.eval.spec import EvalSpec

EXIT_BAD_INPUT = 2
EXIT_ABORTED = 1
EXIT_STRICT = 3
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse, with errors on one line: `hylo eval: error: argument --episodes: ...`."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def _add_log_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dir", type=Path, default=Path("hylo-runs"), help="where runs are kept (default ./hylo-runs)"
    )


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options `hylo eval` and `hylo graph run` share."""
    parser.add_argument("--episodes", type=positive_int, default=10, help="episodes per task (default 10)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="base seed (default 0)")
    parser.add_argument("--max-steps", type=_int, default=None, help="step budget per episode (default: the panel's)")
    parser.add_argument(
        "--act-timeout", type=_seconds, default=None, metavar="SECONDS", help="an act slower is an error"
    )
    parser.add_argument("--no-shield", action="store_true", help="run without the default safety shield")
    _add_log_dir(parser)
    parser.add_argument("--run-id", default=None, help="name the run (default: derived from the configuration)")
    parser.add_argument("--fresh", action="store_true", help="start a new run instead of resuming")
    parser.add_argument("--video", type=non_negative_int, default=0, metavar="N", help="mp4 of the first N per task")
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hylo", description="Truthful, fast, reproducible evaluation of embodied agents.")
    parser.add_argument("--version", action="version", version=f"hylo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ev = commands.add_parser("eval", help="evaluate an agent on a benchmark (resumes the same run when re-run)")
    ev.add_argument("benchmark", nargs="?", help="a registered benchmark (hylo list benchmarks) or gym:<id>")
    ev.add_argument("--split", default=None, help="the split (default: the benchmark's)")
    ev.add_argument("--task", dest="tasks", nargs="+", action="extend", default=[], metavar="T", help="tasks to run")
    ev.add_argument("--agent", help="random, hold, expert, a registered agent or module:Class")
    ev.add_argument(
        "-A", dest="agent_args", action="append", default=[], metavar="K=V", help="agent argument (JSON literal)"
    )
    _add_run_options(ev)
    ev.add_argument("--timing", choices=("sync", "realtime"), default="sync", help="loop timing (default sync)")
    ev.add_argument("--refill-steps", type=non_negative_int, default=None, help="realtime: refill threshold")
    ev.add_argument("--max-hold-steps", type=positive_int, default=None, help="realtime: watchdog holds")
    ev.add_argument("--latency", type=float, default=None, metavar="SECONDS", help="realtime: fixed act latency")
    ev.add_argument("--clock", choices=("virtual", "wall"), default=None, help="realtime: clock")
    ev.add_argument("--spec", type=Path, default=None, metavar="FILE", help="read the whole spec from a JSON file")
    ev.add_argument("--json", action="store_true", help="print one JSON object on stdout and nothing else")

    runs = commands.add_parser("runs", help="list, show, export or delete evaluation runs")
    runs_commands = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True, parser_class=_Parser)
    runs_list = runs_commands.add_parser("list", help="every run in the log dir")
    _add_log_dir(runs_list)
    runs_list.add_argument("--json", action="store_true")
    for name, help_ in (("show", "a run's summary"), ("export", "a run's full record"), ("delete", "delete a run")):
        sub = runs_commands.add_parser(name, help=help_)
        sub.add_argument("run", help="run id (or a unique prefix)")
        _add_log_dir(sub)
        if name == "export":
            sub.add_argument("--format", choices=("json",), default="json")
            sub.add_argument("--traces", action="store_true", help="include every episode's trace events")
        if name == "show":
            sub.add_argument("--json", action="store_true")

    compare = commands.add_parser("compare", help="pair two runs' episodes and test the difference (McNemar)")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    _add_log_dir(compare)
    compare.add_argument("--json", action="store_true")
    compare.add_argument("--all-flips", action="store_true", help="list every flipped episode (default: 50)")

    listing = commands.add_parser("list", help="what is registered")
    listing.add_argument("what", choices=("benchmarks", "agents"))
    listing.add_argument("--json", action="store_true")

    demo = commands.add_parser("demo", help="evaluate experts and random agents on BabyAI and Meta-World")
    demo.add_argument("--episodes", type=positive_int, default=20, help="episodes per task (default 20)")
    demo.add_argument("--seed", type=non_negative_int, default=0, help="base seed (default 0)")
    demo.add_argument("--log-dir", type=Path, default=None, help="where the demo's runs go (default: a temp dir)")
    demo.add_argument("--builtin", action="store_true", help="the dependency-free Kernel demo on built-in envs")
    demo.add_argument("--trace", type=Path, default=None, help="--builtin: write the JSONL trace here")
    from hylo.graph.command import add_parsers as add_graph_parsers

    add_graph_parsers(commands, _add_run_options)
    from hylo.server.command import add_parser as add_serve_parser

    add_serve_parser(commands)
    from hylo.bridges.command import add_parser as add_bridge_parser

    add_bridge_parser(commands)
    return parser


def _console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=160)


def _fail(code: int, message: str) -> int:
    line = " ".join(message.split())
    print(f"hylo: error: {line}", file=sys.stderr)
    return code


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


OPERATOR_IMPORT_COMMANDS = ("eval", "graph", "bridge")
"""The commands that take import paths (`--agent mypkg.policies:MyPolicy`): the operator's own code, found in the
current directory as under `python -m`."""


def import_from_cwd() -> None:
    """Put the current directory on the import path (after the installed packages, so a stray file there never
    shadows a module hylo imports). Process workers inherit the path; Ray's workers get the driver's directory."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)


def _check_log_dir(args: argparse.Namespace) -> None:
    """Refuse a `--log-dir` that cannot hold runs before anything runs (a `--spec` file's own is the runner's to
    check)."""
    log_dir = getattr(args, "log_dir", None)
    if log_dir is None or getattr(args, "spec", None) is not None:
        return
    from hylo.eval.store import check_log_dir

    check_log_dir(log_dir, writable=args.command not in ("runs", "compare"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_log_dir(args)
        if args.command in OPERATOR_IMPORT_COMMANDS:
            import_from_cwd()
        if args.command == "eval":
            return _eval(args)
        if args.command == "runs":
            return _runs(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "list":
            return _list(args)
        if args.command == "demo":
            return _demo(args)
        if args.command in ("graph", "nodes"):
            from hylo.graph.command import run as graph_command

            return graph_command(args)
        if args.command == "serve":
            from hylo.server.command import run as serve

            return serve(args)
        if args.command == "bridge":
            from hylo.bridges.command import run as bridge

            return bridge(args)
    except ValidationError as exc:
        return _fail(EXIT_BAD_INPUT, _validation_message(exc))
    except (HyloError, ValueError, LookupError) as exc:
        return _fail(EXIT_BAD_INPUT, str(exc))
    except KeyboardInterrupt:
        return _fail(EXIT_INTERRUPTED, "interrupted; re-run the same command to resume")
    parser.print_help()
    return 0


# -- eval --------------------------------------------------------------------------------------------------------------


def _spec_from_flags(args: argparse.Namespace) -> EvalSpec:
    from hylo.agents.registry import parse_agent_args
    from hylo.eval.spec import EvalSpec

    timing_options = {
        key: value
        for key, value in (
            ("refill_steps", args.refill_steps),
            ("max_hold_steps", args.max_hold_steps),
            ("latency_s", args.latency),
            ("clock", args.clock),
        )
        if value is not None
    }
    return EvalSpec(
        benchmark=args.benchmark,
        split=args.split,
        tasks=args.tasks,
        agent=args.agent,
        agent_args=parse_agent_args(args.agent_args),
        timing=args.timing,
        timing_options=timing_options,
        **run_options(args),
    )


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The EvalSpec fields of the options `_add_run_options` added (shared by `hylo eval` and `hylo graph run`)."""
    return {
        "episodes": args.episodes,
        "seed": args.seed,
        "max_steps": args.max_steps,
        "act_timeout": args.act_timeout,
        "shield": not args.no_shield,
        "log_dir": str(args.log_dir),
        "run_id": args.run_id,
        "fresh": args.fresh,
        "video": args.video,
        "strict": args.strict,
        "workers": args.workers,
        "backend": args.backend,
        "address": args.address,
        "retry_infra": args.retry_infra,
        "max_infra_failures": args.max_infra_failures,
        "episode_timeout": args.episode_timeout,
        "env_timeout": args.env_timeout,
    }


def _spec_file(args: argparse.Namespace) -> EvalSpec:
    """`--spec FILE`: the whole spec as JSON (what the JobScheduler hands its jobs); spec flags are refused with it."""
    from hylo.eval.runner import EvalError
    from hylo.eval.spec import EvalSpec

    given = [flag for flag, value in (("benchmark", args.benchmark), ("--agent", args.agent)) if value is not None]
    if given:
        raise EvalError(f"--spec FILE holds the whole spec; drop {', '.join(given)}")
    try:
        data = json.loads(args.spec.read_text())
    except OSError as exc:
        raise EvalError(f"cannot read --spec {str(args.spec)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise EvalError(f"--spec {str(args.spec)!r} is not JSON: {exc}") from None
    return EvalSpec.model_validate(data)


def _eval(args: argparse.Namespace) -> int:
    from hylo.eval.runner import EvalError

    if args.spec is not None:
        spec = _spec_file(args)
    else:
        if args.benchmark is None or args.agent is None:
            missing = "a benchmark" if args.benchmark is None else "--agent"
            raise EvalError(f"hylo eval needs {missing} (or --spec FILE)")
        spec = _spec_from_flags(args)
    return run_evaluation(spec, json_out=args.json)


def run_evaluation(spec: EvalSpec, *, json_out: bool) -> int:
    """Run (or resume) `spec` with a progress bar on stderr; print the summary, or with `json_out` one JSON object on
    stdout. Returns the exit status."""
    from hylo.envs.quiet import stdout_to_stderr
    from hylo.eval.progress import ProgressBar
    from hylo.eval.report import print_summary
    from hylo.eval.runner import Evaluation
    from hylo.eval.writer import RunAborted

    _interrupt_on_sigterm()  # a scheduler's SIGTERM ends the run like Ctrl-C: finished episodes are committed first
    with stdout_to_stderr():  # simulators that print (minigrid, MuJoCo's C code) never reach stdout
        evaluation = Evaluation(spec)
        try:
            with ProgressBar(_console(stderr=True), f"{spec.benchmark} · {spec.agent}") as bar:
                evaluation.progress = bar.update
                result = evaluation.run()
        except Exception as exc:
            bad_input = isinstance(exc, (HyloError, ValueError, LookupError, ValidationError))
            if bad_input and not evaluation.started and not isinstance(exc, RunAborted):
                raise  # refused before anything ran: bad input, one line, exit 2
            what = str(exc) if isinstance(exc, RunAborted) else f"{type(exc).__name__}: {exc}"
            advice = "" if "resume" in what else "; fix the cause and re-run to resume"
            return _fail(EXIT_ABORTED, f"run {evaluation.run_id} aborted: {what}{advice}")
    if json_out:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
    else:
        console = _console()
        print_summary(console, f"{result.run_id}: {spec.agent} on {spec.benchmark}", result.per_task, result.summary)
        console.print(
            f"run {result.run_id}: {len(result.episodes)} episodes ({result.executed_now} run now), "
            f"log {result.log_dir}"
        )
    if spec.strict and (result.statuses.get("error", 0) or result.statuses.get("infra_invalid", 0)):
        return EXIT_STRICT
    return 0


def _interrupt_on_sigterm() -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


# -- runs, compare, list -----------------------------------------------------------------------------------------------


def _runs(args: argparse.Namespace) -> int:
    from hylo.eval.report import print_summary
    from hylo.eval.stats import summarize, summarize_by_task, summary_json
    from hylo.eval.store import EvalLog, delete_run, find_run, list_runs, records

    if args.runs_command == "list":
        runs = list_runs(args.log_dir)
        if args.json:
            listed = [
                {"run_id": r.run_id, "status": r.status, "n_done": r.n_done, "n_planned": r.n_planned}
                | {"benchmark": r.benchmark, "agent": r.agent}
                for r in runs
            ]
            sys.stdout.write(json.dumps(listed) + "\n")
            return 0
        console = _console()
        if not runs:
            console.print(f"no runs in {args.log_dir}")
        for r in runs:
            console.print(f"{r.run_id}  {r.status:<11} {r.n_done:>6}/{r.n_planned:<6} {r.benchmark}  {r.agent}")
        return 0
    if args.runs_command == "delete":
        removed = delete_run(args.log_dir, args.run)
        print(f"deleted {removed}")
        return 0
    with EvalLog.open(find_run(args.log_dir, args.run)) as log:
        info = log.info()
        final = log.final_episodes()
        if args.runs_command == "show":
            recs = records(final)
            if args.json:
                data: dict[str, Any] = {**info.to_json(), "summary": summary_json(recs)}
                sys.stdout.write(json.dumps(data) + "\n")
                return 0
            console = _console()
            console.print(
                f"run {info.run_id} · {info.status} · {info.n_done}/{info.n_planned} episodes · {info.agent} on "
                f"{info.benchmark} ({info.split}) · digest {info.digest}"
            )
            print_summary(console, info.run_id, summarize_by_task(recs), summarize(recs))
            for row in final:
                if row.status.value in ("error", "infra_invalid", "safety_abort"):
                    console.print(f"  {row.episode_id}  {row.status.value}: {row.reason}", highlight=False)
            return 0
        export: dict[str, Any] = {**info.to_json(), "episodes": [], "attempts": []}
        export["episodes"] = [row.to_json() for row in final]
        export["attempts"] = [row.to_json() for row in log.attempts()]
        if args.traces:
            for entry in export["attempts"]:
                entry["trace"] = log.trace(entry["episode_id"], entry["attempt"])
        sys.stdout.write(json.dumps(export) + "\n")
        return 0


def _compare(args: argparse.Namespace) -> int:
    from hylo.eval.report import no_pairs_message, pairing_note, print_comparison
    from hylo.eval.stats import NoPairs, compare_runs
    from hylo.eval.store import EvalLog, find_run, records

    loaded = []
    for run in (args.run_a, args.run_b):
        with EvalLog.open(find_run(args.log_dir, run)) as log:
            loaded.append((log.info(), records(log.final_episodes())))
    (info_a, a), (info_b, b) = loaded
    name_a, name_b = info_a.run_id, info_b.run_id
    try:
        comparison = compare_runs(a, b)
    except NoPairs as exc:
        return _fail(EXIT_BAD_INPUT, no_pairs_message(info_a, info_b, exc))
    if comparison.partial:
        print(f"hylo: warning: {pairing_note(info_a, info_b, comparison)}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps({"run_a": name_a, "run_b": name_b, **comparison.to_json()}) + "\n")
    else:
        print_comparison(_console(), name_a, name_b, comparison, max_flips=None if args.all_flips else 50)
    return 0


def _list(args: argparse.Namespace) -> int:
    if args.what == "benchmarks":
        from hylo.envs.benchmark import get_benchmark, registered_benchmarks

        rows: list[dict[str, Any]] = []
        for name, target in registered_benchmarks().items():
            try:
                bench = get_benchmark(name)
                available, why = bench.available()
                splits = {split: len(bench.tasks(split)) for split in bench.splits()}
                rows.append({"name": name, "target": target, "available": available, "why": why, "splits": splits})
            except Exception as exc:
                rows.append({"name": name, "target": target, "available": False, "why": str(exc), "splits": {}})
        rows.append({"name": "gym:<id>", "target": "hylo.envs.gym_adapter:GymBenchmark", "available": True})
        if args.json:
            sys.stdout.write(json.dumps(rows) + "\n")
            return 0
        console = _console()
        for row in rows:
            splits_text = ", ".join(f"{s} ({n} tasks)" for s, n in row.get("splits", {}).items())
            state = "" if row["available"] else f"  unavailable: {row['why']}"
            console.print(f"{row['name']:<12} {splits_text or 'any gymnasium id'}{state}", highlight=False)
        return 0
    from hylo.agents.registry import registered_agents

    agents = registered_agents()
    if args.json:
        sys.stdout.write(json.dumps(agents) + "\n")
        return 0
    console = _console()
    width = max(len(name) for name in [*agents, "module:Class"])
    for name, target in agents.items():
        console.print(f"{name:<{width}} {target}", highlight=False)
    console.print(
        f"{'module:Class':<{width}} any class on the Python path or in the current directory, built as Class(**args) "
        "from -A key=value"
    )
    return 0


# -- demo --------------------------------------------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    console = _console()
    if args.builtin:
        from hylo.demo import render, run_demo

        rows = run_demo(episodes=args.episodes, seed=args.seed, trace=args.trace)
        render(rows, console)
        if args.trace is not None:
            console.print(f"trace: {args.trace}")
        return 0
    from hylo.demo import run_real_demo

    return run_real_demo(console, episodes=args.episodes, seed=args.seed, log_dir=args.log_dir)


if __name__ == "__main__":
    sys.exit(main())
