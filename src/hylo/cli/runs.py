"""`hylo runs` and `hylo compare`: the EvalLogs under a log directory, one run's summary, two runs paired."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hylo.cli.arguments import add_json, add_log_dir
from hylo.cli.evaluate import dataset_line
from hylo.cli.output import EXIT_BAD_INPUT, console, fail
from hylo.core.status import EpisodeStatus
from hylo.evallog.logdir import delete_run, find_run

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers


def add_parser(commands: Subparsers) -> None:
    """Add `runs` (with its actions `list`, `show`, `export` and `delete`) and `compare` to `hylo`'s commands."""
    runs = commands.add_parser("runs", help="list, show, export or delete evaluation runs")
    runs_commands = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True, parser_class=type(runs))
    runs_list = runs_commands.add_parser("list", help="every run in the log dir")
    add_log_dir(runs_list)
    add_json(runs_list)
    for name, help_ in (("show", "a run's summary"), ("export", "a run's full record"), ("delete", "delete a run")):
        sub = runs_commands.add_parser(name, help=help_)
        sub.add_argument("run", help="run id (or a unique prefix)")
        add_log_dir(sub)
        if name == "export":
            sub.add_argument(
                "--format",
                choices=("json", "lerobot", "rrd"),
                default="json",
                help="json: the run's record on stdout; lerobot: its recorded episodes as a LeRobot dataset (--out); "
                "rrd: its episodes as a Rerun recording (-o FILE.rrd, hylo[rerun])",
            )
            sub.add_argument("--traces", action="store_true", help="json: include every episode's trace events")
            sub.add_argument(
                "-o",
                "--out",
                type=Path,
                default=None,
                metavar="PATH",
                help="lerobot: the new directory; rrd: the .rrd file (replaced if it exists)",
            )
            sub.add_argument(
                "--episodes",
                nargs="+",
                action="extend",
                default=None,
                metavar="ID",
                help="rrd: only these episodes (their ids, as `hylo runs export RUN` lists them)",
            )
            sub.add_argument(
                "--status",
                dest="statuses",
                nargs="+",
                action="extend",
                default=None,
                choices=[status.value for status in EpisodeStatus],
                metavar="S",
                help="lerobot, rrd: only the episodes of these statuses (success, failure, timeout, error, "
                "infra_invalid)",
            )
        if name == "show":
            add_json(sub)

    compare = commands.add_parser("compare", help="pair two runs' episodes and test the difference (McNemar)")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    add_log_dir(compare)
    add_json(compare)
    compare.add_argument("--all-flips", action="store_true", help="list every flipped episode (default: 50)")


def run(args: argparse.Namespace) -> int:
    """`hylo runs ACTION` or `hylo compare`."""
    return run_compare(args) if args.command == "compare" else run_runs(args)


