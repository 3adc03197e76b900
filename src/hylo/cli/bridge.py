"""`hylo bridge vlaeval`: serve a hylo agent to vla-eval's benchmark client. `add_parser` adds `bridge` to `hylo`'s
commands and `run` runs it; importing this module stays cheap (the server stack is imported when it runs)."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.agents.remote_limits import MAX_ACTION_DIM
from hylo.argtypes import float_in, int_in, port
from hylo.bridges.limits import (
    DEFAULT_BATCH_WAIT_MS,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_FRAME_BYTES,
    MAX_BATCH_WAIT_MS,
)
from hylo.cli.arguments import add_log_dir
from hylo.cli.output import EXIT_BAD_INPUT, fail
from hylo.core.shield import SafetyShield
from hylo.hosts import HostPolicy, is_loopback

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers

DEFAULT_HOST = "127.0.0.1"

MAX_FRAME_MB = 4096
MAX_CONNECTIONS = 1024
MAX_IDLE_TIMEOUT_S = 86400.0
_MAX_NAME = 253  # the longest DNS name

_action_dim = int_in(1, MAX_ACTION_DIM, f"an action length from 1 to {MAX_ACTION_DIM}")
_max_connections = int_in(1, MAX_CONNECTIONS, f"a number of connections from 1 to {MAX_CONNECTIONS}")
_batch = int_in(1, MAX_CONNECTIONS, f"a batch size from 1 to {MAX_CONNECTIONS}")


def _bound(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return value


def _megabytes(text: str) -> int:
    expected = f"expected a size in MiB (> 0, at most {MAX_FRAME_MB}), got {text!r}"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(expected) from None
    if not 0 < value <= MAX_FRAME_MB or value * 2**20 < 1:
        raise argparse.ArgumentTypeError(expected)
    return int(value * 2**20)


def _seconds(text: str) -> float:
    expected = f"expected a number of seconds (> 0, at most {MAX_IDLE_TIMEOUT_S:g}), got {text!r}"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(expected) from None
    if not 0 < value <= MAX_IDLE_TIMEOUT_S:
        raise argparse.ArgumentTypeError(expected)
    return value


_wait_ms = float_in(0.0, MAX_BATCH_WAIT_MS, f"a number of milliseconds from 0 to {MAX_BATCH_WAIT_MS:g}")


def _address(text: str) -> str:
    """A bind address: a name or an IP address (brackets around an IPv6 one are dropped)."""
    name = text.strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name or len(name) > _MAX_NAME or any(c.isspace() or not c.isprintable() or c in "/[]@" for c in name):
        raise argparse.ArgumentTypeError(f"expected an address to bind, such as 127.0.0.1, got {text!r}")
    return name


def _allowed(what: str, key: str, longest: int) -> Callable[[str], str]:
    """An argparse type for `--allow-host` / `--allow-origin` values: what `HostPolicy.of` accepts as `key`."""

    def parse(text: str) -> str:
        shown = f"{text[:80]!r}" + ("..." if len(text) > 80 else "")
        try:
            HostPolicy.of(DEFAULT_HOST, **{key: [text]})
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown}") from None
        if len(text) > longest:
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown}")
        return text

    return parse


_host_name = _allowed("a host name such as bridge.internal", "allow_hosts", _MAX_NAME)
_origin = _allowed("an origin such as http://host:port", "allow_origins", _MAX_NAME + 16)


def _run_id(text: str) -> str:
    if not text or len(text) > 200 or text[0] == "." or not all(c.isalnum() or c in "-_." for c in text):
        raise argparse.ArgumentTypeError(
            f"expected a run id of letters, digits, '-', '_' and '.' (not starting with '.'), got {text!r}"
        )
    return text


def add_parser(commands: Subparsers) -> None:
    """Add `bridge` (with its `vlaeval` subcommand) to a subparsers object (`hylo`'s commands)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "bridge", help="serve a hylo agent to an external harness (served mode, docs/served.md)"
    )
    bridges = parser.add_subparsers(dest="bridge_command", metavar="HARNESS", required=True, parser_class=type(parser))
    vla = bridges.add_parser("vlaeval", help="speak vla-eval's model-server protocol (WebSocket + msgpack)")
    vla.add_argument("--agent", required=True, help="a registered agent, or module:Class (given here by the operator)")
    vla.add_argument(
        "-A", dest="agent_args", action="append", default=[], metavar="KEY=VALUE", help="agent argument (repeatable)"
    )
    vla.add_argument("--host", type=_address, default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    vla.add_argument("--port", type=port, required=True, help="port to listen on (0 picks a free one)")
    add_log_dir(vla, "where the run is kept (default ./hylo-runs)")
    vla.add_argument("--run-id", type=_run_id, default=None, help="the run's id (default served-<agent>-<timestamp>)")
    vla.add_argument("--no-shield", action="store_true", help="approve every action unchanged (no safety shield)")
    vla.add_argument(
        "--action-dim", type=_action_dim, default=None, help="the action vector's length (bounds the shield)"
    )
    vla.add_argument("--action-low", type=_bound, default=-math.inf, help="lower bound of every action dimension")
    vla.add_argument("--action-high", type=_bound, default=math.inf, help="upper bound of every action dimension")
    vla.add_argument(
        "--max-frame-mb",
        dest="max_frame_bytes",
        type=_megabytes,
        default=DEFAULT_MAX_FRAME_BYTES,
        metavar="MB",
        help=f"the largest frame read, in MiB (default {DEFAULT_MAX_FRAME_BYTES // 2**20}); a larger one closes its "
        "connection",
    )
    vla.add_argument(
        "--max-connections",
        type=_max_connections,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"connections served at once (default {DEFAULT_MAX_CONNECTIONS}); one more is refused with HTTP 503",
    )
    vla.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="SECONDS",
        help=f"close a connection silent this long while the bridge waits for it (default {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    vla.add_argument(
        "--batch",
        type=_batch,
        default=None,
        metavar="B",
        help="build the agent once and answer every connection from it, batching up to B acts (needs act_batch)",
    )
    vla.add_argument(
        "--batch-wait-ms",
        type=_wait_ms,
        default=None,
        metavar="W",
        help=f"how long a batch waits for more requests after its first (default {DEFAULT_BATCH_WAIT_MS:g})",
    )
    vla.add_argument(
        "--allow-host",
        dest="allow_hosts",
        type=_host_name,
        action="append",
        default=[],
        metavar="NAME",
        help="a further name the bridge answers to in Host, e.g. a proxy's (repeatable)",
    )
    vla.add_argument(
        "--allow-origin",
        dest="allow_origins",
        type=_origin,
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web page's origin (http://host:port) allowed to connect (repeatable; other pages get 403)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM (exit 0: acts in flight get a grace period, then every episode still open is
    recorded `infra_invalid` and the run `complete`; a second signal skips the grace); 2 with one line for a port
    that cannot be bound or a run that cannot be made. Other bad input (an unknown agent, bad arguments) is raised,
    and `hylo` reports it in one line (exit 2)."""
    from hylo.agents.registry import make_agent, parse_agent_args  # start-up time: the agent registry

    agent_args = parse_agent_args(args.agent_args)
    _check_batch(args)
    first = make_agent(args.agent, agent_args, None, allow_import=True)  # the command line is the operator
    if args.batch is not None:
        from hylo.bridges.batched_agent import check_batchable  # start-up time: the policy host

        check_batchable(first)
    space = _action_space(args, first)
    return _serve(args, first, agent_args, space)


def _check_batch(args: argparse.Namespace) -> None:
    """`--batch B` fits `--max-connections` (a batch holds at most one request per connection); `--batch-wait-ms`
    needs `--batch`."""
    if args.batch is None:
        if args.batch_wait_ms is not None:
            raise ValueError(f"--batch-wait-ms {args.batch_wait_ms:g} needs --batch")
        return
    if args.batch > args.max_connections:
        raise ValueError(
            f"--batch {args.batch} is larger than --max-connections {args.max_connections}: a batch holds at most "
            f"one request per connection (each runs one episode at a time); use --batch {args.max_connections} or "
            "more connections"
        )
    if args.batch_wait_ms is None:
        args.batch_wait_ms = DEFAULT_BATCH_WAIT_MS


def _agents(args: argparse.Namespace, first: Any, agent_args: dict[str, Any]) -> Any:
    """One agent per connection (a pool), or, with `--batch`, `first` shared by every connection."""
    from hylo.agents.registry import make_agent  # start-up time: the agent registry
    from hylo.bridges.batched_agent import BatchedAgent  # start-up time: the policy host
    from hylo.bridges.connections import AgentPool  # start-up time: the bridge's server

    if args.batch is not None:
        return BatchedAgent(first, args.batch, args.batch_wait_ms / 1000.0)
    return AgentPool(lambda: make_agent(args.agent, agent_args, None, allow_import=True), first)


def _batching_line(figures: dict[str, Any]) -> str:
    """What a batched bridge ends with, from which B and W are tuned (as `hylo eval --batch` ends)."""
    return (
        f"hylo bridge: {figures['calls']} act_batch calls for {figures['requests']} requests, mean batch "
        f"{figures['mean_batch_size']:.2f} of --batch {figures['max_batch']}, mean queue wait "
        f"{figures['mean_queue_wait_ms']:.1f} ms (--batch-wait-ms {figures['wait_ms']:g}), agent busy "
        f"{100 * figures['utilisation']:.0f}% of the time it served"
    )


def _action_space(args: argparse.Namespace, agent: Any) -> Any:
    if not args.action_low < args.action_high:
        raise ValueError(f"--action-low {args.action_low} must be below --action-high {args.action_high}")
    if args.action_dim is not None:
        return spaces.Box(args.action_low, args.action_high, shape=(args.action_dim,), dtype=np.float64)
    if math.isfinite(args.action_low) or math.isfinite(args.action_high):
        raise ValueError("--action-low/--action-high need --action-dim")
    requirements = getattr(agent, "requirements", None)
    return getattr(requirements, "action_space", None)


def _serve(args: argparse.Namespace, first: Any, agent_args: dict[str, Any], space: Any) -> int:
    from hylo.bridges.served_run import ServedRun, default_run_id  # start-up time: the bridge's server
    from hylo.bridges.vlaeval_server import VlaEvalBridge  # start-up time: the bridge's server

    run_id = args.run_id or default_run_id(args.agent)
    spec = {"harness": "vla-eval", "agent": args.agent, "agent_args": agent_args, "shield": not args.no_shield}
    if args.batch is not None:
        spec.update(batch=args.batch, batch_wait_ms=args.batch_wait_ms)
    try:
        served = ServedRun(args.log_dir, run_id=run_id, agent=args.agent, spec=spec)
    except (OSError, sqlite3.Error) as exc:
        reason = getattr(exc, "strerror", None) or exc
        return fail(EXIT_BAD_INPUT, f"cannot create run {run_id} in {args.log_dir}: {reason}")
    bridge = VlaEvalBridge(
        _agents(args, first, agent_args),
        served,
        agent_label=args.agent,
        shield=SafetyShield.permissive if args.no_shield else SafetyShield,
        action_space=space,
        max_frame_bytes=args.max_frame_bytes,
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
        allow_hosts=args.allow_hosts,
        allow_origins=args.allow_origins,
    )
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    listening = False

    def started(port: int) -> None:
        nonlocal listening
        listening = True
        if not is_loopback(args.host):
            print(
                f"hylo bridge: warning: serving on {args.host}, beyond loopback, with no authentication",
                file=sys.stderr,
            )
        print(
            f"hylo bridge: serving {args.agent} on ws://{shown_host}:{port} (run {run_id}, log {served.run_dir})",
            file=sys.stderr,
            flush=True,
        )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, bridge.request_stop)
        await bridge.serve(args.host, args.port, started=started)

    try:
        asyncio.run(main())
    except OSError as exc:
        if listening:  # failed while serving: what was served is recorded
            bridge.close()
            return fail(EXIT_BAD_INPUT, f"the bridge on {shown_host}:{args.port} failed: {exc}")
        bridge.agents.close()  # the port could not be bound: nothing was served
        served.discard()
        errno_text = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        reason = exc.strerror if isinstance(exc, socket.gaierror) else errno_text
        return fail(EXIT_BAD_INPUT, f"cannot listen on {shown_host}:{args.port}: {reason}")
    except KeyboardInterrupt:
        bridge.stopping = True
    bridge.close()
    figures = bridge.agents.figures()
    if figures is not None:
        print(_batching_line(figures), file=sys.stderr, flush=True)
    return 0
