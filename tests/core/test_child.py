"""Child processes (`hylo.core.child`): an exception keeps its type across the boundary, and a child dies with its
parent, even a SIGKILLed one, whichever thread of the parent started it."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import msgpack
import psutil
import pytest

from hylo.core.child import RemoteError, RemoteTraceback, error_payload, rebuild_error
from hylo.core.errors import (
    AgentTimeout,
    IncompatibleComponents,
    InvalidAction,
    OverLimit,
    SafetyAbort,
    SignalFailed,
    SimulationDiverged,
)


def _raised(exc: Exception) -> Exception:
    try:
        raise exc
    except Exception as caught:
        return caught


def _travel(exc: Exception) -> Exception:
    """`exc` raised in a child, its payload pickled (a pipe) and packed (a socket), rebuilt in the parent."""
    payload = error_payload(_raised(exc))
    assert pickle.loads(pickle.dumps(payload)) == payload
    return rebuild_error(msgpack.unpackb(msgpack.packb(payload, use_bin_type=True), raw=False))


@pytest.mark.parametrize(
    ("exc", "fields"),
    [
        (AgentTimeout(None, 2.5, "act"), ("latency_s", "limit_s", "call")),
        (AgentTimeout(3.25, 2.0, "on_step"), ("latency_s", "limit_s", "call")),
        (OverLimit("infra_invalid", "env timeout", "env step ran 12 s"), ("status", "reason", "detail")),
        (SimulationDiverged("BADQACC", "step 4"), ("warning", "detail")),
        (InvalidAction("action refused"), ()),
        (SafetyAbort("workspace", "out of bounds"), ("guard", "reason")),
        (SignalFailed("agent on_signal raised KeyError", "trace", "infra_invalid"), ("reason", "detail", "status")),
        (IncompatibleComponents(["no images", "no hold action"]), ("problems",)),
    ],
)
def test_an_error_that_decides_a_status_comes_back_as_itself(exc: Exception, fields: tuple[str, ...]) -> None:
    copy = _travel(exc)
    assert type(copy) is type(exc)
    assert str(copy) == str(exc)
    assert all(getattr(copy, field) == getattr(exc, field) for field in fields)
    assert isinstance(copy.__cause__, RemoteTraceback) and "_raised" in copy.__cause__.text


class _Refused(InvalidAction):
    """An adapter's own kind of refused action."""


def test_a_subclass_of_a_carried_error_comes_back_as_the_carried_one() -> None:
    copy = _travel(_Refused("gripper out of range"))
    assert type(copy) is InvalidAction and str(copy) == "gripper out of range"


def test_any_other_exception_comes_back_named_after_the_original_with_its_traceback() -> None:
    copy = _travel(KeyError("remote boom"))
    assert isinstance(copy, RemoteError) and not isinstance(copy, KeyError)
    assert type(copy).__name__ == "KeyError" and copy.remote_type == "builtins.KeyError"
    assert str(copy) == "'remote boom'"
    assert "Traceback" in copy.remote_traceback and "KeyError: 'remote boom'" in copy.remote_traceback


# -- dying with the parent ---------------------------------------------------------------------------------------------

_PARENT = textwrap.dedent("""
    import sys, threading, time
    kind = sys.argv[1]
    started = []

    def start():
        if kind == "agent":
            from hylo.core.isolation import ProcessAgent
            from hylo.envs import PointReachExpert
            agent = ProcessAgent.from_instance(PointReachExpert(), act_timeout_s=5.0)
            started.append((agent, agent._proc.pid))
        else:
            import signal
            from hylo.core.child import popen
            child = popen(["sleep", "120"], death_signal=signal.SIGTERM if kind == "command" else signal.SIGKILL)
            started.append((child, child.pid))

    thread = threading.Thread(target=start)  # a short-lived thread: the child must outlive it
    thread.start()
    thread.join()
    print(started[0][1], flush=True)
    time.sleep(120)
""")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("kind", ["agent", "command", "killed-command"])
def test_a_child_started_from_a_thread_that_ended_lives_on_then_dies_with_its_parent(kind: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, kind], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(1.0)  # PR_SET_PDEATHSIG fires when the forking thread ends: that thread is long gone
        assert not _gone(child), "the child died with the thread that started it"
        assert psutil.Process(child).ppid() == parent.pid
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child), "the child outlived its SIGKILLed parent"
