"""`hylo sweep`: one agent at every latency d × execution horizon s of the chunked-execution protocol, a run per grid
point on the same episodes, success against latency; `hylo sweep show ID` and `hylo sweep list`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hylo.argtypes import non_negative_int, positive_int
from hylo.cli.arguments import JSON_HELP, add_agent, add_json, add_placement, add_run_options
from hylo.cli.evaluate import abort_cause, run_options, spec_from_flags
from hylo.cli.output import EXIT_ABORTED, console, fail
from hylo.evallog.logdir import SWEEPS_DIR

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers
    from hylo.eval.runner import Evaluation
    from hylo.experiments.sweep import GridPoint


def add_parser(commands: Subparsers) -> None:
    """Add `sweep` to `hylo`'s commands: the run options it shares with `eval`, but for the single `--latency-steps`
    and `--execution-steps`, which a sweep takes as lists."""
    sweep = commands.add_parser(
        "sweep",
        help="success against latency: a run per latency d x execution horizon s (sweep show ID, sweep list)",
    )
    sweep.add_argument("benchmark", help="the benchmark (or `show`, then the sweep id; or `list`)")
    sweep.add_argument("sweep_id", nargs="?", help=argparse.SUPPRESS)
    add_placement(sweep, task_flags=("--task", "--tasks"))
    add_agent(sweep, "the agent (a chunked policy: it declares chunk_size H)")
    add_run_options(sweep, grid=False)
    sweep.add_argument(
        "--latency-steps", type=non_negative_int, nargs="+", default=None, metavar="D",
        help="the latencies d to sweep, in control steps (e.g. 0 1 2 3 4)",
    )  # fmt: skip
    sweep.add_argument(
        "--execution-steps", type=positive_int, nargs="+", default=None, metavar="S",
        help="the execution horizons s to sweep (default: the agent's own); points outside max(1, d) <= s <= H - d "
        "are refused",
    )  # fmt: skip
    sweep.add_argument(
        "--reuse-runs", action="store_true", help="run each point on the run hylo eval made for it, extending it"
    )
    add_json(sweep, JSON_HELP)


def run(args: argparse.Namespace) -> int:
    """`hylo sweep`, `hylo sweep show ID` and `hylo sweep list`."""
    from hylo.experiments.sweep import SweepError, list_sweeps, read_sweep  # start-up time: the experiments stack

    if args.benchmark == "show":
        if args.sweep_id is None:
            raise SweepError("hylo sweep show needs the sweep id (sweep-...)")
        _print(read_sweep(args.log_dir, args.sweep_id), args.log_dir, json_out=args.json)
        return 0
    if args.benchmark == "list":
        _print_list(list_sweeps(args.log_dir), json_out=args.json)
        return 0
    return _sweep(args)


def base_spec(args: argparse.Namespace) -> Any:
    """The sweep's base spec from the flags: every run option, the agent and its arguments, and the timing options
    each point keeps (strategy, ensemble_m, max_hold_steps)."""
    from hylo.experiments.sweep import SweepError  # start-up time: the experiments stack

    if args.sweep_id is not None:
        raise SweepError(f"hylo sweep takes one benchmark, got {args.benchmark!r} and {args.sweep_id!r}")
    if args.agent is None:
        raise SweepError("hylo sweep needs --agent (the policy to sweep)")
    if args.latency_steps is None:
        raise SweepError("hylo sweep needs --latency-steps D [D ...] (the latencies to sweep, in control steps)")
    if getattr(args, "protocol", None) is not None:
        raise SweepError(f"a sweep sets the latency itself at every grid point; drop --protocol {args.protocol}")
    options = run_options(args, grid=False)
    if options.pop("protocol", None) is not None:
        raise SweepError("a sweep sets the latency itself at every grid point; drop --protocol")
    timing_options = dict(options.pop("timing_options", None) or {})
    if options.pop("timing", None) == "sync":
        raise SweepError("a sweep runs every grid point under realtime timing; drop --timing sync")
    return spec_from_flags(args, {**options, "timing": "realtime", "timing_options": timing_options})


def _sweep(args: argparse.Namespace) -> int:
    from hylo.envs.quiet import stdout_to_stderr  # start-up time: the envs package
    from hylo.eval.progress import ProgressBar  # start-up time: the evaluation stack
    from hylo.experiments.sweep import GridPoint, run_sweep  # start-up time: the experiments stack
    from hylo.experiments.sweep_plot import horizon_label  # start-up time: matplotlib

    base = base_spec(args)
    current: list[Evaluation] = []

    @contextmanager
    def watch(point: GridPoint, evaluation: Evaluation) -> Iterator[None]:
        current[:] = [evaluation]
        title = f"{base.benchmark} · {base.agent} · d = {point.latency_steps}, {horizon_label(point.execution_steps)}"
        with ProgressBar(console(stderr=True), title) as bar:
            evaluation.progress = bar.update
            yield

    with stdout_to_stderr():  # simulators that print never reach stdout
        try:
            result = run_sweep(base, args.latency_steps, args.execution_steps, watch=watch, reuse_runs=args.reuse_runs)
        except Exception as exc:
            evaluation = current[0] if current else None
            what = abort_cause(exc, evaluation)
            if evaluation is None or what is None:
                raise  # refused before anything ran: bad input, one line, exit 2
            return fail(EXIT_ABORTED, f"run {evaluation.run_id} of the sweep aborted: {what}; re-run to resume")
    if args.reuse_runs:
        out = console(stderr=args.json)  # --json: stdout holds the record alone
        for point in result.record["points"]:
            logged = (result.logged_before or {}).get(GridPoint(point["latency_steps"], point["execution_steps"]), 0)
            out.print(reused_note(point, logged), highlight=False)
    _print(result.record, args.log_dir, json_out=args.json)
    return 0


def reused_note(point: dict[str, Any], logged: int) -> str:
    """What `--reuse-runs` did with a point's run: took the run `hylo eval` made, or made the one it would resume."""
    where = f"d = {point['latency_steps']}, s = {point['execution_steps'] or 'own'}"
    if logged:
        episodes = f"{logged} episode" + ("s" if logged != 1 else "")
        return f"{where}: --reuse-runs: reusing run {point['run_id']} ({episodes} already in it)"
    return f"{where}: --reuse-runs: no run of this configuration yet; made {point['run_id']}, which hylo eval resumes"


