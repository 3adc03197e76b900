"""A watched execution (`GraphRunner.on_nodes`): each node's state (idle, firing, done, failed) and the last value of
each edge, summarised, reported at the bands' boundaries and at the end; an unwatched runner reports nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hylo.core import ActionChunk, EpisodeStatus, TaskInstance
from hylo.envs.null import NullEnv
from hylo.graph import GraphBuilder, GraphRunner, Node, NodeRef, Nodeset, Port, Runtime, Wire, compile_graph
from hylo.graph.env_nodes import env_nodeset
from hylo.graph.watch import MAX_SUMMARY, edge_key, summarize

AGENT = "graph_agents:ScriptedAgent"


class Boom(Node):
    type_name = "w.boom"
    inputs = (Port("x", Wire.ANY, required=False),)
    outputs = (Port("out", Wire.ANY),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("kaboom")


NODESETS = {"null": env_nodeset("null"), "w": Nodeset("w", (Boom,))}


def canonical(budget: int) -> tuple[GraphBuilder, dict[str, NodeRef]]:
    """reset -> loop(observe -> reason -> step) -> evaluate, over the null env."""
    g = GraphBuilder("watched", step_budget=budget)
    n = {"reset": g.node("null.reset", "reset")}
    n["iterIn"], n["iterOut"] = g.loop(carry={"result": "step"})
    n["observe"] = g.node("null.observe", "observe")
    n["reason"] = g.node("reason", "reason", agent=AGENT, args={"dim": 3, "value": 0.5})
    n["step"] = g.node("null.step", "step")
    n["evaluate"] = g.node("null.evaluate", "evaluate")
    g.connect(n["reset"]["observation"], n["iterIn"]["start"])
    g.connect(n["iterIn"]["step"], n["observe"]["trigger"])
    g.connect(n["observe"]["observation"], n["reason"]["observation"])
    g.connect(n["reason"]["chunk"], n["step"]["action"])
    g.connect(n["step"]["result"], n["iterOut"]["result"])
    g.connect(n["step"]["done"], n["iterOut"]["stop"])
    g.connect(n["iterOut"]["final_result"], n["evaluate"]["result"])
    return g, n


@pytest.fixture
def runners() -> Iterator[list[GraphRunner]]:
    made: list[GraphRunner] = []
    yield made
    for runner in made:
        runner.close()


def watched(g: GraphBuilder, made: list[GraphRunner]) -> tuple[GraphRunner, list[dict[str, Any]]]:
    env = NullEnv(dim=3)
    runtime = Runtime(envs=lambda name: env, env_spec=env.spec, env_capabilities=env.capabilities)
    runner = GraphRunner(compile_graph(g.build(), nodesets=NODESETS), runtime)
    made.append(runner)
    messages: list[dict[str, Any]] = []
    runner.on_nodes = messages.append
    return runner, messages


def states(message: dict[str, Any]) -> dict[str, str]:
    return {node: entry["state"] for node, entry in message["nodes"].items()}


def test_a_finished_execution_shows_every_node_done_and_every_edges_last_value(runners: list[GraphRunner]) -> None:
    g, _ = canonical(budget=4)
    graph = g.build()
    runner, messages = watched(g, runners)
    outcome = runner.run(TaskInstance("null", "t", 0))
    assert outcome.status is EpisodeStatus.FAILURE and outcome.steps == 4

    first, last = messages[0], messages[-1]
    assert first["phase"] == "loop"
    assert states(first) == {"reset": "done", "iterIn": "firing", "observe": "firing", "reason": "firing",
                             "step": "firing", "iterOut": "firing", "evaluate": "idle"}  # fmt: skip
    assert last["phase"] == "end" and last["status"] == "failure" and last["step"] == 4
    assert set(states(last).values()) == {"done"}
    fires = {node: entry["fires"] for node, entry in last["nodes"].items()}
    assert fires == {"reset": 1, "iterIn": 4, "observe": 4, "reason": 4, "step": 4, "iterOut": 4, "evaluate": 1}
    assert set(last["values"]) == {edge_key(edge) for edge in graph.edges}
    assert last["values"]["iterIn.step->observe.trigger"] == "3"  # the last iteration's index
    assert last["values"]["reason.chunk->step.action"] == "chunk of 1: [float32 3 min 0.5 max 0.5]"
    assert len(messages) <= 4 + 2  # at most one per iteration, plus the loop's start and the end


def test_a_failing_node_shows_failed_and_the_others_where_they_stood(runners: list[GraphRunner]) -> None:
    g, n = canonical(budget=4)
    boom = g.node("w.boom", "boom")
    g.connect(n["iterIn"]["step"], boom["x"])
    runner, messages = watched(g, runners)
    outcome = runner.run(TaskInstance("null", "t", 0))
    assert outcome.status is EpisodeStatus.ERROR and "boom" in outcome.reason

    last = states(messages[-1])
    assert last["boom"] == "failed"
    assert last["reset"] == "done" and last["iterIn"] == "done"
    assert last["evaluate"] == "idle"  # the after-loop band never ran


def test_each_execution_starts_idle(runners: list[GraphRunner]) -> None:
    g, _ = canonical(budget=2)
    runner, messages = watched(g, runners)
    runner.run(TaskInstance("null", "t", 0))
    count = len(messages)
    runner.run(TaskInstance("null", "t", 1))
    assert messages[count]["nodes"]["step"]["fires"] == 0 and messages[-1]["nodes"]["step"]["fires"] == 2


def test_an_unwatched_runner_reports_nothing(runners: list[GraphRunner]) -> None:
    g, _ = canonical(budget=2)
    runner, messages = watched(g, runners)
    runner.on_nodes = None
    runner.run(TaskInstance("null", "t", 0))
    assert messages == []


def test_summaries_are_short_and_never_carry_an_arrays_values() -> None:
    image = np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)
    assert summarize(image) == "uint8 64×64×3 min 0 max 255"
    assert summarize({"image": image, "mission": "go to the red ball"}) == (
        "{image: uint8 64×64×3 min 0 max 255, mission: 'go to the red ball'}"
    )
    assert summarize(ActionChunk([1, 2, 3])) == "chunk of 3: [1, 2, 3]"
    assert summarize(np.zeros((0, 2))) == "float64 0×2"
    long = summarize({f"key{i}": "x" * 100 for i in range(50)})
    assert len(long) == MAX_SUMMARY and long.endswith("…")
    assert summarize(list(range(10))) == "[0, 1, 2, 3, 4, 5, +4]"
