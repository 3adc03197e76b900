"""The graph format: one pydantic JSON document, written the same by the Python builder, read back unchanged, with
file errors that name the problem and a layout the engine ignores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hylo.core import EventBus, MemoryRecorder, TaskInstance
from hylo.envs.null import NullEnv
from hylo.graph import (
    Graph,
    GraphBuilder,
    GraphFormatError,
    GraphRunner,
    Placement,
    Runtime,
    compile_graph,
    load_graph,
    parse_graph,
)
from hylo.graph.env_nodes import env_nodeset
from hylo.graph.model import MAX_GRAPH_BYTES
from hylo.graph.store import EXAMPLES_DIR

EXAMPLES = EXAMPLES_DIR
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.json"))


def small_graph(**kwargs: Any) -> GraphBuilder:
    """A loop over the null env with a step budget, a container of each lifetime and a canvas layout."""
    g = GraphBuilder("small", description="a small graph", step_budget=3, **kwargs)
    reset = g.node("null.reset")
    loop_in, loop_out = g.loop(carry={"result": "step"})
    observe = g.node("null.observe")
    reason = g.node("reason", "reason", agent="graph_agents:ScriptedAgent", args={"value": 0.25})
    step = g.node("null.step")
    evaluate = g.node("null.evaluate")
    recall = g.node("recall", "recall", container="memo")
    g.connect(reset["observation"], loop_in["start"])
    g.connect(loop_in["step"], observe["trigger"])
    g.connect(loop_in["step"], recall["trigger"])
    g.connect(observe["observation"], reason["observation"])
    g.connect(recall["value"], reason["memory"])
    g.connect(reason["chunk"], step["action"])
    g.connect(step["result"], loop_out["result"])
    g.connect(step["done"], loop_out["stop"])
    g.connect(loop_out["final_result"], evaluate["result"])
    g.container("memo", "episode", "append", max_size=8)
    g.container("total", "run", "add")
    g.container("scratch", "step")
    g.position(reset, 0, 10).position(step, 400.5, -20)
    return g


# -- the format ----------------------------------------------------------------------------------------------------


def test_the_document_has_the_canvas_fields() -> None:
    data = small_graph().build().to_json()
    assert data["version"] == 1
    assert data["name"] == "small"
    assert data["step_budget"] == 3
    assert {"id": "reason", "type": "reason", "config": {"agent": "graph_agents:ScriptedAgent",
                                                         "args": {"value": 0.25}}} in data["nodes"]  # fmt: skip
    assert {"source": "reason", "sourceHandle": "chunk", "target": "step", "targetHandle": "action"} in data["edges"]
    assert {"name": "memo", "lifetime": "episode", "reducer": "append", "max_size": 8} in data["containers"]
    assert {"name": "total", "lifetime": "run", "reducer": "add"} in data["containers"]
    assert {"name": "scratch", "lifetime": "step", "reducer": "last"} in data["containers"]
    assert data["layout"] == {"positions": {"reset": {"x": 0, "y": 10}, "step": {"x": 400.5, "y": -20}}}
    iter_out = next(n for n in data["nodes"] if n["type"] == "iterOut")
    assert iter_out["config"] == {"pair": "iterIn", "carry": [{"name": "result", "wire": "step"}]}


def test_builder_round_trip_is_exact() -> None:
    graph = small_graph(placement=Placement(benchmark="null", task="t")).nodeset("null").build()
    data = graph.to_json()
    again = parse_graph(json.loads(json.dumps(data)))
    assert again == graph
    assert again.to_json() == data
    assert parse_graph(json.loads(graph.dumps())).dumps() == graph.dumps()


def test_builder_writes_the_example_file_byte_for_byte() -> None:
    """The builder and the canvas produce the same document: rebuilding babyai_expert.json in Python gives it back."""
    path = EXAMPLES / "babyai_expert.json"
    original = json.loads(path.read_text())
    g = GraphBuilder("babyai_expert", description=original["description"],
                     placement=Placement(benchmark="babyai", task="GoToLocal"))  # fmt: skip
    reset = g.node("babyai.reset", "reset")
    loop_in, loop_out = g.loop(carry={"result": "step"})
    observe = g.node("babyai.observe", "observe")
    reason = g.node("reason", "reason", agent="expert")
    step = g.node("babyai.step", "step")
    evaluate = g.node("babyai.evaluate", "evaluate")
    g.connect(reset["observation"], loop_in["start"])
    g.connect(loop_in["step"], observe["trigger"])
    g.connect(observe["observation"], reason["observation"])
    g.connect(reason["chunk"], step["action"])
    g.connect(step["result"], loop_out["result"])
    g.connect(step["done"], loop_out["stop"])
    g.connect(loop_out["final_result"], evaluate["result"])
    # two rows, as the canvas shows the example whole: reset, then the loop's first row, its second, and evaluate
    places = {reset: (0, 0), loop_in: (230, 0), observe: (440, 0), reason: (650, 0), step: (230, 240),
              loop_out: (440, 240), evaluate: (880, 240)}  # fmt: skip
    for node, (x, y) in places.items():
        g.position(node, x, y)
    graph = g.build()
    assert graph.to_json() == original
    assert graph.dumps() == path.read_text()


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_files_read_back_unchanged(path: Path) -> None:
    text = path.read_text()
    graph = load_graph(path)
    assert graph.to_json() == json.loads(text)
    assert graph.dumps() == text


def test_builder_ids_default_to_the_type_and_stay_unique() -> None:
    g = GraphBuilder()
    first, second = g.node("null.step"), g.node("null.step")
    assert (first.id, second.id) == ("step", "step_2")
    with pytest.raises(ValueError, match="duplicate node id 'step'"):
        g.node("null.observe", "step")


def test_builder_rejects_a_bad_container_declaration() -> None:
    with pytest.raises(ValueError, match="lifetime"):
        GraphBuilder().container("memo", lifetime="forever")


def test_edge_handles_are_required() -> None:
    data = small_graph().build().to_json()
    del data["edges"][0]["sourceHandle"]
    with pytest.raises(GraphFormatError, match=r"edges\.0\.sourceHandle"):
        parse_graph(data)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d.update(nodez=[]), "nodez"),
        (lambda d: d.update(step_budget=0), "step_budget"),
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(name="no spaces"), "name"),
        (lambda d: d["nodes"][1].pop("type"), "nodes.1.type"),
        (lambda d: d["nodes"][0].update(colour="red"), "nodes.0.colour"),
        (lambda d: d["containers"][0].update(lifetime="forever"), "containers.0.lifetime"),
        (lambda d: d["containers"][0].update(reducer="max"), "containers.0.reducer"),
        (lambda d: d.update(nodesets={"null": {"mode": "cloud"}}), "nodesets.null.mode"),
    ],
    ids=["unknown-field", "budget", "version", "name", "node-type", "node-extra", "lifetime", "reducer", "mode"],
)
def test_a_bad_field_is_named(change: Any, named: str) -> None:
    data = small_graph().build().to_json()
    change(data)
    with pytest.raises(GraphFormatError) as info:
        parse_graph(data, source="mine.json")
    assert named in str(info.value)
    assert str(info.value).startswith("mine.json: ")


# -- load_graph ------------------------------------------------------------------------------------------------------


def test_load_graph_reads_what_dumps_writes(tmp_path: Path) -> None:
    graph = small_graph().build()
    path = tmp_path / "g.json"
    path.write_text(graph.dumps())
    assert load_graph(path) == graph
    assert load_graph(str(path)) == graph


def test_load_graph_names_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    assert "no graph file" in str(info.value)
    assert str(path) in str(info.value)


def test_load_graph_names_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"nodes": [')
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    assert "not JSON" in str(info.value)
    assert str(path) in str(info.value)


def test_load_graph_names_a_file_that_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    assert str(path) in str(info.value)


def test_load_graph_names_a_bad_field_and_the_file(tmp_path: Path) -> None:
    data = small_graph().build().to_json()
    data["edges"][2]["target"] = ""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    assert str(path) in str(info.value)
    assert "edges.2.target" in str(info.value)


def test_load_graph_refuses_a_document_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[1, 2, 3]")
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    assert str(path) in str(info.value)


def test_load_graph_refuses_a_file_that_is_too_large(tmp_path: Path) -> None:
    data = small_graph().build().to_json()
    data["description"] = "x" * (MAX_GRAPH_BYTES + 1)
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    message = str(info.value)
    assert str(path) in message
    assert str(path.stat().st_size) in message and str(MAX_GRAPH_BYTES) in message


def test_load_graph_errors_are_value_errors(tmp_path: Path) -> None:
    """A caller that guards against ValueError (the CLI, the server) sees graph file problems too."""
    with pytest.raises(ValueError):
        load_graph(tmp_path / "absent.json")


# -- the layout ------------------------------------------------------------------------------------------------------


def _plan_shape(graph: Graph) -> tuple[Any, ...]:
    plan = compile_graph(graph, nodesets={"null": env_nodeset("null")})
    bands = {n.id: n.band for n in plan.nodes.values()}
    return plan.pre, plan.body, plan.post, plan.loop_in, plan.loop_out, bands, plan.containers


def _run(graph: Graph) -> tuple[Any, list[Any]]:
    env = NullEnv(max_episode_steps=50)
    plan = compile_graph(graph, nodesets={"null": env_nodeset("null")})
    bus, recorder = EventBus(), MemoryRecorder()
    bus.subscribe(recorder)
    runtime = Runtime(envs=lambda name: env, env_spec=env.spec, env_capabilities=env.capabilities)
    with GraphRunner(plan, runtime, bus=bus) as runner:
        outcome = runner.run(TaskInstance("null", "t"))
    kinds = [(e.event, getattr(e, "signal", None), getattr(e, "action", None)) for e in recorder.events]
    return (outcome.status, outcome.steps, outcome.reason, outcome.success), kinds


def test_the_engine_ignores_the_layout() -> None:
    plain = small_graph().build()
    data = plain.to_json()
    data["layout"] = {
        "positions": {"ghost": {"x": "not a number"}, "reason": {"x": 1e9, "y": -1e9}},
        "viewport": {"zoom": 3},
        "groups": [{"title": "loop", "members": ["iterIn", "nope"]}],
    }
    data["description"] = "a different description"
    decorated = parse_graph(data)
    assert decorated.layout != plain.layout
    assert decorated.digest_data() == plain.digest_data()
    assert _plan_shape(decorated) == _plan_shape(plain)
    assert _run(decorated) == _run(plain)
