"""Batch placement with a server-mode env nodeset: each worker places its episodes through the panel living in its
own replica of the env nodeset (`env_babyai#k`), and the run gives the rows of the same graph with a local env."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psutil
import pytest

import hylo
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.eval.worker import EpisodeJob, EpisodeWorker, WorkerConfig
from hylo.evallog.store import EvalLog
from hylo.graph import GraphSetupError, agent_graph
from hylo.graph.remote import replica_index
from hylo.graph.remote.processes import NodesetServer

BUDGET = 8


def _spec(env_mode: str) -> EvalSpec:
    """BabyAI's canonical loop with a seeded random agent (its expert reads privileged state, which stays beside the
    env), the env nodeset in `env_mode`."""
    server = ("babyai",) if env_mode == "server" else ()
    graph = agent_graph("babyai", "random", name="random_on_babyai", server=server, step_budget=BUDGET).to_json()
    return EvalSpec(benchmark="babyai", agent="graph:random_on_babyai", graph=graph, tasks=["GoToLocal", "GoToObj"],
                    episodes=2, seed=3)  # fmt: skip


def _rows(result: Any) -> list[tuple[Any, ...]]:
    """(episode id, seed, status, steps, reason, actions) of each episode."""
    with EvalLog.open(Path(result.log_dir)) as log:
        return [
            (r.episode_id, r.seed, r.status.value, r.steps, r.reason,
             [e["action"] for e in log.trace(r.episode_id) if e["event"] == "action"])
            for r in result.episodes
        ]  # fmt: skip


def test_each_worker_places_through_its_own_replicas_panel_and_the_rows_are_the_local_ones(tmp_path: Path) -> None:
    local = hylo.evaluate(_spec("local"), log_dir=str(tmp_path / "local"))
    served = hylo.evaluate(_spec("server"), log_dir=str(tmp_path / "served"), workers=2)
    assert served.spec["graph"]["nodesets"] == {"babyai": {"mode": "server"}}
    assert _rows(served) == _rows(local)
    assert [r.episode_id for r in served.episodes] == [
        "babyai/default/GoToLocal/0000@s3", "babyai/default/GoToLocal/0001@s3",
        "babyai/default/GoToObj/0000@s3", "babyai/default/GoToObj/0001@s3",
    ]  # fmt: skip
    assert all(steps > 0 and actions for *_, steps, _, actions in _rows(local))
    # each worker drove the panel of its own replica of the env nodeset; a local panel is not named in the rows
    assert {r.worker for r in served.episodes} == {"w0", "w1"}
    assert all(r.metrics["env_panel"] == f"env_babyai#{replica_index(r.worker)}" for r in served.episodes)
    assert all("env_panel" not in r.metrics for r in local.episodes)


def _replica(tag: str) -> psutil.Process:
    (process,) = [p for p in psutil.Process().children() if tag in p.cmdline()]
    return process


def _kill(worker: EpisodeWorker, tag: str) -> psutil.Process:
    """Kill a worker's replica between two episodes, and wait until its death can be seen (nothing notices it until
    the next placement)."""
    process = _replica(tag)
    process.kill()
    assert worker._parts is not None
    server = worker._parts.executor.remote._servers[tag.partition("#")[0]]  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while server.process.poll() is None:
        assert time.monotonic() < deadline, f"{tag} outlived SIGKILL"
        time.sleep(0.01)
    return process


def _cannot_start(self: NodesetServer) -> None:
    raise GraphSetupError("no room")


def test_a_worker_whose_env_subprocess_died_places_its_next_episode_in_a_new_one_or_charges_it_to_the_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluation = Evaluation(_spec("server").model_copy(update={"log_dir": str(tmp_path)}))
    config = WorkerConfig(evaluation.spec, evaluation.run_id, tmp_path, evaluation.resolved.budgets)
    bench = evaluation.resolved.benchmark
    worker = EpisodeWorker(config, name="w3")
    assert worker.panel_name is None
    worker.initialize()
    try:
        assert worker.panel_name == "env_babyai#3"
        first = worker.run(EpisodeJob(bench.task_instance("default", "GoToObj", 1, 3))).row
        dead = _kill(worker, "babyai#3")
        second = worker.run(EpisodeJob(bench.task_instance("default", "GoToLocal", 1, 3))).row
        assert _replica("babyai#3").pid != dead.pid
        # a replica that cannot be restarted costs the episode being placed, as infra_invalid
        _kill(worker, "babyai#3")
        monkeypatch.setattr(NodesetServer, "start", _cannot_start)
        third = worker.run(EpisodeJob(bench.task_instance("default", "GoToLocal", 0, 3))).row
    finally:
        worker.shutdown()
    assert (first.episode_id, first.status.value, first.metrics["env_panel"]) == (
        "babyai/default/GoToObj/0001@s3", "failure", "env_babyai#3"
    )  # fmt: skip
    # the next placement started a new subprocess, whose panel placed (and whose env ran) the planned episode
    expected = ("babyai/default/GoToLocal/0001@s3", "failure", BUDGET, "env_babyai#3")
    assert (second.episode_id, second.status.value, second.steps, second.metrics["env_panel"]) == expected
    expected = ("babyai/default/GoToLocal/0000@s3", "infra_invalid", 0, "env_babyai#3")
    assert (third.episode_id, third.status.value, third.steps, third.metrics["env_panel"]) == expected
    assert third.reason == ("env panel 'env_babyai#3' (nodeset babyai#3): /env-panel/place failed: NodesetCrashed: "
                            "nodeset 'babyai#3' crashed: it could not be restarted: no room")  # fmt: skip

    local = Evaluation(_spec("local").model_copy(update={"log_dir": str(tmp_path)}))
    worker = EpisodeWorker(WorkerConfig(local.spec, local.run_id, tmp_path, local.resolved.budgets), name="w3")
    worker.initialize()
    try:
        assert worker.panel_name == "env_babyai"
    finally:
        worker.shutdown()
