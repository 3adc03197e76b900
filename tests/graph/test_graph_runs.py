"""Graphs through the evaluation runner: `hylo graph validate|run`, `hylo nodes`, the Kernel ↔ graph invariant,
determinism across worker counts, nodesets from other packages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hylo
from hylo.agents.registry import make_agent
from hylo.core import EventBus, Kernel, MemoryRecorder
from hylo.envs.registry import get_benchmark
from hylo.eval.spec import EvalSpec
from hylo.graph import GraphRunner, Runtime, check_graph, compile_graph, load_graph, parse_graph
from hylo.graph.store import EXAMPLES_DIR

EXAMPLES = EXAMPLES_DIR


def _hylo(
    *args: str, cwd: Path, extra_path: Path | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


def _actions(recorder: MemoryRecorder) -> list[object]:
    actions = [e.action for e in recorder.events if e.event == "action"]
    recorder.events.clear()
    return actions


@pytest.mark.parametrize(
    ("graph_file", "agent_args", "episodes"),
    [
        ("babyai_expert.json", {}, 6),
        ("babyai_memory.json", {}, 3),
        ("metaworld_chunked_expert.json", {"chunk_size": 4, "execution_steps": 2}, 2),
    ],
)
def test_kernel_and_canonical_graph_give_the_same_actions_and_outcomes(
    graph_file: str, agent_args: dict[str, int], episodes: int
) -> None:
    graph = load_graph(EXAMPLES / graph_file)
    assert graph.placement is not None and graph.placement.task is not None
    bench = get_benchmark(graph.placement.benchmark)
    split, task = bench.check_split(graph.placement.split), graph.placement.task
    budget = bench.default_step_budget(task)
    kernel_env, graph_env = bench.make_env(), bench.make_env()
    kernel_trace, graph_trace = MemoryRecorder(), MemoryRecorder()
    kernel_bus, graph_bus = EventBus(), EventBus()
    kernel_bus.subscribe(kernel_trace)
    graph_bus.subscribe(graph_trace)
    kernel = Kernel(kernel_env, make_agent("expert", agent_args, bench), bus=kernel_bus, max_steps=budget)
    runtime = Runtime(
        envs=lambda name: graph_env,
        benchmark=bench,
        env_spec=graph_env.spec,
        env_capabilities=graph_env.capabilities,
        privileged=graph_env.privileged_state if graph_env.capabilities.privileged_state else None,
    )
    runner = GraphRunner(compile_graph(graph), runtime, bus=graph_bus, max_steps=budget)
    try:
        for index in range(episodes):
            placed = bench.task_instance(split, task, index)
            by_kernel, by_graph = kernel.run(placed), runner.run(placed)
            actions = _actions(kernel_trace)
            assert len(actions) == by_kernel.steps > 0
            assert _actions(graph_trace) == actions, placed.episode_id
            assert (by_graph.status, by_graph.success, by_graph.steps, by_graph.reason) == (
                by_kernel.status, by_kernel.success, by_kernel.steps, by_kernel.reason
            )  # fmt: skip
            assert by_graph.metrics["return"] == pytest.approx(by_kernel.metrics["return"])
    finally:
        runner.close()
        kernel.close()
        kernel_env.close()
        graph_env.close()


def test_graph_run_has_the_shape_and_results_of_eval_and_resumes(tmp_path: Path) -> None:
    graph = _hylo("graph", "run", str(EXAMPLES / "babyai_expert.json"), "--episodes", "4", "--seed", "3",
                  "--log-dir", str(tmp_path / "runs"), "--json", cwd=tmp_path)  # fmt: skip
    assert graph.returncode == 0, graph.stderr
    by_graph = json.loads(graph.stdout)  # exactly one JSON object on stdout
    agent = _hylo("eval", "babyai", "--agent", "expert", "--task", "GoToLocal", "--episodes", "4", "--seed", "3",
                  "--log-dir", str(tmp_path / "runs"), "--json", cwd=tmp_path)  # fmt: skip
    by_agent = json.loads(agent.stdout)
    assert set(by_graph) == set(by_agent)
    assert by_graph["spec"]["agent"] == "graph:babyai_expert" and by_graph["spec"]["tasks"] == ["GoToLocal"]
    assert by_graph["episodes"] == by_agent["episodes"]  # ids, seeds, statuses, reasons, steps
    assert by_graph["summary"]["status_counts"] == by_agent["summary"]["status_counts"]
    assert by_graph["summary"]["status_counts"]["success"] == 4

    again = _hylo("graph", "run", str(EXAMPLES / "babyai_expert.json"), "--episodes", "6", "--seed", "3",
                  "--log-dir", str(tmp_path / "runs"), "--json", cwd=tmp_path)  # fmt: skip
    resumed = json.loads(again.stdout)
    assert resumed["run_id"] == by_graph["run_id"] and resumed["executed_now"] == 2
    assert resumed["episodes"][:4] == by_graph["episodes"]


def test_graph_results_do_not_depend_on_the_worker_count(tmp_path: Path) -> None:
    spec = EvalSpec(
        benchmark="babyai",
        agent="graph:babyai_memory",
        graph=json.loads((EXAMPLES / "babyai_memory.json").read_text()),
        tasks=["GoToLocal"],
        episodes=6,
        seed=11,
    )
    one = hylo.evaluate(spec, log_dir=str(tmp_path / "one"))
    two = hylo.evaluate(spec, log_dir=str(tmp_path / "two"), workers=2)
    assert one.run_id == two.run_id  # the worker count is not part of the configuration
    assert [(r.episode_id, r.seed, r.status, r.steps, r.reason) for r in one.episodes] == [
        (r.episode_id, r.seed, r.status, r.steps, r.reason) for r in two.episodes
    ]
    assert {r.worker for r in two.episodes} == {"w0", "w1"}


def test_the_graph_step_budget_is_the_lowest_tier_of_the_cascade(tmp_path: Path) -> None:
    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    data["step_budget"] = 2
    spec = EvalSpec(benchmark="babyai", agent="graph:babyai_expert", graph=data, tasks=["GoToLocal"], episodes=3)
    capped = hylo.evaluate(spec, log_dir=str(tmp_path))
    assert capped.spec["step_budget"] == {"GoToLocal": 2}
    assert all(r.steps <= 2 for r in capped.episodes)
    assert any(r.reason == "max_steps" for r in capped.episodes)  # the expert needs more than 2 steps for some
    requested = hylo.evaluate(spec, log_dir=str(tmp_path), max_steps=64)  # the request wins
    assert requested.spec["step_budget"] == {"GoToLocal": 64}
    assert all(r.status.value == "success" for r in requested.episodes)


def test_graph_validate_reports_typed_errors_and_exits_1(tmp_path: Path) -> None:
    ok = _hylo("graph", "validate", str(EXAMPLES / "babyai_expert.json"), cwd=tmp_path)
    assert ok.returncode == 0 and "is valid" in ok.stdout
    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    data["nodes"].append({"id": "late", "type": "babyai.observe_instruction", "config": {}})
    data["edges"].append({"source": "step", "sourceHandle": "reward", "target": "late", "targetHandle": "trigger"})
    data["edges"].append({"source": "reason", "sourceHandle": "chunk", "target": "evaluate", "targetHandle": "trigger"})
    data["nodes"].append({"id": "mystery", "type": "babyai.teleport", "config": {}})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    out = _hylo("graph", "validate", str(bad), "--json", cwd=tmp_path)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["valid"] is False
    rules = {(e["node"], e["rule"]) for e in report["errors"]}
    assert ("mystery", "unknown_node_type") in rules
    assert ("evaluate", "band_edge") in rules  # the verdict may read only iterOut's final_* side
    assert ("late", "misplaced_node") not in rules  # an observe node downstream of step is still in the loop
    message = next(e["message"] for e in report["errors"] if e["rule"] == "unknown_node_type")
    assert "babyai.teleport" in message and "babyai.step" in message  # names the type and what exists

    run = _hylo("graph", "run", str(bad), "--episodes", "1", "--log-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert run.returncode == 2 and "band_edge" in run.stderr and not (tmp_path / "runs").exists()

    missing = _hylo("graph", "validate", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert missing.returncode == 2 and "nope.json" in missing.stderr


def test_a_built_in_example_runs_by_name_and_a_wrong_name_lists_them(tmp_path: Path) -> None:
    run = _hylo("graph", "run", "babyai_expert", "--episodes", "1", "--log-dir", str(tmp_path / "runs"), "--json",
                cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["spec"]["agent"] == "graph:babyai_expert" and result["spec"]["tasks"] == ["GoToLocal"]
    assert [e["status"] for e in result["episodes"]] == ["success"]

    valid = _hylo("graph", "validate", "metaworld_chunked_expert", cwd=tmp_path)
    assert valid.returncode == 0 and "'metaworld_chunked_expert' is valid" in valid.stdout

    wrong = _hylo("graph", "validate", "babyai_expret", cwd=tmp_path)
    assert wrong.returncode == 2 and "'babyai_expret'" in wrong.stderr
    assert "babyai_expert, babyai_memory, metaworld_chunked_expert" in wrong.stderr

    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    (tmp_path / "babyai_expert").write_text(json.dumps({**data, "name": "local_copy"}))  # a file wins over a name
    local = _hylo("graph", "validate", "babyai_expert", cwd=tmp_path)
    assert local.returncode == 0 and "'local_copy' is valid" in local.stdout


def test_nodes_json_lists_every_node_type_with_ports_and_config_schema(tmp_path: Path) -> None:
    out = _hylo("nodes", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    groups = {g["nodeset"]: g for g in json.loads(out.stdout)}
    assert {"core", "agents", "babyai", "metaworld"} <= set(groups)
    types = {n["type"]: n for g in groups.values() for n in g["nodes"]}
    step = types["babyai.step"]
    assert step["role"] == "actuator" and step["owner"] == "env"
    assert {k: v for k, v in step["inputs"][0].items() if k != "description"} == {
        "name": "action",
        "wire": "chunk",
        "required": True,
    }
    assert "observation" not in {p["name"] for p in step["outputs"]}  # step never returns an observation
    reason = types["reason"]
    assert reason["config"]["required"] == ["agent"] and "remember" in reason["config"]["properties"]
    assert types["iterOut"]["dynamic_ports"] is True


def test_a_nodeset_from_another_package_is_found_through_its_entry_point(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "toynodes-0.1.dist-info").mkdir(parents=True)
    (site / "toynodes-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toynodes\nVersion: 0.1\n")
    (site / "toynodes-0.1.dist-info" / "entry_points.txt").write_text("[hylo.nodesets]\ntoy = toynodes:NODESET\n")
    (site / "toynodes.py").write_text(
        textwrap.dedent(
            """
            from hylo.core import ActionChunk
            from hylo.graph import Node, Nodeset, Owner, Port, Role, Wire

            class Left(Node):
                '''Always turn left (BabyAI action 0) for two steps.'''
                type_name = "toy.left"
                nodeset = "toy"
                role = Role.POLICY
                owner = Owner.AGENT
                inputs = (Port("observation", Wire.OBSERVATION),)
                outputs = (Port("chunk", Wire.CHUNK),)

                def forward(self, inputs):
                    return {"chunk": ActionChunk([0, 0])}

            NODESET = Nodeset("toy", (Left,), "Toy nodes", Owner.AGENT)
            """
        )
    )
    listed = _hylo("nodes", "--json", "--nodeset", "toy", cwd=tmp_path, extra_path=site)
    assert listed.returncode == 0, listed.stderr
    assert [n["type"] for g in json.loads(listed.stdout) for n in g["nodes"]] == ["toy.left"]

    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    data["name"] = "babyai_left"
    data["step_budget"] = 5
    for node in data["nodes"]:
        if node["id"] == "reason":
            node.update(type="toy.left", config={})
    graph = tmp_path / "left.json"
    graph.write_text(json.dumps(data))
    out = _hylo("graph", "run", str(graph), "--episodes", "2", "--log-dir", str(tmp_path / "runs"), "--json",
                cwd=tmp_path, extra_path=site)  # fmt: skip
    assert out.returncode == 0, out.stderr
    episodes = json.loads(out.stdout)["episodes"]
    assert [(e["status"], e["steps"], e["reason"]) for e in episodes] == [("failure", 5, "max_steps")] * 2


def test_a_node_that_returns_an_error_dict_makes_the_episode_an_error_in_the_evallog(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "errnodes.py").write_text(
        textwrap.dedent(
            """
            from hylo.graph import Node, Nodeset, Owner, Port, Role, Wire

            class Flaky(Node):
                type_name = "errnodes.flaky"
                nodeset = "errnodes"
                role = Role.POLICY
                owner = Owner.AGENT
                inputs = (Port("observation", Wire.OBSERVATION),)
                outputs = (Port("chunk", Wire.CHUNK),)

                def forward(self, inputs):
                    return {"error": "model server returned 503"}

            NODESET = Nodeset("errnodes", (Flaky,), "", Owner.AGENT)
            """
        )
    )
    (site / "errnodes-0.1.dist-info").mkdir()
    (site / "errnodes-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: errnodes\nVersion: 0.1\n")
    (site / "errnodes-0.1.dist-info" / "entry_points.txt").write_text("[hylo.nodesets]\nerrnodes = errnodes:NODESET\n")
    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    for node in data["nodes"]:
        if node["id"] == "reason":
            node.update(type="errnodes.flaky", config={})
    graph = tmp_path / "flaky.json"
    graph.write_text(json.dumps(data))
    out = _hylo("graph", "run", str(graph), "--episodes", "3", "--log-dir", str(tmp_path / "runs"), "--json",
                "--strict", cwd=tmp_path, extra_path=site)  # fmt: skip
    assert out.returncode == 3, out.stderr  # --strict: an episode is error
    result = json.loads(out.stdout)
    assert result["summary"]["status_counts"]["error"] == 3 and result["summary"]["status_counts"]["success"] == 0
    reason = result["episodes"][0]["reason"]
    assert "'reason'" in reason and "undeclared outputs ['error']" in reason and "503" in reason
    assert all(e["steps"] == 0 for e in result["episodes"])


def test_an_observe_image_node_turns_rendering_on_and_gets_the_camera_frame() -> None:
    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    data["nodes"] += [
        {"id": "camera", "type": "babyai.observe_image", "config": {}},
        {"id": "keep", "type": "remember", "config": {"container": "frame"}},
    ]
    data["edges"] += [
        {"source": "iterIn", "sourceHandle": "step", "target": "camera", "targetHandle": "trigger"},
        {"source": "camera", "sourceHandle": "image", "target": "keep", "targetHandle": "value"},
    ]
    data["containers"] = [{"name": "frame", "lifetime": "step"}]
    bench = get_benchmark("babyai")
    env = bench.make_env()  # built without rendering, as for an agent that reads no camera
    runtime = Runtime(envs=lambda name: env, benchmark=bench, env_spec=env.spec, env_capabilities=env.capabilities,
                      privileged=env.privileged_state)  # fmt: skip
    with GraphRunner(compile_graph(parse_graph(data)), runtime, max_steps=64) as runner:
        outcome = runner.run(bench.task_instance("default", "GoToLocal", 0))
        assert outcome.status.value == "success"
        steps, values = zip(*runner.checkpoints, strict=True)
        assert list(steps) == list(range(outcome.steps))
        frame = values[0]["frame"]
        assert frame.dtype.name == "uint8" and frame.ndim == 3 and frame.shape[2] == 3
        assert runner.containers["frame"].read() is None  # a step container: cleared by the last step_end
    env.close()


@pytest.mark.parametrize("server", [None, "agents", "babyai"])
def test_a_vision_agent_runs_as_a_reason_node_locally_and_in_server_mode(tmp_path: Path, server: str | None) -> None:
    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    data["name"] = "babyai_camera"
    data["step_budget"] = 3
    for node in data["nodes"]:
        if node["id"] == "reason":
            node["config"] = {"agent": "graph_agents:CameraAgent"}
    if server is not None:
        data["nodesets"] = {server: {"mode": "server"}}
    spec = EvalSpec(benchmark="babyai", agent="graph:babyai_camera", graph=data, tasks=["GoToLocal"], episodes=2)
    result = hylo.evaluate(spec, log_dir=str(tmp_path))
    assert [(r.status.value, r.steps, r.reason) for r in result.episodes] == [("failure", 3, "max_steps")] * 2


def test_a_graph_cannot_invent_a_success_the_env_never_reported(tmp_path: Path) -> None:
    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    data["name"] = "babyai_liar"
    data["step_budget"] = 2
    data["nodes"] += [{"id": "claim", "type": "constant", "config": {"value": {"success": True}, "wire": "step"}}]
    data["edges"] = [e for e in data["edges"] if e["target"] != "evaluate"]
    data["edges"] += [{"source": "claim", "sourceHandle": "value", "target": "evaluate", "targetHandle": "result"}]
    data["edges"] += [
        {"source": "iterOut", "sourceHandle": "final_steps", "target": "evaluate", "targetHandle": "trigger"}
    ]
    spec = EvalSpec(benchmark="babyai", agent="graph:babyai_liar", graph=data, tasks=["GoToLocal"], episodes=3)
    result = hylo.evaluate(spec, log_dir=str(tmp_path))
    assert result.summary.status_counts["success"] == 0  # the judge said success; the env did not
    assert {(r.status.value, r.reason) for r in result.episodes} == {("failure", "max_steps")}


def test_a_failed_critical_trace_recorder_makes_graph_episodes_infra_invalid() -> None:
    bench = get_benchmark("babyai")
    env = bench.make_env()
    bus = EventBus()

    def broken(event: object) -> None:
        if getattr(event, "event", "") == "action":
            raise OSError("disk full")

    bus.subscribe(broken, critical=True)
    runtime = Runtime(envs=lambda name: env, benchmark=bench, env_spec=env.spec, env_capabilities=env.capabilities,
                      privileged=env.privileged_state)  # fmt: skip
    with GraphRunner(
        compile_graph(load_graph(EXAMPLES / "babyai_expert.json")), runtime, bus=bus, max_steps=64
    ) as runner:
        first = runner.run(bench.task_instance("default", "GoToLocal", 0))
        later = runner.run(bench.task_instance("default", "GoToLocal", 1))
    env.close()
    assert first.status.value == "infra_invalid" and "disk full" in first.reason
    assert later.status.value == "infra_invalid" and "nothing records this one" in later.reason


def test_env_nodes_without_a_reset_and_a_placement_on_another_benchmark_are_refused() -> None:
    data = json.loads((EXAMPLES / "babyai_expert.json").read_text())
    data["nodes"] = [n for n in data["nodes"] if n["id"] != "reset"]
    data["edges"] = [e for e in data["edges"] if e["source"] != "reset"]
    data["placement"] = {"benchmark": "metaworld"}
    errors = {(e.node, e.rule): e.message for e in check_graph(parse_graph(data))}
    assert set(errors) == {("observe", "no_reset"), ("step", "no_reset"), (None, "bad_placement")}
    assert "babyai.reset" in errors[("step", "no_reset")]
    assert "'metaworld'" in errors[(None, "bad_placement")] and "babyai" in errors[(None, "bad_placement")]