def _print(record: dict[str, Any], log_dir: Path, *, json_out: bool) -> None:
    directory = log_dir.resolve() / SWEEPS_DIR / record["sweep_id"]
    if json_out:
        sys.stdout.write(json.dumps({**record, "directory": str(directory)}) + "\n")
        return
    from rich.table import Table  # start-up time: the tables

    from hylo.experiments.sweep_plot import horizon_label  # start-up time: matplotlib

    out = console()
    chunk = f", H = {record['chunk_size']}" if record.get("chunk_size") is not None else ""
    tasks = ", ".join(record.get("tasks") or []) or "every task"
    kept = "".join(f", {key} {value}" for key, value in (record.get("timing_options") or {}).items())
    reused = ", on the runs hylo eval made (--reuse-runs)" if record.get("reuse_runs") else ""
    out.print(f"sweep {record['sweep_id']}: {record['agent']} on {record['benchmark']} ({tasks}){chunk}, "
              f"{record['episodes']} episodes per task{kept}{reused}", highlight=False)  # fmt: skip
    table = Table(title="success against latency d (control steps) and execution horizon s")
    for column in ("d", "s", "success rate", "95% CI", "scored", "McNemar p vs d = 0", "run"):
        table.add_column(column, justify="left" if column == "run" else "right", no_wrap=True)
    for point in record["points"]:
        rate, ci, p = point["success_rate"], point["success_ci"], point["mcnemar_p"]
        table.add_row(
            str(point["latency_steps"]),
            horizon_label(point["execution_steps"]).removeprefix("s = "),
            "—" if rate is None else f"{rate:.3f}",
            "—" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
            f"{point['scored']}/{point['n']}",
            "—" if p is None else f"{p:.3g}",
            point["run_id"],
        )
    out.print(table)
    for refused in record["refused"]:
        out.print(f"refused d = {refused['latency_steps']}, s = {refused['execution_steps']}: {refused['reason']}",
                  highlight=False)  # fmt: skip
    out.print(f"plot: {directory / record['plot']['png']} and {directory / record['plot']['svg']}", highlight=False)


def _print_list(records: list[dict[str, Any]], *, json_out: bool) -> None:
    if json_out:
        sys.stdout.write(json.dumps({"sweeps": [_listed(record) for record in records]}) + "\n")
        return
    out = console()
    if not records:
        out.print("no sweep yet: hylo sweep BENCH --agent A --latency-steps 0 1 2 records one", highlight=False)
    for record in map(_listed, records):
        out.print(f"{record['sweep_id']}  {record['agent']} on {record['benchmark']}  d {record['latency_steps']}  "
                  f"s {record['execution_steps'] or 'own'}  {record['points']} points", highlight=False)  # fmt: skip


def _listed(record: dict[str, Any]) -> dict[str, Any]:
    """A sweep as listed: its id, agent, benchmark, grid and how many points ran."""
    return {
        "sweep_id": record.get("sweep_id"),
        "benchmark": record.get("benchmark"),
        "agent": record.get("agent"),
        "latency_steps": record.get("latency_steps"),
        "execution_steps": record.get("execution_steps"),
        "points": len(record.get("points") or []),
    }
