"""What every `hylo` command shares: exit statuses, consoles, and one-line errors."""

from __future__ import annotations

import sys

from pydantic import ValidationError
from rich.console import Console

EXIT_BAD_INPUT = 2
EXIT_ABORTED = 1
EXIT_STRICT = 3
EXIT_INTERRUPTED = 130


def console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=160)


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
