"""The env panel of a server-mode env nodeset: its proxy in the worker (`env_babyai#k`) mirrors the panel living in
the nodeset's subprocess, answers every hook exactly as a local panel does, places what the next execution runs,
and reports a dead subprocess as an error naming the panel (then works again in a new one)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import pytest

from hylo.core import EventBus, MemoryRecorder
from hylo.core.types import TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.envs.registry import get_benchmark
from hylo.graph import GraphRunner, Runtime, agent_graph, compile_graph
from hylo.graph.remote import ServerNodesets
from hylo.panels import BenchmarkPanel, PanelRefused, RemoteEnvPanelProxy, RemotePanelError, SideEffect

BUDGET = 6


def _loop_graph(*server: str) -> Any:
    """BabyAI's canonical loop with a seeded random agent (BabyAI's expert reads privileged state, which stays beside
    the env), the nodesets in `server` in server mode."""
    return compile_graph(agent_graph("babyai", "random", name="random_on_babyai", server=server, step_budget=BUDGET))


def _runner(
    bench: Benchmark, *server: str, worker: str = "w1"
) -> tuple[GraphRunner, MemoryRecorder, Any, ServerNodesets | None]:
    env = bench.make_env()
    runtime = Runtime(worker=worker, envs=lambda name: env, benchmark=bench, env_spec=env.spec,
                      env_capabilities=env.capabilities)  # fmt: skip
    bus, recorder = EventBus(), MemoryRecorder()
    bus.subscribe(recorder)
    remote = ServerNodesets(runtime) if server else None
    try:
        runner = GraphRunner(_loop_graph(*server), runtime, bus=bus, remote=remote)
    except BaseException:
        env.close()
        raise
    return runner, recorder, env, remote


@dataclass
class Served:
    """A runner whose BabyAI env nodeset runs in server mode (replica `babyai#1`), and its trace."""

    bench: Benchmark
    runner: GraphRunner
    remote: ServerNodesets
    recorder: MemoryRecorder

    def panel(self) -> RemoteEnvPanelProxy:
        proxy = self.remote.env_panel("babyai")
        assert proxy is not None
        return proxy


@pytest.fixture
def served() -> Iterator[Served]:
    bench = get_benchmark("babyai")
    runner, recorder, env, remote = _runner(bench, "babyai")
    assert remote is not None
    try:
        yield Served(bench, runner, remote, recorder)
    finally:
        runner.close()
        env.close()


def call(hook: Any) -> Any:
    return asyncio.run(hook)


def answer(hook: Any) -> Any:
    """A hook's answer, or the message of the refusal it raised."""
    try:
        return call(hook)
    except PanelRefused as exc:
        return f"refused: {exc}"


# -- the declaration --------------------------------------------------------------------------------------------------


def test_the_proxy_mirrors_the_panel_of_its_replica(served: Served) -> None:
    proxy = served.panel()
    local = BenchmarkPanel(served.bench)
    assert proxy is served.remote.env_panel("babyai")  # one proxy per subprocess
    assert served.remote.env_panel("agents") is None  # a nodeset with no subprocess here
    assert (proxy.name, proxy.tag, proxy.display_name) == ("env_babyai#1", "babyai#1", "BabyAI")
    assert proxy.fields == local.fields and proxy.actions == local.actions  # moves_episode, dynamic, options, ...
    assert all(type(f).__name__ == "EnvPanelField" for f in proxy.fields)
    info, mirrored = local.info(), proxy.info()
    context = {"mode": "server", "server_url": None, "nodeset_name": "babyai#1"}
    assert mirrored == info | {"name": "env_babyai#1", "context": context}


