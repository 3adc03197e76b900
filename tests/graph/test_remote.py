"""Server-mode nodesets: the same episodes as in-process, crashes and exceptions with the right statuses, a restart
after a crash, one replica per worker, no subprocess outliving its runner or its worker."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from remote_fixtures import probe_plan

from hylo.core import ActionChunk, EventBus, MemoryRecorder
from hylo.core.errors import IncompatibleComponents
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Observation, StepResult, TaskInstance
from hylo.envs.registry import get_benchmark
from hylo.graph import GraphRunner, GraphSetupError, NodesetOptions, Runtime, compile_graph, load_graph, parse_graph
from hylo.graph.remote import ServerNodesets, encode_frame, read_frame, replica_index
from hylo.graph.store import EXAMPLES_DIR

HERE = Path(__file__).parent
GRAPHS = EXAMPLES_DIR


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _task(index: int) -> TaskInstance:
    return TaskInstance("probe", "tick", index)


# -- the wire ---------------------------------------------------------------------------------------------------------


def test_values_keep_their_types_on_the_wire() -> None:
    task = TaskInstance("babyai", "GoToLocal", 3, params={"k": (1, 2)})
    value: dict[str, Any] = {
        "obs": Observation(grid=np.arange(6, dtype=np.uint8).reshape(2, 3), direction=2, instruction="go"),
        "chunk": ActionChunk([np.array([0.5, -1.0], np.float32), np.array([1.0, 0.0], np.float32)], 1),
        "task": task,
        "step": StepResult({}, 1.5, False, True, False, {"x": np.float64(2.0)}),
        "outcome": EpisodeOutcome(EpisodeStatus.FAILURE, 4, "max_steps", metrics={"return": 1.0}),
        "signal": Signal.STEP_END,
        "scalars": (np.int64(7), np.bool_(True), 3),
        "other": {1, 2},
    }
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(encode_frame(value))
        back = read_frame(theirs)
    assert back is not None
    assert type(back["obs"]) is Observation and back["obs"]["grid"].dtype == np.uint8
    np.testing.assert_array_equal(back["obs"]["grid"], value["obs"]["grid"])
    assert back["chunk"].execution_steps == 1 and back["chunk"].actions[1].dtype == np.float32
    assert back["task"] == task and back["task"].digest == task.digest
    assert type(back["step"]) is StepResult and back["step"].truncated and type(back["step"].info["x"]) is np.float64
    assert back["outcome"] == value["outcome"] and back["signal"] is Signal.STEP_END
    assert back["scalars"] == value["scalars"] and type(back["scalars"][0]) is np.int64
    assert back["other"] == {1, 2}


@pytest.mark.parametrize(("worker", "index"), [("main", 0), ("w0", 0), ("w1", 1), ("w1.2", 1), ("w12", 12)])
def test_replica_index_of_a_worker(worker: str, index: int) -> None:
    assert replica_index(worker) == index


# -- the same episodes as in-process ----------------------------------------------------------------------------------


def _episodes(
    graph_file: str, episodes: int, *, server: tuple[str, ...] = (), agent: dict[str, Any] | None = None
) -> list[tuple[str, int, str, list[Any]]]:
    """(status, steps, reason, actions) of each episode of the graph, with the nodesets in `server` in server mode
    and the reason node's config updated by `agent`."""
    data = load_graph(GRAPHS / graph_file).to_json()
    for node in data["nodes"]:
        if node["id"] == "reason" and agent:
            node["config"].update(agent)
    data["nodesets"] = {name: NodesetOptions(mode="server").model_dump() for name in server}
    graph = parse_graph(data)
    plan = compile_graph(graph)
    assert graph.placement is not None and graph.placement.task is not None
    bench = get_benchmark(graph.placement.benchmark)
    split, task = bench.check_split(graph.placement.split), graph.placement.task
    env = bench.make_env()
    local_env = bench.name not in server
    privileged = env.privileged_state if local_env and env.capabilities.privileged_state else None
    runtime = Runtime(worker="main", envs=lambda name: env, benchmark=bench, env_spec=env.spec,
                      env_capabilities=env.capabilities, privileged=privileged)  # fmt: skip
    bus, recorder = EventBus(), MemoryRecorder()
    bus.subscribe(recorder)
    remote = ServerNodesets(runtime) if server else None
    out = []
    try:
        with GraphRunner(plan, runtime, bus=bus, max_steps=bench.default_step_budget(task), remote=remote) as runner:
            if remote is not None:
                assert set(remote.replicas) == {f"{name}#0" for name in server}
                # the experts have no on_step / on_signal: their server-mode proxies make no call for them
                assert "reason" not in {live.id for live in runner._schedule.after_step + runner._schedule.signals}
            for index in range(episodes):
                outcome = runner.run(bench.task_instance(split, task, index))
                actions = [event.action for event in recorder.of("action")]
                recorder.events.clear()
                out.append((outcome.status.value, outcome.steps, outcome.reason, actions))
    finally:
        env.close()
    return out


