"""`hylo bridge vlaeval`: serve a hylo agent to vla-eval's benchmark client. `add_parser` adds `bridge` to `hylo`'s
commands and `run` runs it; importing this module stays cheap (the server stack is imported when it runs)."""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from hylo.argtypes import port, positive_int

EXIT_BAD_INPUT = 2
DEFAULT_HOST = "127.0.0.1"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _bound(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return value


def _megabytes(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in MiB (> 0), got {text!r}") from None
    if not (0 < value < math.inf) or value * 2**20 < 1:
        raise argparse.ArgumentTypeError(f"expected a size in MiB (> 0), got {text!r}")
    return int(value * 2**20)


def add_parser(commands: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add `bridge` (with its `vlaeval` subcommand) to a subparsers object (`hylo`'s commands); returns `bridge`'s
    parser."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "bridge", help="serve a hylo agent to an external harness (served mode, docs/served.md)"
    )
    bridges = parser.add_subparsers(dest="bridge_command", metavar="HARNESS", required=True, parser_class=type(parser))
    vla = bridges.add_parser("vlaeval", help="speak vla-eval's model-server protocol (WebSocket + msgpack)")
    vla.add_argument("--agent", required=True, help="a registered agent, or module:Class (given here by the operator)")
    vla.add_argument(
        "-A", dest="agent_args", action="append", default=[], metavar="KEY=VALUE", help="agent argument (repeatable)"
    )
    vla.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    vla.add_argument("--port", type=port, required=True, help="port to listen on (0 picks a free one)")
    vla.add_argument(
        "--log-dir", type=Path, default=Path("hylo-runs"), help="where the run is kept (default ./hylo-runs)"
    )
    vla.add_argument("--run-id", default=None, help="the run's id (default served-<agent>-<timestamp>)")
    vla.add_argument("--no-shield", action="store_true", help="approve every action unchanged (no safety shield)")
    vla.add_argument(
        "--action-dim", type=positive_int, default=None, help="the action vector's length (bounds the shield)"
    )
    vla.add_argument("--action-low", type=_bound, default=-math.inf, help="lower bound of every action dimension")
    vla.add_argument("--action-high", type=_bound, default=math.inf, help="upper bound of every action dimension")
    vla.add_argument(
        "--max-frame-mb",
        dest="max_frame_bytes",
        type=_megabytes,
        default=256 * 2**20,
        metavar="MB",
        help="the largest frame read, in MiB (default 256); a larger one closes its connection",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM (exit 0: acts in flight get a grace period, then every episode still open is
    recorded `infra_invalid` and the run `complete`; a second signal skips the grace); 2 with one line for bad input
    (an unknown agent, bad arguments, a port that cannot be bound)."""
    from hylo.agents.registry import make_agent, parse_agent_args
    from hylo.core.errors import HyloError

    try:
        agent_args = parse_agent_args(args.agent_args)
        first = make_agent(args.agent, agent_args, None, allow_import=True)  # the command line is the operator
        space = _action_space(args, first)
        return _serve(args, first, agent_args, space)
    except (HyloError, ValueError, LookupError) as exc:
        return _fail(str(exc))


def _action_space(args: argparse.Namespace, agent: Any) -> Any:
    import gymnasium.spaces as spaces
    import numpy as np

    if not args.action_low < args.action_high:
        raise ValueError(f"--action-low {args.action_low} must be below --action-high {args.action_high}")
    if args.action_dim is not None:
        return spaces.Box(args.action_low, args.action_high, shape=(args.action_dim,), dtype=np.float64)
    if math.isfinite(args.action_low) or math.isfinite(args.action_high):
        raise ValueError("--action-low/--action-high need --action-dim")
    requirements = getattr(agent, "requirements", None)
    return getattr(requirements, "action_space", None)


def _serve(args: argparse.Namespace, first: Any, agent_args: dict[str, Any], space: Any) -> int:
    from hylo.agents.registry import make_agent
    from hylo.bridges.served_run import ServedRun, default_run_id
    from hylo.bridges.vlaeval_server import AgentPool, VlaEvalBridge
    from hylo.core.shield import SafetyShield

    run_id = args.run_id or default_run_id(args.agent)
    served = ServedRun(
        args.log_dir,
        run_id=run_id,
        agent=args.agent,
        spec={"harness": "vla-eval", "agent": args.agent, "agent_args": agent_args, "shield": not args.no_shield},
    )
    bridge = VlaEvalBridge(
        AgentPool(lambda: make_agent(args.agent, agent_args, None, allow_import=True), first),
        served,
        agent_label=args.agent,
        shield=SafetyShield.permissive if args.no_shield else SafetyShield,
        action_space=space,
        max_frame_bytes=args.max_frame_bytes,
    )
    if args.host not in _LOOPBACK:
        print(f"hylo bridge: warning: serving on {args.host}, beyond loopback, with no authentication", file=sys.stderr)

    def started(port: int) -> None:
        print(
            f"hylo bridge: serving {args.agent} on ws://{args.host}:{port} (run {run_id}, log {served.run_dir})",
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
        bridge.close()
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        bridge.stopping = True
    bridge.close()
    return 0


def _fail(message: str) -> int:
    print(f"hylo: error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_BAD_INPUT