def run_runs(args: argparse.Namespace) -> int:
    """`hylo runs list|show|export|delete`."""
    from hylo.evallog.realtime_metrics import episode_realtime, run_realtime  # start-up time: the report tables
    from hylo.evallog.report import (  # start-up time: the report tables
        detectable_note,
        print_reasons,
        print_summary,
        realtime_table,
        seeds_note,
        suite_lines,
        timing_note,
    )
    from hylo.evallog.store import EvalLog, list_runs, records  # start-up time: the EvalLog reader
    from hylo.stats.planning import detectable_difference  # start-up time: the statistics
    from hylo.stats.success import (  # start-up time: the statistics
        seed_clusters,
        summarize,
        summarize_by_task,
        summary_json,
    )
    from hylo.stats.suite import suite_figures  # start-up time: the statistics

    if args.runs_command == "list":
        from hylo.evallog.run_list import listed, print_runs  # start-up time: the run list

        runs = list_runs(args.log_dir)
        if args.json:
            sys.stdout.write(json.dumps([listed(r) for r in runs]) + "\n")
            return 0
        out = console()
        if not runs:
            out.print(f"no runs in {args.log_dir}", highlight=False)
        else:
            print_runs(out, runs)
        return 0
    if args.runs_command == "delete":
        removed = delete_run(args.log_dir, args.run)
        print(f"deleted {removed}")
        return 0
    if args.runs_command == "export" and args.format == "lerobot":
        return _export_dataset(args)
    if args.runs_command == "export" and args.format == "rrd":
        return _export_rrd(args)
    if args.runs_command == "export" and (misplaced := _file_flag(args)) is not None:
        return fail(EXIT_BAD_INPUT, f"{misplaced}; --format json writes the whole run on stdout")
    with EvalLog.open(find_run(args.log_dir, args.run)) as log:
        info = log.info()
        final = log.final_episodes()
        if args.runs_command == "show":
            # start-up time: the evaluation stack
            from hylo.eval.code_identity import CodeIdentity, code_changes, code_note
            from hylo.evallog.run_list import agent_text  # start-up time: the run list

            changes = code_changes(args.log_dir, info)
            recs = records(final)
            overall = summarize(recs)
            suite = suite_figures(recs)
            realtime = run_realtime(final)
            detectable = (
                detectable_difference(overall.success_rate, overall.scored)
                if overall.success_rate is not None
                else None
            )
            if args.json:
                data: dict[str, Any] = {**info.to_json(), "summary": summary_json(recs)}
                data["detectable_difference"] = detectable
                data["suite"] = suite.to_json()
                data["code_changes"] = changes.to_json() if changes is not None else None
                clusters = seed_clusters(recs)
                if clusters is not None:
                    data["seed_clusters"] = clusters.to_json()
                if realtime is not None:
                    data["realtime"] = realtime.to_json()
                sys.stdout.write(json.dumps(data) + "\n")
                return 0
            out = console()
            out.print(
                f"run {info.run_id} · {info.status} · {info.n_done}/{info.n_planned} episodes · {agent_text(info)} on "
                f"{info.benchmark} ({info.split}) · digest {info.digest}",
                highlight=False,
            )
            out.print(timing_note(info.spec), highlight=False)
            for line in code_note(CodeIdentity.from_json(info.spec.get("code")), changes):
                out.print(line, highlight=False)
            print_summary(out, info.run_id, summarize_by_task(recs), overall)
            for i, line in enumerate(suite_lines(suite)):
                out.print(line, style="dim" if i else None, highlight=False)
            clustered = seed_clusters(recs)
            if clustered is not None:
                out.print(seeds_note(clustered), highlight=False)
            out.print(detectable_note(overall, detectable), style="dim", highlight=False)
            if realtime is not None:
                out.print(realtime_table(realtime))
            exporting = f"hylo runs export {info.run_id} --log-dir {shlex.quote(str(args.log_dir))}"
            print_reasons(out, final, limit=None, more=f"each episode's reason and detail: {exporting}")
            return 0
        export: dict[str, Any] = {**info.to_json(), "episodes": [], "attempts": []}
        export["episodes"] = [_with_realtime(row.to_json(), episode_realtime(row)) for row in final]
        export["attempts"] = [row.to_json() for row in log.attempts()]
        if args.traces:
            for entry in export["attempts"]:
                entry["trace"] = log.trace(entry["episode_id"], entry["attempt"])
        sys.stdout.write(json.dumps(export) + "\n")
        return 0


def _file_flag(args: argparse.Namespace) -> str | None:
    """Which flag of the file formats a `--format json` export was given, and whose it is; None when none was."""
    for flag, owner, value in (
        ("--out", "lerobot's or rrd's", args.out),
        ("--status", "lerobot's or rrd's", args.statuses),
        ("--episodes", "rrd's", args.episodes),
    ):
        if value is not None:
            return f"{flag} is --format {owner}"
    return None


