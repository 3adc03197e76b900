"""Keeping libraries that print from reaching stdout.

Some simulators print to file descriptor 1 from C (MuJoCo) or with `print` (minigrid's "Sampling rejected").
`stdout_to_stderr()` points fd 1 and `sys.stdout` at stderr for its duration, so a command's stdout carries only what
the command itself prints (e.g. exactly one JSON object with `--json`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1 (embedded interpreter): redirect Python's stream only
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