def test_a_nodeset_that_is_not_an_env_has_no_panel_and_says_so() -> None:
    bench = get_benchmark("babyai")
    runner, _, env, remote = _runner(bench, "agents", worker="w2")
    try:
        assert remote is not None
        assert remote.env_panel("agents") is None and remote.env_panel("babyai") is None
        (server,) = remote._servers.values()
        with pytest.raises(RemotePanelError, match=r"^the env panel of nodeset agents#2: /env-panel/info failed: "
                           r"LookupError: nodeset 'agents' \(agents#2\) has no env panel"):  # fmt: skip
            RemoteEnvPanelProxy(server.call, server.tag)
    finally:
        runner.close()
        env.close()


# -- the hooks --------------------------------------------------------------------------------------------------------

CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("on_load", ()),
    ("on_options", ("task",)),
    ("on_options", ("split",)),
    ("on_options", ("nope",)),
    ("on_field_change", ("task", "GoToLocal")),
    ("on_field_change", ("task", "GoToLocal")),  # no change: no signal
    ("on_field_change", ("task", "NoSuchTask")),
    ("on_field_change", ("episode_index", 3)),
    ("on_field_change", ("episode_index", "4")),
    ("on_field_change", ("episode_index", -1)),
    ("on_field_change", ("episode_index", True)),
    ("on_field_change", ("episode_index", 2.5)),
    ("on_field_change", ("seed", 7.0)),
    ("on_field_change", ("split", "nope")),
    ("on_field_change", ("benchmark", "metaworld")),
    ("on_field_change", ("benchmark", "babyai")),
    ("on_field_change", ("velocity", 1)),
    ("on_load", ()),
    ("on_action", ("play",)),
    ("on_action", ("stop",)),
    ("on_action", ("rewind",)),
]


def test_each_hook_answers_as_the_local_panel(served: Served) -> None:
    proxy, local = served.panel(), BenchmarkPanel(served.bench)
    refused = []
    for hook, args in CALLS:
        remote_answer = answer(getattr(proxy, hook)(*args))
        assert remote_answer == answer(getattr(local, hook)(*args)), (hook, args)
        assert proxy.task_instance() == local.task_instance(), (hook, args)
        if isinstance(remote_answer, str):
            refused.append(remote_answer.removeprefix("refused: "))
    assert proxy.state() == call(local.on_load())
    assert proxy.task_instance().episode_id == "babyai/default/GoToLocal/0004@s7"
    # the refusals name the bad value, as locally
    assert "episode_index must be an integer >= 0, got -1" in refused
    assert "episode_index must be an integer >= 0, got True" in refused
    assert any("'NoSuchTask'" in error for error in refused) and any("'velocity'" in error for error in refused)
    assert len(refused) == 9


def test_a_placement_through_the_proxy_is_what_the_next_execution_runs(served: Served) -> None:
    proxy = served.panel()
    local = BenchmarkPanel(served.bench)
    for panel in (proxy, local):
        for name, value in (("task", "GoToLocal"), ("seed", 5), ("episode_index", 2)):
            assert call(panel.on_field_change(name, value)).effect is SideEffect.SIGNAL
        assert call(panel.on_action("play")).effect is SideEffect.RUN_START
    placed = proxy.task_instance()
    assert placed.episode_id == local.task_instance().episode_id == "babyai/default/GoToLocal/0002@s5"

    outcome = served.runner.run(placed)
    runner, recorder, env, _ = _runner(served.bench)  # the same graph with the env in this process
    try:
        expected = runner.run(local.task_instance())
    finally:
        runner.close()
        env.close()
    (start,) = served.recorder.of("episode.start")
    assert start.task["episode_id"] == placed.episode_id
    # the env in the subprocess ran that episode: the same observations, actions and outcome as the local env
    assert _played(served.recorder) == _played(recorder) and len(_played(recorder)[0]) == BUDGET + 1
    assert (outcome.status, outcome.steps, outcome.reason) == (expected.status, expected.steps, expected.reason)