def _export_dataset(args: argparse.Namespace) -> int:
    """`hylo runs export RUN --format lerobot --out DIR [--status S ...]`."""
    from hylo.evallog.lerobot_dataset import export_dataset  # start-up time: the dataset writer

    if args.traces:
        return fail(EXIT_BAD_INPUT, "--traces is --format json's; a LeRobot dataset holds the steps, not the events")
    if args.episodes is not None:
        return fail(EXIT_BAD_INPUT, "--episodes is --format rrd's; --format lerobot chooses episodes by --status")
    if args.out is None:
        return fail(EXIT_BAD_INPUT, "--format lerobot writes a dataset directory: give it with --out DIR")
    statuses = set(args.statuses) if args.statuses is not None else None
    written = export_dataset(find_run(args.log_dir, args.run), args.out, statuses=statuses)
    print(dataset_line(written))
    return 0


def _export_rrd(args: argparse.Namespace) -> int:
    """`hylo runs export RUN --format rrd -o FILE.rrd [--episodes ID ...] [--status S ...]`."""
    from hylo.evallog.rrd import export_rrd  # start-up time: the recording writer

    if args.traces:
        return fail(EXIT_BAD_INPUT, "--traces is --format json's; a Rerun recording holds every episode's events")
    if args.out is None:
        return fail(EXIT_BAD_INPUT, "--format rrd writes a Rerun recording: give its file with -o FILE.rrd")
    statuses = set(args.statuses) if args.statuses is not None else None
    written = export_rrd(find_run(args.log_dir, args.run), args.out, episodes=args.episodes, statuses=statuses)
    print(
        f"rerun: {written.path} ({written.episodes} episodes, {written.steps} steps, {written.frames} frames, "
        f"{written.size_bytes / 1e6:.1f} MB); open it with: rerun {shlex.quote(str(written.path))}"
    )
    return 0


def _with_realtime(entry: dict[str, Any], realtime: dict[str, Any] | None) -> dict[str, Any]:
    """An episode's JSON with its realtime figures beside it, when it ran under realtime timing."""
    return entry if realtime is None else {**entry, "realtime": realtime}


def run_compare(args: argparse.Namespace) -> int:
    """`hylo compare RUN_A RUN_B`."""
    # start-up time: the report tables
    from hylo.evallog.report import (
        improvement_lines,
        no_pairs_message,
        pairing_note,
        print_comparison,
        run_timing,
        timing_note,
    )
    from hylo.evallog.store import EvalLog, records  # start-up time: the EvalLog reader
    from hylo.stats.success import NoPairs, compare_runs, correlation_line  # start-up time: the statistics
    from hylo.stats.suite import improvement  # start-up time: the statistics

    loaded = []
    for run in (args.run_a, args.run_b):
        with EvalLog.open(find_run(args.log_dir, run)) as log:
            loaded.append((log.info(), records(log.final_episodes())))
    (info_a, a), (info_b, b) = loaded
    name_a, name_b = info_a.run_id, info_b.run_id
    try:
        comparison = compare_runs(a, b)
    except NoPairs as exc:
        return fail(EXIT_BAD_INPUT, no_pairs_message(info_a, info_b, exc))
    if comparison.partial:
        print(f"hylo: warning: {pairing_note(info_a, info_b, comparison)}", file=sys.stderr)
    timings = {"timing_a": run_timing(info_a.spec), "timing_b": run_timing(info_b.spec)}
    improved = improvement(a, b)
    if args.json:
        answer = {"run_a": name_a, "run_b": name_b, **timings, **comparison.to_json()}
        sys.stdout.write(json.dumps({**answer, "improvement": improved.to_json()}) + "\n")
    else:
        out = console()
        for name, info in ((name_a, info_a), (name_b, info_b)):
            out.print(f"{name}: {timing_note(info.spec)}", highlight=False)
        print_comparison(out, name_a, name_b, comparison, max_flips=None if args.all_flips else 50)
        out.print(correlation_line(comparison), highlight=False)
        for i, line in enumerate(improvement_lines(improved)):
            out.print(line, style="dim" if i else None, highlight=False)
    return 0