def test_babyai_env_in_server_mode_gives_the_local_episodes() -> None:
    # BabyAI's expert plans on the live simulator (privileged state), which stays with the env: a seeded random
    # agent, in the worker, drives the env in its subprocess.
    local = _episodes("babyai_expert.json", 3, agent={"agent": "random"})
    served = _episodes("babyai_expert.json", 3, server=("babyai",), agent={"agent": "random"})
    assert served == local
    assert all(steps > 0 and actions for _, steps, _, actions in local)


def test_metaworld_agent_and_env_in_server_mode_give_the_local_episodes() -> None:
    chunked = {"args": {"chunk_size": 4, "execution_steps": 2}}
    local = _episodes("metaworld_chunked_expert.json", 2, agent=chunked)
    assert [status for status, *_ in local] == ["success", "success"]
    assert _episodes("metaworld_chunked_expert.json", 2, server=("agents",), agent=chunked) == local
    assert _episodes("metaworld_chunked_expert.json", 1, server=("agents", "metaworld"), agent=chunked) == local[:1]


def test_an_agent_reading_privileged_state_cannot_run_apart_from_the_env() -> None:
    with pytest.raises(
        IncompatibleComponents, match="reads privileged simulator state, which it can only do beside the env it reads"
    ):
        _episodes("babyai_expert.json", 1, server=("agents",))


# -- crashes and exceptions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodeset", "how", "status", "why"),
    [
        ("probe", "exit", "error", "exited with code 3"),
        ("probe_env", "kill", "infra_invalid", "died of SIGKILL"),
        ("probe_env", "segv", "infra_invalid", "died of SIGSEGV"),
    ],
)
def test_a_crash_ends_the_episode_and_the_next_execution_restarts_the_nodeset(
    tmp_path: Path, nodeset: str, how: str, status: str, why: str
) -> None:
    runtime = Runtime(worker="main")
    remote = ServerNodesets(runtime)
    plan = probe_plan(nodeset, fail_at=1, how=how, marker=str(tmp_path / "crashed"))
    with GraphRunner(plan, runtime, remote=remote) as runner:
        first = remote.replicas[f"{nodeset}#0"]
        crashed = runner.run(_task(0))
        assert crashed.status.value == status and crashed.steps == 0
        assert crashed.reason.startswith(f"node 'tick' ({nodeset}.tick): nodeset '{nodeset}#0' crashed: process ")
        assert why in crashed.reason and str(first) in crashed.reason
        again = runner.run(_task(1))
        second = remote.replicas[f"{nodeset}#0"]
        # the next execution runs whole in a new subprocess: its verdict fires (no step node: a plain failure)
        assert (again.status, again.reason) == (EpisodeStatus.FAILURE, "max_steps")
        assert again.metrics["pid"] == second != first
        assert _gone(first)
    assert _gone(second)


@pytest.mark.parametrize(
    ("nodeset", "how", "status", "reason"),
    [
        ("probe", "raise", "error", "node 'tick' (probe.tick) raised ValueError: tick failed at step 1"),
        ("probe_env", "raise", "infra_invalid", "node 'tick' (probe_env.tick) raised ValueError: tick failed"),
        ("probe_env", "invalid", "error", "node 'tick' (probe_env.tick) rejected the agent's action: action refused"),
        ("probe_env", "diverged", "infra_invalid", "node 'tick' (probe_env.tick): simulation diverged: BADQACC"),
    ],
)
def test_a_node_exception_comes_back_and_the_same_subprocess_serves_on(
    tmp_path: Path, nodeset: str, how: str, status: str, reason: str
) -> None:
    runtime = Runtime(worker="main")
    remote = ServerNodesets(runtime)
    plan = probe_plan(nodeset, fail_at=1, how=how, marker=str(tmp_path / "failed"))
    with GraphRunner(plan, runtime, remote=remote) as runner:
        pid = remote.replicas[f"{nodeset}#0"]
        failed = runner.run(_task(0))
        assert failed.status.value == status and failed.reason.startswith(reason)
        assert "Traceback" in (failed.detail or "") and "remote_fixtures.py" in (failed.detail or "")
        again = runner.run(_task(1))
        assert (again.status, again.reason) == (EpisodeStatus.FAILURE, "max_steps")  # ran whole, verdict fired
        assert again.metrics["pid"] == pid == remote.replicas[f"{nodeset}#0"]


