"""`hylo report RUN [RUN ...] -o FILE`: one self-contained HTML file of runs (two of them paired as `hylo compare`
pairs them), with their tables, a chart, the episode list and short clips, held to a size; no server, no network."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hylo.argtypes import float_in, non_negative_int
from hylo.cli.arguments import add_log_dir
from hylo.cli.output import console

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers
    from hylo.evallog.html_report import Report, ReportRun

DEFAULT_OUT = Path("report.html")
MIB = 1024 * 1024
MAX_MB = 10_000.0


def _megabytes(text: str) -> float:
    """`--max-mb`: a size in MiB above 0, at most `MAX_MB`."""
    value = float_in(0.0, MAX_MB, f"a size in MiB > 0 and at most {MAX_MB:g}")(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a size in MiB > 0 and at most {MAX_MB:g}, got {text!r}")
    return value


def add_parser(commands: Subparsers) -> None:
    """Add `report` to `hylo`'s commands."""
    report = commands.add_parser("report", help="one self-contained HTML file of runs (two: paired), to send around")
    report.add_argument("runs", nargs="+", metavar="RUN", help="run id (or a unique prefix), or a run's directory")
    report.add_argument(
        "-o",
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="FILE",
        help=f"the HTML file to write (default {DEFAULT_OUT})",
    )
    add_log_dir(report)
    report.add_argument(
        "--clips",
        type=non_negative_int,
        default=2,
        metavar="N",
        help="embed media of the first N episodes of each task and status that recorded a video (default 2; 0: none)",
    )
    report.add_argument(
        "--max-mb",
        type=_megabytes,
        default=20.0,
        metavar="MB",
        help="the file's size bound in MiB: media are left out (and listed) past it (default 20)",
    )


def run(args: argparse.Namespace) -> int:
    """`hylo report`: read the runs, build the page, write it, and say what it holds."""
    # start-up time: the report's page and media
    from hylo.evallog.html_report import build_report

    _check_out(args.out)
    _check_distinct(args.runs)
    started = time.perf_counter()
    runs = [load_run(args.log_dir, name) for name in args.runs]
    built = build_report(runs, per_group=args.clips, max_bytes=int(args.max_mb * MIB))
    args.out.write_text(built.html, encoding="utf-8")
    _print_written(args.out, built, time.perf_counter() - started, int(args.max_mb * MIB))
    return 0


def load_run(log_dir: Path, name: str) -> ReportRun:
    """Run `name` (an id or prefix in `log_dir`, or the path of a run's directory) as a report shows it, with the
    lines `hylo runs show` says of its code."""
    from hylo.eval.code_identity import CodeIdentity, code_changes, code_note  # start-up time: the evaluation stack
    from hylo.evallog.html_report import ReportRun  # start-up time: the report's page and media
    from hylo.evallog.logdir import find_run  # start-up time: the EvalLog reader
    from hylo.evallog.store import EvalLog  # start-up time: the EvalLog reader

    run_dir, runs_dir = _located(log_dir, name), log_dir
    if run_dir is None:
        run_dir = find_run(log_dir, name)
    else:
        runs_dir = run_dir.parent
    with EvalLog.open(run_dir) as log:
        info = log.info()
        rows = log.final_episodes()
    code = code_note(CodeIdentity.from_json(info.spec.get("code")), code_changes(runs_dir, info))
    return ReportRun(info, rows, code)


def _located(log_dir: Path, name: str) -> Path | None:
    """`name` as a run's directory, when it is given as a path (it holds a separator, or names a directory that
    holds an EvalLog outside `log_dir`); None for a run id."""
    from hylo.evallog.logdir import FILENAME, RunNotFound  # start-up time: the EvalLog reader

    path = Path(name)
    if "/" not in name and not (path.is_dir() and not (log_dir / name).exists()):
        return None
    if not (path / FILENAME).is_file():
        raise RunNotFound(
            f"no run at {name!r}: it holds no {FILENAME}; give a run id from {log_dir} or a run's directory"
        )
    return path


def _check_distinct(names: list[str]) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"run {name!r} is given twice: each run appears once in a report")
        seen.add(name)


def _check_out(out: Path) -> None:
    """Refuse an output path that cannot be written before any run is read."""
    if out.is_dir():
        raise ValueError(f"-o {str(out)!r} is a directory: give the HTML file to write")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise ValueError(f"-o {str(out)!r}: directory {str(parent)!r} does not exist")


def _print_written(out: Path, built: Report, seconds: float, max_bytes: int) -> None:
    left = len(built.left_out)
    media = f"{built.clips} clips and {built.strips} frame strips embedded" + (
        f", {left} left out (listed in the page)" if left else ""
    )
    console().print(
        f"wrote {out} ({built.size / MIB:.2f} MiB in {seconds:.1f} s): {media}", highlight=False, soft_wrap=True
    )
    if built.size > max_bytes:
        print(
            f"hylo: warning: {out} is larger than --max-mb without any media: its tables alone take "
            f"{built.size / MIB:.2f} MiB",
            file=sys.stderr,
        )
