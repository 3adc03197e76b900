"""The `hylo` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from hylo import __version__


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hylo",
        description="Truthful, fast, reproducible evaluation of embodied agents in simulation.",
    )
    parser.add_argument("--version", action="version", version=f"hylo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="run the Kernel on the built-in environments and show the outcomes")
    demo.add_argument("--episodes", type=_positive_int, default=50, help="episodes per env and agent (default 50)")
    demo.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    demo.add_argument("--trace", type=Path, default=None, help="write the JSONL trace of every episode here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=150)
    if args.command == "demo":
        from hylo.demo import render, run_demo

        rows = run_demo(episodes=args.episodes, seed=args.seed, trace=args.trace)
        render(rows, console)
        if args.trace is not None:
            console.print(f"trace: {args.trace}")
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
