"""`hylo serve`: the eval REST API on this machine. `add_parser` adds it to `hylo`'s commands and `run` runs it;
importing this module stays cheap (the server stack is imported when it runs)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from hylo.argtypes import port, positive_int
from hylo.cli.arguments import add_log_dir
from hylo.cli.operator_code import IMPORT_DIR_ENV, import_from_cwd
from hylo.cli.output import report
from hylo.secret_env import TOKEN_ENV
from hylo.server.binding import (
    DEFAULT_HOST,
    DEFAULT_MAX_QUEUED,
    DEFAULT_PORT,
    ServeRefused,
    check_serving,
    check_token,
    new_token,
    token_url,
)

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers


def add_parser(commands: Subparsers) -> None:
    """Add `serve` to a subparsers object (`hylo`'s commands)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "serve", help="evaluations, graphs and live sessions behind an HTTP API (docs/api.md, docs/live.md)"
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    add_log_dir(parser, "where runs, the job queue and saved graphs are kept")
    parser.add_argument(
        "--token",
        default=None,
        help=f"the token every request must carry, 16 characters or more (default ${TOKEN_ENV}, else a random one, "
        "printed in the URL to open)",
    )
    parser.add_argument(
        "--no-token",
        action="store_true",
        help="serve without a token, on loopback only: any user of this machine may then use the server as you",
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="believe X-Forwarded-For and X-Forwarded-Proto from this proxy's address or network; repeatable",
    )
    parser.add_argument(
        "--docs",
        action="store_true",
        help="serve the interactive API docs at /docs and /redoc (their scripts come from a CDN)",
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
        help="let jobs name module:Class agents importable here (code from requests: never with --no-token)",
    )
    parser.add_argument(
        "--max-queued",
        type=positive_int,
        default=DEFAULT_MAX_QUEUED,
        metavar="N",
        help=f"the most jobs waiting at once; more are answered 429 (default {DEFAULT_MAX_QUEUED})",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM (exit 0), once it answers printing the URL to open (with the token it made, unless
    given one or told `--no-token`); 2 with one line when refused (a token too short, no token off loopback or with
    --allow-import, a malformed --allow-* or --trusted-proxy flag, a port that cannot be bound, a log dir another
    scheduler owns)."""
    from hylo.jobs.errors import SchedulerBusy  # start-up time: the server stack
    from hylo.server.access import ServerAccess  # start-up time: the server stack
    from hylo.server.serve import serve  # start-up time: the server stack

    from_env = os.environ.pop(TOKEN_ENV, None)  # no process the server starts inherits it
    try:
        token, made = _token(args.token, from_env or None, no_token=args.no_token)
        access = ServerAccess.of(
            args.host,
            allow_hosts=args.allow_host,
            allow_origins=args.allow_origin,
            allow_ray=args.allow_ray,
            allow_remote=args.allow_remote,
            allow_import=args.allow_import,
            trusted_proxies=args.trusted_proxy,
        )
    except (ValueError, ServeRefused) as exc:
        return report(exc)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)  # uvicorn re-raises the signal once it has shut down

    def ready(url: str) -> None:
        if token is None:
            how = " (no token: any user of this machine may use this server as you)"
        elif made:
            url, how = token_url(url, token), ""
        else:
            how = " (it asks for the token)"
        print(f"hylo serve: open {url} in a browser{how}; runs in {args.log_dir.resolve()}; Ctrl-C stops", flush=True)
        _warn_if_open(args.log_dir)

    try:
        check_serving(  # the refusals first: a refused server changes nothing
            args.host,
            token,
            reachable_beyond_loopback=access.reachable_beyond_loopback,
            allow_import=args.allow_import,
        )
        if args.allow_import:
            _import_from_here()
        serve(
            args.log_dir,
            host=args.host,
            port=args.port,
            token=token,
            access=access,
            max_queued=args.max_queued,
            on_ready=ready,
            docs=args.docs,
        )
    except (ServeRefused, SchedulerBusy) as exc:
        return report(exc)
    except KeyboardInterrupt:
        return 0
    except SystemExit as exc:  # uvicorn exits when its startup fails (the reason is logged)
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def _token(given: str | None, from_env: str | None, *, no_token: bool) -> tuple[str | None, bool]:
    """The server's token and whether it was made here: `--token`, else `$HYLO_TOKEN`, else a new random one; None
    with `--no-token` (which a token given as well contradicts: `ServeRefused`)."""
    if no_token:
        if given is not None or from_env is not None:
            raise ServeRefused(f"--no-token, and a token is given (--token or {TOKEN_ENV}): give one or the other")
        return None, False
    chosen = given if given is not None else from_env
    if chosen is None:
        return new_token(), True
    check_token(chosen)
    return chosen, False


def _warn_if_open(log_dir: Path) -> None:
    """Say so when other users may enter the log dir: one made by this server is its user's alone, one that existed
    is left as its owner set it (a chmod could break what else uses it)."""
    try:
        mode = log_dir.stat().st_mode & 0o777
    except OSError:
        return
    if mode & 0o077:
        print(
            f"hylo serve: warning: other users may read {log_dir.resolve()} (mode {mode:04o}): "
            f"`chmod 700 {log_dir.resolve()}` keeps its runs yours",
            file=sys.stderr,
            flush=True,
        )


def _import_from_here() -> None:
    """`--allow-import`: a job's `module:Class` is checked here, on submission, and built in the job's own process
    (started in its job directory): both import from the directory the server was started in."""
    import_from_cwd()
    os.environ[IMPORT_DIR_ENV] = os.getcwd()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