def test_place_through_the_proxy_answers_and_moves_as_the_local_panel(served: Served) -> None:
    proxy, local = served.panel(), BenchmarkPanel(served.bench)
    plan = [("default", "GoToLocal", 0, 3), ("default", "GoToLocal", 1, 3), ("default", "GoToLocal", 1, 3),
            ("default", "GoToObj", 1, 0), ("default", "GoToRedBallGrey", 0, 0)]  # fmt: skip
    for split, task, index, seed in plan:
        planned = served.bench.task_instance(split, task, index, seed)
        assert proxy.place(planned) == local.place(planned), planned.episode_id
        assert proxy.task_instance() == local.task_instance() == planned
    with pytest.raises(PanelRefused, match="'NoSuchTask'"):
        proxy.place(replace(planned, task="NoSuchTask"))
    assert proxy.task_instance() == planned


def _played(recorder: MemoryRecorder) -> tuple[list[Any], list[Any]]:
    return [e.obs for e in recorder.of("observation")], [e.action for e in recorder.of("action")]


# -- a dead subprocess ------------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_subprocess_that_dies_during_a_request_is_an_error_naming_the_panel_then_a_new_one_answers(
    served: Served,
) -> None:
    proxy = served.panel()
    assert call(proxy.on_field_change("episode_index", 5)).signal == "episode_reset"
    first = served.remote.replicas["babyai#1"]
    # it stops answering, then dies while the proxy waits for its answer
    os.kill(first, signal.SIGSTOP)
    killer = threading.Timer(0.3, os.kill, (first, signal.SIGKILL))
    killer.start()
    began = time.monotonic()
    with pytest.raises(RemotePanelError) as raised:
        call(proxy.on_load())
    killer.join()
    assert time.monotonic() - began < 10
    message = str(raised.value)
    assert message.startswith("env panel 'env_babyai#1' (nodeset babyai#1): /env-panel/state failed: NodesetCrashed")
    assert f"process {first} died of SIGKILL" in message

    # the next request starts a new subprocess (its nodes set up again): its panel starts from its defaults
    loaded = call(proxy.on_load())
    second = served.remote.replicas["babyai#1"]
    assert second != first and loaded.values["episode_index"] == 0
    assert call(proxy.on_field_change("episode_index", 5)).signal == "episode_reset"
    placed = proxy.task_instance()
    outcome = served.runner.run(placed)
    assert outcome.status.value == "failure" and outcome.steps == BUDGET  # ran whole in the new subprocess
    assert served.remote.replicas["babyai#1"] == second
    (start,) = served.recorder.of("episode.start")
    assert start.task["episode_id"] == placed.episode_id == "babyai/default/GoToRedBallGrey/0005@s0"


def test_a_closed_runner_leaves_a_proxy_that_refuses_instead_of_starting_a_subprocess(served: Served) -> None:
    proxy = served.panel()
    served.runner.close()
    with pytest.raises(RemotePanelError, match=r"^env panel 'env_babyai#1' \(nodeset babyai#1\): /env-panel/task "
                       r"failed: RuntimeError: nodeset babyai#1 is closed"):  # fmt: skip
        proxy.task_instance()
    assert served.remote.replicas["babyai#1"] and not served.remote._servers["babyai"].alive


def test_an_answer_that_is_not_what_the_hook_promises_is_an_error_naming_the_panel() -> None:
    task = TaskInstance("babyai", "GoToLocal", 0)
    answers = {"/env-panel/info": BenchmarkPanel(get_benchmark("babyai")).info(), "/env-panel/task": asdict(task),
               "/env-panel/state": [task]}  # fmt: skip
    proxy = RemoteEnvPanelProxy(lambda op, **fields: answers[op], "babyai#3")
    assert proxy.name == "env_babyai#3" and proxy.info()["context"]["nodeset_name"] == "babyai#3"
    with pytest.raises(RemotePanelError, match=r"^env panel 'env_babyai#3' \(nodeset babyai#3\): /env-panel/task "
                       r"answered a dict, not a TaskInstance"):  # fmt: skip
        proxy.task_instance()
    with pytest.raises(RemotePanelError, match=r"/env-panel/state answered a list, not a PanelState"):
        call(proxy.on_load())
