"""The `hylo` command: `eval`, `ab`, `sweep`, `runs`, `compare`, `plan`, `list`, `demo`, `graph`, `nodes`, `serve`,
`bridge`.

Exit status: 0 when a run completes (whatever its episodes' statuses); 3 with `--strict` when an episode is `error`
or `infra_invalid`; 2 with one line naming the bad value for bad input; 1 for an aborted run; 130 when interrupted
(Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from hylo.cli.output import EXIT_BAD_INPUT, EXIT_INTERRUPTED, fail, validation_message
from hylo.cli.parser import build_parser
from hylo.core.errors import HyloError, HyloFailure

__all__ = ["build_parser", "import_from_cwd", "main"]

OPERATOR_IMPORT_COMMANDS = ("eval", "ab", "sweep", "graph", "bridge")
"""The commands that take import paths (`--agent mypkg.policies:MyPolicy`): the operator's own code, found in the
current directory as under `python -m`."""


IMPORT_DIR_ENV = "HYLO_IMPORT_DIR"
"""The directory `hylo serve --allow-import` was started in, which its jobs import from as from their own."""


def import_from_cwd() -> None:
    """Put the current directory on the import path (after the installed packages, so a stray file there never
    shadows a module hylo imports), and the directory of the `hylo serve --allow-import` that started this job.
    Process workers inherit the path; Ray's workers get the driver's directory."""
    for directory in (os.getcwd(), os.environ.get(IMPORT_DIR_ENV)):
        if directory and directory not in sys.path:
            sys.path.append(directory)


def _check_log_dir(args: argparse.Namespace) -> None:
    """Refuse a `--log-dir` that cannot hold runs before anything runs (a `--spec` file's own is the runner's to
    check)."""
    log_dir = getattr(args, "log_dir", None)
    if log_dir is None or getattr(args, "spec", None) is not None:
        return
    from hylo.evallog.logdir import check_log_dir

    reading = args.command in ("runs", "compare") or (
        args.command in ("ab", "sweep") and args.benchmark in ("show", "list")
    )
    check_log_dir(log_dir, writable=not reading)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_log_dir(args)
        if args.command in OPERATOR_IMPORT_COMMANDS:
            import_from_cwd()
        if args.command == "eval":
            from hylo.cli.evaluate import run as evaluate

            return evaluate(args)
        if args.command == "runs":
            from hylo.cli.runs import run_runs

            return run_runs(args)
        if args.command == "compare":
            from hylo.cli.runs import run_compare

            return run_compare(args)
        if args.command == "ab":
            from hylo.cli.ab import run as ab

            return ab(args)
        if args.command == "sweep":
            from hylo.cli.sweep import run as sweep

            return sweep(args)
        if args.command == "plan":
            from hylo.cli.plan import run as plan

            return plan(args)
        if args.command == "list":
            from hylo.cli.listing import run as list_command

            return list_command(args)
        if args.command == "demo":
            from hylo.cli.demo import run as demo

            return demo(args)
        if args.command in ("graph", "nodes"):
            from hylo.cli.graph import run as graph_command

            return graph_command(args)
        if args.command == "serve":
            from hylo.cli.serve import run as serve

            return serve(args)
        if args.command == "bridge":
            from hylo.cli.bridge import run as bridge

            return bridge(args)
    except ValidationError as exc:
        return fail(EXIT_BAD_INPUT, validation_message(exc))
    except HyloFailure:
        raise  # broke at run time: not bad input
    except (HyloError, ValueError, LookupError) as exc:
        return fail(EXIT_BAD_INPUT, str(exc))
    except KeyboardInterrupt:
        return fail(EXIT_INTERRUPTED, "interrupted; re-run the same command to resume")
    parser.print_help()
    return 0
