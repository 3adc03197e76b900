"""Validation: a graph is checked whole before anything runs; each problem is a typed error naming the node, the rule
and the offending thing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hylo.graph import (
    Band,
    GraphError,
    GraphInvalid,
    Node,
    Nodeset,
    Port,
    Wire,
    check_graph,
    compile_graph,
    load_graph,
    parse_graph,
)
from hylo.graph.env_nodes import env_nodeset
from hylo.graph.store import EXAMPLES_DIR

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.json"))
CREATED: list[str] = []


class Pass(Node):
    """Two optional inputs of any wire, one output."""

    type_name = "v.pass"
    inputs = (Port("a", Wire.ANY, required=False), Port("b", Wire.ANY, required=False))
    outputs = (Port("out", Wire.ANY),)

    def __init__(self, node_id: str, config: Any = None) -> None:
        CREATED.append(node_id)
        super().__init__(node_id, config)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"out": inputs.get("a")}


def _emitter(wire: Wire) -> type[Node]:
    return type(f"Emit_{wire.value}", (Node,), {"type_name": f"v.emit_{wire.value}", "outputs": (Port("out", wire),)})


def _sink(wire: Wire) -> type[Node]:
    return type(f"Sink_{wire.value}", (Node,), {"type_name": f"v.sink_{wire.value}", "inputs": (Port("in", wire),)})


V = Nodeset("v", (Pass, *(_emitter(w) for w in Wire), *(_sink(w) for w in Wire)))
NODESETS = {"null": env_nodeset("null"), "v": V}


CARRY = {"name": "result", "wire": "step"}


def base() -> dict[str, Any]:
    """A valid graph over the null env: reset -> loop(observe -> reason -> step) -> evaluate."""
    return {
        "name": "base",
        "step_budget": 5,
        "nodes": [
            {"id": "reset", "type": "null.reset"},
            {"id": "iterIn", "type": "iterIn", "config": {"pair": "iterOut"}},
            {"id": "iterOut", "type": "iterOut", "config": {"pair": "iterIn", "carry": [CARRY]}},
            {"id": "observe", "type": "null.observe"},
            {"id": "reason", "type": "reason", "config": {"agent": "graph_agents:ScriptedAgent"}},
            {"id": "step", "type": "null.step"},
            {"id": "evaluate", "type": "null.evaluate"},
        ],
        "edges": [
            edge("reset.observation", "iterIn.start"),
            edge("iterIn.step", "observe.trigger"),
            edge("observe.observation", "reason.observation"),
            edge("reason.chunk", "step.action"),
            edge("step.result", "iterOut.result"),
            edge("step.done", "iterOut.stop"),
            edge("iterOut.final_result", "evaluate.result"),
        ],
        "containers": [{"name": "memo", "lifetime": "episode", "reducer": "append"}],
    }


def edge(source: str, target: str) -> dict[str, str]:
    src, src_port = source.split(".")
    dst, dst_port = target.split(".")
    return {"source": src, "sourceHandle": src_port, "target": dst, "targetHandle": dst_port}


def drop_edge(data: dict[str, Any], source: str, target: str) -> None:
    data["edges"].remove(edge(source, target))


def problems(data: dict[str, Any]) -> list[GraphError]:
    return check_graph(parse_graph(data), nodesets=NODESETS)


def the_error(data: dict[str, Any], rule: str, node: str | None) -> GraphError:
    """The one error of `rule` the graph has, at `node`; and compile_graph refuses the graph with it."""
    found = [e for e in problems(data) if e.rule == rule]
    assert [e.node for e in found] == [node], f"expected one {rule!r} error at {node!r}, got {problems(data)}"
    with pytest.raises(GraphInvalid) as info:
        compile_graph(parse_graph(data), nodesets=NODESETS)
    assert found[0] in info.value.errors
    assert f"[{rule}]" in str(info.value)
    return found[0]


def test_the_base_graph_is_valid() -> None:
    assert problems(base()) == []
    plan = compile_graph(parse_graph(base()), nodesets=NODESETS)
    assert plan.pre == [["reset"]]
    assert plan.body == [["iterIn"], ["observe"], ["reason"], ["step"], ["iterOut"]]
    assert plan.post == [["evaluate"]]


# -- nodes, types, configs -----------------------------------------------------------------------------------------


def test_duplicate_id() -> None:
    data = base()
    data["nodes"].append({"id": "observe", "type": "v.pass"})
    error = the_error(data, "duplicate_id", "observe")
    assert "'observe'" in error.message


@pytest.mark.parametrize(
    ("type_name", "named"),
    [("null.teleport", "null.teleport"), ("frobnicate", "frobnicate"), ("nosuchbench.reset", "nosuchbench")],
)
def test_unknown_node_type(type_name: str, named: str) -> None:
    data = base()
    data["nodes"].append({"id": "mystery", "type": type_name})
    error = the_error(data, "unknown_node_type", "mystery")
    assert named in error.message


def test_unknown_node_type_lists_what_the_nodeset_has() -> None:
    data = base()
    data["nodes"].append({"id": "mystery", "type": "null.teleport"})
    error = the_error(data, "unknown_node_type", "mystery")
    assert "null.step" in error.message


@pytest.mark.parametrize(
    ("node", "config", "named"),
    [
        ({"id": "k", "type": "constant"}, {"value": 1, "colour": "red"}, "colour"),
        ({"id": "k", "type": "constant"}, {"wire": "smell"}, "wire"),
        ({"id": "k", "type": "null.step"}, {"speed": 2}, "speed"),
        ({"id": "k", "type": "recall"}, {}, "container"),
    ],
    ids=["extra-key", "bad-wire", "takes-no-config", "missing-key"],
)
def test_bad_config(node: dict[str, Any], config: dict[str, Any], named: str) -> None:
    data = base()
    data["nodes"].append({**node, "config": config})
    error = the_error(data, "bad_config", "k")
    assert named in error.message
    assert node["type"] in error.message


def test_reason_without_an_agent_is_bad_config() -> None:
    data = base()
    data["nodes"][4]["config"] = {}
    error = the_error(data, "bad_config", "reason")
    assert "agent" in error.message


# -- loop pivots -----------------------------------------------------------------------------------------------------


def test_unpaired_iter_in() -> None:
    data = base()
    data["nodes"][1]["config"]["pair"] = "elsewhere"
    errors = [e for e in problems(data) if e.rule == "unpaired_loop"]
    assert {e.node for e in errors} == {"iterIn", "iterOut"}
    by_node = {e.node: e.message for e in errors}
    assert "'elsewhere'" in by_node["iterIn"]
    assert "'iterOut'" in by_node["iterIn"]  # it lists the iterOut nodes there are


def test_lonely_iter_out() -> None:
    data = base()
    data["nodes"].append({"id": "strayOut", "type": "iterOut", "config": {"pair": "nobody"}})
    error = the_error(data, "unpaired_loop", "strayOut")
    assert "'nobody'" in error.message


def test_iter_out_that_does_not_name_its_iter_in_back() -> None:
    data = base()
    data["nodes"][2]["config"]["pair"] = "someoneElse"
    errors = {e.node: e for e in problems(data) if e.rule == "unpaired_loop"}
    assert set(errors) == {"iterIn", "iterOut"}
    assert "'someoneElse'" in errors["iterOut"].message


def test_multiple_loops() -> None:
    data = base()
    data["nodes"] += [
        {"id": "in2", "type": "iterIn", "config": {"pair": "out2"}},
        {"id": "out2", "type": "iterOut", "config": {"pair": "in2"}},
    ]
    error = the_error(data, "multiple_loops", "in2")
    assert "'iterIn'" in error.message


# -- edges -----------------------------------------------------------------------------------------------------------


def test_unknown_node_in_an_edge() -> None:
    data = base()
    data["edges"].append(edge("ghost.out", "evaluate.trigger"))
    error = the_error(data, "unknown_node", "ghost")
    assert "'ghost'" in error.message
    assert "ghost.out -> evaluate.trigger" in error.message


@pytest.mark.parametrize(
    ("source", "target", "node", "named"),
    [
        ("reason.chunk", "step.actoin", "step", "'actoin'"),
        ("reason.plan", "step.action", "reason", "'plan'"),
    ],
    ids=["input", "output"],
)
def test_unknown_port(source: str, target: str, node: str, named: str) -> None:
    data = base()
    drop_edge(data, "reason.chunk", "step.action")
    data["edges"].append(edge(source, target))
    error = the_error(data, "unknown_port", node)
    assert named in error.message
    assert ("'action'" if node == "step" else "'chunk'") in error.message  # it lists the ports there are


def test_wire_mismatch() -> None:
    data = base()
    drop_edge(data, "reason.chunk", "step.action")
    data["nodes"].append({"id": "words", "type": "constant", "config": {"value": "left", "wire": "text"}})
    data["edges"].append(edge("words.value", "step.action"))
    error = the_error(data, "wire_mismatch", "step")
    assert "'action'" in error.message
    assert "chunk" in error.message and "text" in error.message
    assert "words.value" in error.message


@pytest.mark.parametrize(
    ("source", "target", "fits"),
    [
        (Wire.INTEGER, Wire.NUMBER, True),
        (Wire.ACTION, Wire.CHUNK, True),
        (Wire.TEXT, Wire.JSON, True),
        (Wire.ANY, Wire.IMAGE, True),
        (Wire.IMAGE, Wire.ANY, True),
        (Wire.NUMBER, Wire.INTEGER, False),
        (Wire.CHUNK, Wire.ACTION, False),
        (Wire.JSON, Wire.TEXT, False),
        (Wire.BOOL, Wire.NUMBER, False),
        (Wire.IMAGE, Wire.OBSERVATION, False),
    ],
)
def test_wire_types_on_an_edge(source: Wire, target: Wire, fits: bool) -> None:
    data = base()
    data["nodes"] += [{"id": "src", "type": f"v.emit_{source.value}"}, {"id": "dst", "type": f"v.sink_{target.value}"}]
    data["edges"].append(edge("src.out", "dst.in"))
    mismatches = [e for e in problems(data) if e.rule == "wire_mismatch"]
    if fits:
        assert problems(data) == []
    else:
        assert [e.node for e in mismatches] == ["dst"]
        assert source.value in mismatches[0].message and target.value in mismatches[0].message


def test_duplicate_input() -> None:
    data = base()
    data["nodes"].append({"id": "never", "type": "constant", "config": {"value": False, "wire": "bool"}})
    data["edges"].append(edge("never.value", "iterOut.stop"))
    error = the_error(data, "duplicate_input", "iterOut")
    assert "'stop'" in error.message
    assert "step.done" in error.message and "never.value" in error.message


@pytest.mark.parametrize(
    ("source", "target", "node", "port"),
    [
        ("reason.chunk", "step.action", "step", "action"),
        ("observe.observation", "reason.observation", "reason", "observation"),
        ("step.result", "iterOut.result", "iterOut", "result"),  # a carry port must be fed
    ],
)
def test_unfilled_required_port(source: str, target: str, node: str, port: str) -> None:
    data = base()
    drop_edge(data, source, target)
    error = the_error(data, "unfilled_port", node)
    assert f"'{port}'" in error.message
    assert f"'{node}'" in error.message


def test_cycle_outside_the_loop() -> None:
    data = base()
    data["nodes"] += [{"id": "a", "type": "v.pass"}, {"id": "b", "type": "v.pass"}]
    data["edges"] += [edge("a.out", "b.a"), edge("b.out", "a.a")]
    errors = [e for e in problems(data) if e.rule == "cycle"]
    assert len(errors) == 1
    assert errors[0].node in {"a", "b"}
    assert "'a'" in errors[0].message and "'b'" in errors[0].message


def test_an_edge_from_iter_out_back_to_iter_in_is_a_cycle() -> None:
    data = base()
    data["edges"].append(edge("iterOut.final_result", "iterIn.init_result"))
    errors = [e for e in problems(data) if e.rule == "cycle"]
    assert len(errors) == 1
    assert "'iterIn'" in errors[0].message and "'iterOut'" in errors[0].message


# -- bands -----------------------------------------------------------------------------------------------------------


def test_band_edge_from_the_loop_body_into_the_after_loop_band() -> None:
    data = base()
    data["nodes"].append({"id": "report", "type": "v.pass"})
    data["edges"] += [edge("iterOut.final_steps", "report.a"), edge("step.reward", "report.b")]
    error = the_error(data, "band_edge", "report")
    assert "step.reward" in error.message
    assert "final_" in error.message


def test_the_after_loop_band_may_read_the_final_side() -> None:
    data = base()
    data["nodes"].append({"id": "report", "type": "v.pass"})
    data["edges"] += [edge("iterOut.final_steps", "report.a"), edge("iterOut.final_stop", "report.b")]
    assert problems(data) == []
    plan = compile_graph(parse_graph(data), nodesets=NODESETS)
    assert plan.nodes["report"].band is Band.POST


def test_reset_in_the_loop_body_is_misplaced() -> None:
    data = base()
    data["nodes"].append({"id": "reset2", "type": "null.reset"})
    data["edges"].append(edge("iterIn.step", "reset2.trigger"))
    error = the_error(data, "misplaced_node", "reset2")
    assert "pre-loop" in error.message and "'reset2'" in error.message


def test_observe_before_the_loop_is_misplaced() -> None:
    data = base()
    data["nodes"].append({"id": "peek", "type": "null.observe"})
    error = the_error(data, "misplaced_node", "peek")
    assert "loop body" in error.message and "'peek'" in error.message


def test_evaluate_inside_the_loop_is_misplaced() -> None:
    data = base()
    data["nodes"].append({"id": "judge", "type": "null.evaluate"})
    data["edges"].append(edge("step.result", "judge.result"))
    error = the_error(data, "misplaced_node", "judge")
    assert "after-loop" in error.message


def test_a_step_without_a_loop_is_misplaced() -> None:
    data = {
        "name": "flat",
        "nodes": [{"id": "k", "type": "constant", "config": {"value": [0.0] * 7, "wire": "action"}},
                  {"id": "step", "type": "null.step"}],
        "edges": [edge("k.value", "step.action")],
    }  # fmt: skip
    error = the_error(data, "misplaced_node", "step")
    assert "needs a loop" in error.message


def test_two_step_nodes() -> None:
    data = base()
    data["nodes"].append({"id": "step2", "type": "null.step"})
    data["edges"].append(edge("reason.chunk", "step2.action"))
    error = the_error(data, "multiple_step_nodes", "step2")
    assert "'step'" in error.message


def test_two_policy_nodes() -> None:
    data = base()
    data["nodes"].append({"id": "reason2", "type": "reason", "config": {"agent": "graph_agents:ScriptedAgent"}})
    data["edges"].append(edge("observe.observation", "reason2.observation"))
    error = the_error(data, "multiple_policy_nodes", "reason2")
    assert "'reason'" in error.message


# -- containers and nodesets -----------------------------------------------------------------------------------------


def test_unknown_container() -> None:
    data = base()
    data["nodes"].append({"id": "recall", "type": "recall", "config": {"container": "notes"}})
    error = the_error(data, "unknown_container", "recall")
    assert "'notes'" in error.message
    assert "memo" in error.message  # what is declared


def test_reason_remembering_into_an_undeclared_container() -> None:
    data = base()
    data["nodes"][4]["config"]["remember"] = "diary"
    error = the_error(data, "unknown_container", "reason")
    assert "'diary'" in error.message


def test_duplicate_container() -> None:
    data = base()
    data["containers"].append({"name": "memo", "lifetime": "run"})
    error = the_error(data, "duplicate_container", None)
    assert "'memo'" in error.message


def test_options_for_an_unused_nodeset() -> None:
    data = base()
    data["nodesets"] = {"ghostset": {"mode": "server"}}
    error = the_error(data, "unknown_nodeset", None)
    assert "'ghostset'" in error.message
    assert "null" in error.message  # the nodesets the graph uses


def test_core_cannot_run_in_server_mode() -> None:
    data = base()
    data["nodesets"] = {"core": {"mode": "server"}}
    error = the_error(data, "bad_nodeset_mode", None)
    assert "core" in error.message


# -- the whole -------------------------------------------------------------------------------------------------------


def test_every_problem_is_reported_at_once() -> None:
    data = base()
    data["nodes"].append({"id": "mystery", "type": "null.teleport"})
    data["nodes"].append({"id": "recall", "type": "recall", "config": {"container": "notes"}})
    data["nodes"].append({"id": "k", "type": "constant", "config": {"colour": "red"}})
    with pytest.raises(GraphInvalid) as info:
        compile_graph(parse_graph(data), nodesets=NODESETS)
    rules = {(e.rule, e.node) for e in info.value.errors}
    assert rules == {("unknown_node_type", "mystery"), ("unknown_container", "recall"), ("bad_config", "k")}
    text = str(info.value)
    assert "'base' is invalid (3 errors)" in text
    for error in info.value.errors:
        assert str(error) in text
        assert error.to_json() == {"node": error.node, "rule": error.rule, "message": error.message}


def test_validation_happens_before_any_node_is_built() -> None:
    CREATED.clear()
    data = base()
    data["nodes"].append({"id": "a", "type": "v.pass"})
    data["edges"].append(edge("iterIn.step", "a.a"))
    drop_edge(data, "observe.observation", "reason.observation")
    with pytest.raises(GraphInvalid):
        compile_graph(parse_graph(data), nodesets=NODESETS)
    assert CREATED == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_examples_validate(path: Path) -> None:
    graph = load_graph(path)
    assert check_graph(graph) == []
    plan = compile_graph(graph)
    assert plan.pre == [["reset"]]
    assert plan.post == [["evaluate"]]
    assert plan.loop_in == "iterIn" and plan.loop_out == "iterOut"
    body = {n for level in plan.body for n in level}
    assert {"observe", "reason", "step"} <= body
    assert graph.placement is not None
    assert plan.benchmarks == [graph.placement.benchmark]
