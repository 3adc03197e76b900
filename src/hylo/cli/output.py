"""What every `hylo` command shares: exit statuses, consoles, and one-line errors."""

from __future__ import annotations

import os
import sys

from pydantic import ValidationError
from rich.console import Console

EXIT_BAD_INPUT = 2
EXIT_ABORTED = 1
EXIT_STRICT = 3
EXIT_INTERRUPTED = 130


UNBOUND_WIDTH = 160
"""The width of output that no terminal shows (a file, a pipe to another program, a job's log): every table fits it
with full headers."""


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) as wide as the terminal it prints on. Output redirected to a file or a pipe
    is as wide as the terminal the command was typed in (its stdin or other output stream: `hylo eval ... | tee log`
    reads well there), else `UNBOUND_WIDTH`."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=redirected_width())


def redirected_width() -> int:
    """The width of redirected output. `COLUMNS` is not read: a Python program that loads readline (pytest, for one)
    exports `COLUMNS=80` to every process it starts, whatever its own terminal."""
    for stream in (sys.stdin, sys.stderr, sys.stdout):
        try:
            width = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):  # closed, replaced or not a terminal
            continue
        if width > 0:
            return width
    return UNBOUND_WIDTH


def fail(code: int, message: str) -> int:
    line = " ".join(message.split())
    print(f"hylo: error: {line}", file=sys.stderr)
    return code


def validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