@pytest.mark.parametrize("nodeset", ["probe", "probe_env"])
@pytest.mark.parametrize("how", ["timeout", "over_limit", "invalid", "diverged"])
def test_an_error_that_decides_a_status_gives_the_status_it_gives_in_process(nodeset: str, how: str) -> None:
    outcomes = []
    for mode in ("local", "server"):
        runtime = Runtime(worker="main")
        plan = probe_plan(nodeset, mode, fail_at=1, how=how)
        remote = ServerNodesets(runtime) if mode == "server" else None
        with GraphRunner(plan, runtime, remote=remote) as runner:
            outcomes.append(runner.run(_task(0)))
    local, served = outcomes
    assert (served.status, served.reason, served.steps) == (local.status, local.reason, local.steps)
    if how == "timeout":
        assert (served.status, served.reason) == (EpisodeStatus.ERROR, "timeout")


# -- replicas and process lifetimes -----------------------------------------------------------------------------------


def test_each_worker_gets_its_own_replica_and_closing_leaves_none_alive() -> None:
    pids: dict[str, int] = {}
    for worker in ("w0", "w1"):
        runtime = Runtime(worker=worker)
        remote = ServerNodesets(runtime)
        with GraphRunner(probe_plan(), runtime, remote=remote) as runner:
            outcome = runner.run(_task(0))
            ((tag, pid),) = remote.replicas.items()
            assert outcome.metrics["pid"] == pid
            pids[tag] = pid
            assert remote._launch.directory is None  # the socket's directory went once the subprocess connected
        assert _gone(pid)
    assert set(pids) == {"probe#0", "probe#1"} and pids["probe#0"] != pids["probe#1"]


def test_the_subprocess_exits_when_its_socket_closes() -> None:
    remote = ServerNodesets(Runtime())
    try:
        remote.proxy(probe_plan().nodes["tick"])
        (server,) = remote._servers.values()
        assert server.sock is not None and server.process is not None
        server.sock.close()
        assert server.process.wait(30) == 0
    finally:
        remote.close()


def test_a_nodeset_its_subprocess_cannot_load_is_a_setup_error() -> None:
    planned = probe_plan().nodes["tick"]
    ghost = dataclasses.replace(planned.nodeset, source="remote_fixtures:NO_SUCH_NODESET")
    remote = ServerNodesets(Runtime())
    try:
        with pytest.raises(GraphSetupError, match=r"nodeset 'probe' \(probe#0\) could not start: NodesetError: .*"
                                                  r"NO_SUCH_NODESET"):  # fmt: skip
            remote.proxy(dataclasses.replace(planned, nodeset=ghost))
        assert remote.replicas == {}
    finally:
        remote.close()


def test_a_subprocess_that_does_not_connect_in_time_is_a_setup_error() -> None:
    remote = ServerNodesets(Runtime(), start_timeout_s=0.001)
    try:
        with pytest.raises(GraphSetupError, match=r"nodeset 'probe' \(probe#0\): its subprocess did not connect"):
            remote.proxy(probe_plan().nodes["tick"])
    finally:
        remote.close()


def test_a_node_using_a_graph_container_cannot_run_in_server_mode() -> None:
    data = load_graph(GRAPHS / "metaworld_chunked_expert.json").to_json()
    data["containers"] = [{"name": "decisions", "reducer": "append"}]
    next(n for n in data["nodes"] if n["id"] == "reason")["config"]["remember"] = "decisions"
    plan = compile_graph(parse_graph(data))
    remote = ServerNodesets(Runtime())
    with pytest.raises(GraphSetupError, match=r"node 'reason' uses the graph's containers \['decisions'\]"):
        remote.proxy(plan.nodes["reason"])
    remote.close()


def test_the_subprocess_dies_with_its_worker() -> None:
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(HERE)!r})
        from remote_fixtures import probe_plan
        from hylo.graph import Runtime
        from hylo.graph.remote import ServerNodesets
        remote = ServerNodesets(Runtime())
        remote.proxy(probe_plan().nodes["tick"])
        print(remote.replicas["probe#0"], flush=True)
        time.sleep(120)
    """)
    worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        child = int(worker.stdout.readline())
        assert not _gone(child)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


@pytest.mark.timeout(60)
def test_two_nodes_of_one_subprocess_in_one_level_exchange_frames_larger_than_the_socket_buffers() -> None:
    from remote_fixtures import echo_plan

    plan = echo_plan()
    assert plan.pre[-1] == ["a", "b"]  # one level: the executor overlaps their calls
    runtime = Runtime(worker="main")
    with GraphRunner(plan, runtime, remote=ServerNodesets(runtime)) as runner:
        outcome = runner.run(_task(0))  # a hang here would be a deadlock on full socket buffers
        assert outcome.status is EpisodeStatus.FAILURE and outcome.reason == "max_steps"  # ran whole, no env
        for name in ("a", "b"):
            echoed = runner._outs[name]["image"]
            assert echoed.shape == (1024, 1024, 3) and int(echoed[5, 5, 1]) == 7
