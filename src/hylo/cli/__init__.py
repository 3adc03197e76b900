"""The `hylo` command: `eval`, `ab`, `sweep`, `runs`, `compare`, `report`, `plan`, `list`, `demo`, `graph`, `nodes`,
`serve`, `bridge`.

Each command is a module of this package with `add_parser(commands)`, which adds the command (or two) to `hylo`'s,
and `run(args) -> int`, which runs it; `COMMANDS` maps every command's name to its module, and `main` dispatches
through it. Command modules stay cheap to import: each imports what its command runs on (the evaluation stack, the
server, ...) when it runs.

Exit status: 0 when a run completes (whatever its episodes' statuses); 3 with `--strict` when an episode is `error`
or `infra_invalid`; 2 with one line naming the bad value for bad input; 1 for an aborted run; 130 when interrupted
(Ctrl-C or SIGTERM). `hylo.cli.output.exit_code` maps an exception to its status.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from hylo.cli import ab, bridge, demo, evaluate, graph, listing, plan, report, runs, serve, sweep
from hylo.cli.arguments import Parser
from hylo.cli.operator_code import IMPORT_DIR_ENV, import_from_cwd
from hylo.cli.output import EXIT_ABORTED, exit_code
from hylo.cli.output import report as report_error
from hylo.evallog.logdir import check_log_dir
from hylo.version import __version__

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers

__all__ = ["COMMANDS", "IMPORT_DIR_ENV", "OPERATOR_IMPORT_COMMANDS", "build_parser", "import_from_cwd", "main"]


class Command(Protocol):
    """A command module."""

    def add_parser(self, commands: Subparsers) -> None:
        """Add the module's command (or commands) to `hylo`'s."""

    def run(self, args: argparse.Namespace) -> int:
        """Run the command `args.command` as parsed; returns the exit status."""


COMMANDS: Mapping[str, Command] = {
    "eval": evaluate,
    "runs": runs,
    "compare": runs,
    "report": report,
    "ab": ab,
    "sweep": sweep,
    "plan": plan,
    "list": listing,
    "demo": demo,
    "graph": graph,
    "nodes": graph,
    "serve": serve,
    "bridge": bridge,
}
"""Every command by name, in the order `hylo --help` lists them: the module that adds it and runs it."""

OPERATOR_IMPORT_COMMANDS = ("eval", "ab", "sweep", "graph", "bridge")
"""The commands that take import paths (`--agent mypkg.policies:MyPolicy`): the operator's own code, found in the
current directory as under `python -m`."""


def build_parser() -> argparse.ArgumentParser:
    """`hylo`'s parser: every command of `COMMANDS`, each added by its module."""
    parser = Parser(prog="hylo", description="Truthful, fast, reproducible evaluation of embodied agents.")
    parser.add_argument("--version", action="version", version=f"hylo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in dict.fromkeys(COMMANDS.values()):
        command.add_parser(commands)
    return parser


def _check_log_dir(args: argparse.Namespace) -> None:
    """Refuse a `--log-dir` that cannot hold runs before anything runs (a `--spec` file's own is the runner's to
    check)."""
    log_dir = getattr(args, "log_dir", None)
    if log_dir is None or getattr(args, "spec", None) is not None:
        return
    reading = args.command in ("runs", "compare", "report") or (
        args.command in ("ab", "sweep") and args.benchmark in ("show", "list")
    )
    check_log_dir(log_dir, writable=not reading)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `hylo` with `argv` (default: the process's arguments); returns the exit status. Bad input and interruption
    end in one error line (`hylo.cli.output.report`); a failure at run time keeps its traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        _check_log_dir(args)
        if args.command in OPERATOR_IMPORT_COMMANDS:
            import_from_cwd()
        return COMMANDS[args.command].run(args)
    except (Exception, KeyboardInterrupt) as exc:
        if exit_code(exc) == EXIT_ABORTED:
            raise  # broke at run time (a HyloFailure, a bug): not bad input
        return report_error(exc)
