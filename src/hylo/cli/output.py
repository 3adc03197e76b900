"""What every `hylo` command shares: exit statuses, the one mapping from exceptions to them, consoles, and one-line
errors."""

from __future__ import annotations

import os
import sys

from pydantic import ValidationError
from rich.console import Console

from hylo.core.errors import HyloError, HyloFailure
from hylo.exits import EXIT_ABORTED as EXIT_ABORTED
from hylo.exits import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from hylo.exits import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from hylo.exits import EXIT_INVALID as EXIT_INVALID
from hylo.exits import EXIT_STRICT as EXIT_STRICT

INTERRUPTED_MESSAGE = "interrupted; re-run the same command to resume"


def exit_code(exc: BaseException) -> int:
    """The exit status `exc` ends a command with: `EXIT_INTERRUPTED` for Ctrl-C (and SIGTERM, raised as it);
    `EXIT_BAD_INPUT` for a refusal of the input (a `HyloError`, `ValueError`, `LookupError` or pydantic
    `ValidationError`); `EXIT_ABORTED` for anything else, a `HyloFailure` included: it broke at run time, and is
    never reported as bad input."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, (HyloError, ValueError, LookupError)) and not isinstance(exc, HyloFailure):
        return EXIT_BAD_INPUT  # ValidationError is a ValueError
    return EXIT_ABORTED


def error_message(exc: BaseException) -> str:
    """What the one error line says of `exc`."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED_MESSAGE
    if isinstance(exc, ValidationError):
        return validation_message(exc)
    return str(exc)


def report(exc: BaseException) -> int:
    """Print `exc` as one error line on stderr; returns its exit status (`exit_code`)."""
    return fail(exit_code(exc), error_message(exc))


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
    """Print `message` as one error line on stderr (`hylo: error: ...`); returns `code`."""
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
