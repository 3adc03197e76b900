"""Starting a child process that dies with its parent, killing it with whatever it started, and saying how it ended.

Linux kills a child whose parent dies when the child asked for it (PR_SET_PDEATHSIG), even when the parent is
SIGKILLed; but the signal fires when the *thread* that forked the child ends, not the process. So every child here
is forked by one thread of this module that lives as long as the process, whichever thread asked: a child started
from a short-lived thread (a request's, a session's) lives on after it. A child of `spawn_process` also watches its
parent's pid from a thread of its own (macOS has no PR_SET_PDEATHSIG), and one whose parent died before it could
ask exits at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

PR_SET_PDEATHSIG = 1

WATCH_S = 0.5
"""How often a child's parent watch looks at its parent's pid."""

T = TypeVar("T")

Child = subprocess.Popen[Any] | BaseProcess
"""A child process as either way of starting one returns it."""


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()  # resolved before any fork: a forked child only makes the call


def pdeathsig_available() -> bool:
    """Whether the kernel can signal a child when its parent dies (Linux)."""
    return _PRCTL is not None


# -- in the child ----------------------------------------------------------------------------------------------------


def die_with_parent(parent: int, death_signal: int = signal.SIGKILL, *, watch: bool = True) -> bool:
    """Called in a child: have `death_signal` sent to it when `parent` dies (PR_SET_PDEATHSIG where there is one,
    and, with `watch`, a thread that looks at the parent's pid every `WATCH_S`). False when the parent is already
    gone (it died before this ran): the caller exits then."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
    if os.getppid() != parent:
        return False
    if watch:
        threading.Thread(
            target=_watch_parent, args=(parent, death_signal), daemon=True, name="hylo-parent-watch"
        ).start()
    return True


def _watch_parent(parent: int, death_signal: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    os.kill(os.getpid(), death_signal)
    time.sleep(10 * WATCH_S)  # a signal it handles gets that long to end it
    os._exit(1)


def _child_entry(
    target: Callable[..., Any], args: tuple[Any, ...], parent: int, death_signal: int, own_group: bool
) -> None:
    """A `spawn_process` child's first code: its own process group (so that a kill ends whatever it starts, and a
    terminal's Ctrl-C reaches the parent only), death with the parent, then `target`."""
    if own_group:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    if not die_with_parent(parent, death_signal):
        return
    target(*args)


def _preexec(parent: int, death_signal: int, then: Callable[[], None] | None = None) -> Callable[[], None]:
    """A Popen `preexec_fn`: the death signal asked for between fork and exec, so the child is covered from its
    first instruction; if the parent is already gone, the signal at once; then the caller's own `then`."""

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), death_signal)
        if then is not None:
            then()

    return preexec


# -- in the parent ---------------------------------------------------------------------------------------------------


class _Forker:
    """The thread that forks every child of this process (see the module's docstring); started on first use, and
    again in a process forked from this one (which has the object but not the thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._thread: threading.Thread | None = None
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()

    def run(self, start: Callable[[], T]) -> T:
        with self._lock:
            if self._pid != os.getpid() or self._thread is None or not self._thread.is_alive():
                self._pid = os.getpid()
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._serve, args=(self._jobs,), daemon=True,
                                                name="hylo-forker")  # fmt: skip
                self._thread.start()
            thread, jobs = self._thread, self._jobs
        if threading.current_thread() is thread:
            return start()
        done: Future[T] = Future()
        jobs.put((done, start))
        return done.result()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]]) -> None:
        while True:
            done, start = jobs.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(start())
            except BaseException as exc:
                done.set_exception(exc)


_FORKER = _Forker()


def spawn_process(
    context: BaseContext,
    target: Callable[..., Any],
    args: Sequence[Any] = (),
    *,
    name: str | None = None,
    death_signal: int = signal.SIGKILL,
    own_group: bool = True,
) -> BaseProcess:
    """Start `target(*args)` in a daemonic process of `context` (spawn: nothing inherited) that dies with this one
    and, with `own_group`, leads a process group of its own (`kill` ends it with everything it started). `target`
    and `args` must be picklable."""
    process = context.Process(  # type: ignore[attr-defined]
        target=_child_entry,
        args=(target, tuple(args), os.getpid(), death_signal, own_group),
        name=name,
        daemon=True,
    )
    _FORKER.run(process.start)
    started: BaseProcess = process
    return started


def popen(
    command: Sequence[str], *, die_with_parent: bool = True, death_signal: int = signal.SIGKILL, **options: Any
) -> subprocess.Popen[Any]:
    """`subprocess.Popen(command, **options)`, the child asking for `death_signal` when this process dies (where the
    kernel can send it; `die_with_parent=False`: it outlives this process), before a `preexec_fn` of `options`."""
    if die_with_parent and pdeathsig_available():
        options["preexec_fn"] = _preexec(os.getpid(), death_signal, options.get("preexec_fn"))
    return _FORKER.run(lambda: subprocess.Popen(command, **options))


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group led by `pid`; whether any process got it."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_group(pid: int) -> None:
    """SIGKILL whatever is in the process group led by `pid` (none: nothing happens)."""
    signal_group(pid, signal.SIGKILL)


def kill(child: Child, *, group: bool = True) -> None:
    """SIGKILL a child, with `group` the process group it leads too (whatever it started); it is not reaped."""
    pid = child.pid
    if pid is None:
        return
    if group:
        kill_group(pid)
    if isinstance(child, subprocess.Popen):
        if child.poll() is None:
            child.kill()
    elif child.is_alive():
        child.kill()


def reap(child: Child, timeout: float | None = None) -> int | None:
    """Wait up to `timeout` seconds (None: as long as it takes) for a child to end; its exit code (None: it runs)."""
    if isinstance(child, subprocess.Popen):
        try:
            return child.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
    if child.pid is not None:
        child.join(timeout)
    return child.exitcode


def signal_name(code: int | None) -> str | None:
    """The signal that ended a process with exit code `code` (`SIGKILL` for -9), None when no signal did."""
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
