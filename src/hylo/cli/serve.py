"""`hylo serve`: the eval REST API on this machine. `add_parser` adds it to `hylo`'s commands and `run` runs it;
importing this module stays cheap (the server stack is imported when it runs)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from hylo.argtypes import port, positive_int
from hylo.secret_env import TOKEN_ENV
from hylo.server.binding import (
    DEFAULT_HOST,
    DEFAULT_MAX_QUEUED,
    DEFAULT_PORT,
    ServeRefused,
    check_binding,
    check_import,
)

EXIT_BAD_INPUT = 2


def add_parser(commands: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add `serve` to a subparsers object (`hylo`'s commands); returns its parser."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "serve", help="evaluations, graphs and live sessions behind an HTTP API (docs/api.md, docs/live.md)"
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--log-dir", type=Path, default=Path("hylo-runs"), help="where runs, the job queue and saved graphs are kept"
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"require 'Authorization: Bearer TOKEN' (default ${TOKEN_ENV}); needed to bind beyond loopback",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this host name (a reverse proxy's, a LAN name); repeatable",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages of this origin (http://host:port) change state; repeatable",
    )
    parser.add_argument(
        "--allow-ray",
        default=None,
        metavar="ADDRESS",
        help="let requests run jobs on Ray: this cluster's address, or 'local' for a Ray of each job's own",
    )
    parser.add_argument(
        "--allow-remote",
        action="append",
        default=[],
        metavar="URL_PREFIX",
        help="let requests use remote agents whose policy server is under this ws:// URL prefix; repeatable",
    )
    parser.add_argument(
        "--allow-import",
        action="store_true",
        help="let jobs name module:Class agents importable here (code from requests: loopback only, or with a token)",
    )
    parser.add_argument(
        "--max-queued",
        type=positive_int,
        default=DEFAULT_MAX_QUEUED,
        metavar="N",
        help=f"the most jobs waiting at once; more are answered 429 (default {DEFAULT_MAX_QUEUED})",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM (exit 0), once it answers printing the URL to open; 2 with one line when refused
    (no token off loopback, --allow-import reachable beyond loopback without a token, a malformed --allow-* flag, a
    port that cannot be bound, a log dir another scheduler owns)."""
    from hylo.jobs.errors import SchedulerBusy
    from hylo.server.access import ServerAccess
    from hylo.server.serve import serve

    from_env = os.environ.pop(TOKEN_ENV, None)  # no process the server starts inherits it
    token = args.token or from_env or None
    try:
        access = ServerAccess.of(
            args.host,
            allow_hosts=args.allow_host,
            allow_origins=args.allow_origin,
            allow_ray=args.allow_ray,
            allow_remote=args.allow_remote,
            allow_import=args.allow_import,
        )
    except ValueError as exc:
        print(f"hylo: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)  # uvicorn re-raises the signal once it has shut down

    def ready(url: str) -> None:
        ask = " (it asks for the token)" if token else ""
        print(f"hylo serve: open {url} in a browser{ask}; runs in {args.log_dir.resolve()}; Ctrl-C stops", flush=True)

    try:
        if args.allow_import:
            check_binding(args.host, token)  # the refusals first: a refused server changes nothing
            check_import(access.reachable_beyond_loopback, token)
            _import_from_here()
        serve(
            args.log_dir,
            host=args.host,
            port=args.port,
            token=token,
            access=access,
            max_queued=args.max_queued,
            on_ready=ready,
        )
    except (ServeRefused, SchedulerBusy) as exc:
        print(f"hylo: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 0
    except SystemExit as exc:  # uvicorn exits when its startup fails (the reason is logged)
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def _import_from_here() -> None:
    """`--allow-import`: a job's `module:Class` is checked here, on submission, and built in the job's own process
    (started in its job directory): both import from the directory the server was started in."""
    from hylo.cli import IMPORT_DIR_ENV, import_from_cwd

    import_from_cwd()
    os.environ[IMPORT_DIR_ENV] = os.getcwd()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
