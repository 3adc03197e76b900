"""A job's process: `hylo eval --spec FILE --json` in its own process group, dying with the scheduler where Linux
allows it (PR_SET_PDEATHSIG), recognised later by pid and creation time."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import psutil

PR_SET_PDEATHSIG = 1

SPEC_FILE = "spec.json"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()  # resolved in the parent: the forked child only makes the call


def pdeathsig_available() -> bool:
    return _PRCTL is not None


def _die_with_parent(parent: int) -> Callable[[], None]:
    """A preexec_fn: SIGTERM this child when the thread that forked it exits (the scheduler's thread); if the parent
    is already gone, at once."""

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def spawn(
    job_dir: Path,
    spec_json: str,
    *,
    env: Mapping[str, str],
    die_with_scheduler: bool = True,
    python: str = sys.executable,
) -> subprocess.Popen[bytes]:
    """Write the spec to `job_dir` and start `hylo eval --spec` on it, stdout and stderr to files there. Call it
    only from a thread that lives as long as the job (the death signal fires when the forking thread exits)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    spec_file = job_dir / SPEC_FILE
    spec_file.write_text(spec_json)
    with open(job_dir / STDOUT_FILE, "wb") as stdout, open(job_dir / STDERR_FILE, "wb") as stderr:
        return subprocess.Popen(
            [python, "-m", "hylo", "eval", "--spec", str(spec_file), "--json"],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=job_dir,
            env=dict(env),
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()) if die_with_scheduler and pdeathsig_available() else None,
        )


def created(pid: int) -> float:
    """The creation time of process `pid` (0.0 when it is already gone)."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def alive(pid: int, created_at: float) -> bool:
    """Whether process `pid` is still the one created at `created_at`, and not a zombie."""
    try:
        process = psutil.Process(pid)
        if abs(process.create_time() - created_at) > 0.05:
            return False  # the pid was reused
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group led by `pid`; whether any process got it."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def kill_group_of(pid: int) -> None:
    """SIGKILL whatever is left in the group led by `pid` (workers that outlived their leader)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
