"""The graph executor: bands around one loop, lifecycle signals with scope ids, state containers cleared only by their
signals, honest statuses for every failure, concurrency within a level, and the Kernel's chunking and shield."""

from __future__ import annotations

import asyncio
import copy
import gc
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import graph_agents
import numpy as np
import pytest
from graph_agents import LOG
from pydantic import BaseModel

from hylo.core import (
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    InvalidAction,
    Kernel,
    MemoryRecorder,
    SignalFailed,
    SimulationDiverged,
    TaskInstance,
)
from hylo.envs.null import NullEnv
from hylo.graph import (
    Graph,
    GraphBuilder,
    GraphRunner,
    GraphSetupError,
    Node,
    NodeRef,
    Nodeset,
    Port,
    Role,
    Runtime,
    Wire,
    compile_graph,
)
from hylo.graph.env_nodes import env_nodeset

AGENT = "graph_agents:ScriptedAgent"
SEEN: dict[str, list[dict[str, Any]]] = {}
"""The inputs each probing node fired with, by node id."""
EVENTS: dict[tuple[Any, str], asyncio.Event] = {}


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    LOG.clear()
    SEEN.clear()
    EVENTS.clear()
    yield
    LOG.clear()


# -- a test env and test nodes ---------------------------------------------------------------------------------------


class RecEnv(NullEnv):
    """The null env, logging its resets and steps to LOG and keeping the actions it got; `fail` maps a method
    (reset, observe, step) to the exception it raises."""

    def __init__(self, fail: dict[str, Exception] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail = fail or {}
        self.actions: list[np.ndarray] = []

    def reset(self, task: TaskInstance) -> Any:
        LOG.append(("env.reset", task.index))
        if "reset" in self.fail:
            raise self.fail["reset"]
        return super().reset(task)

    def observe(self) -> Any:
        if "observe" in self.fail:
            raise self.fail["observe"]
        return super().observe()

    def step(self, action: Any) -> Any:
        LOG.append(("env.step",))
        if "step" in self.fail:
            raise self.fail["step"]
        self.actions.append(np.array(action, copy=True))
        return super().step(action)


class Source(Node):
    type_name = "t.source"
    outputs = (Port("value", Wire.INTEGER),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        LOG.append(("fire", self.id))
        return {"value": 7}


class Probe(Node):
    type_name = "t.probe"
    inputs = (Port("x", Wire.ANY, required=False), Port("y", Wire.ANY, required=False))
    outputs = (Port("out", Wire.ANY, required=False),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        LOG.append(("fire", self.id))
        SEEN.setdefault(self.id, []).append(copy.deepcopy(inputs))
        return {"out": inputs.get("x")}


class Vandal(Node):
    """Empties the list it is given."""

    type_name = "t.vandal"
    inputs = (Port("x", Wire.ANY),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        if isinstance(inputs["x"], list):
            inputs["x"].clear()
        return {}


class Spy(Node):
    """Logs the signals it is given."""

    type_name = "t.spy"

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        LOG.append(("fire", self.id))
        return {}

    def on_signal(self, signal: Any) -> None:
        LOG.append(("signal", signal.value))


class FragileConfig(BaseModel):
    fail_on: str


class Fragile(Node):
    """Fails when it is given the signal `fail_on`."""

    type_name = "t.fragile"
    config_model = FragileConfig

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {}

    def on_signal(self, signal: Any) -> None:
        assert isinstance(self.config, FragileConfig)
        if signal.value == self.config.fail_on:
            raise RuntimeError(f"cannot take {signal.value}")


class StopAtConfig(BaseModel):
    n: int


class StopAt(Node):
    """Raises its stop flag in the n-th iteration."""

    type_name = "t.stop_at"
    config_model = StopAtConfig
    inputs = (Port("step", Wire.INTEGER),)
    outputs = (Port("stop", Wire.BOOL),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(self.config, StopAtConfig)
        return {"stop": inputs["step"] + 1 >= self.config.n}


class JudgeConfig(BaseModel):
    verdict: bool = False


class Judge(Node):
    """An evaluate node that records what it was given and returns its configured verdict."""

    type_name = "t.judge"
    role = Role.EVALUATE
    config_model = JudgeConfig
    inputs = (
        Port("result", Wire.STEP, required=False),
        Port("steps", Wire.INTEGER, required=False),
        Port("stopped", Wire.BOOL, required=False),
    )
    outputs = (Port("success", Wire.BOOL), Port("metrics", Wire.JSON))

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(self.config, JudgeConfig)
        LOG.append(("fire", self.id))
        SEEN.setdefault(self.id, []).append(dict(inputs))
        return {"success": self.config.verdict, "metrics": {"judged": 1.0}}


class Boom(Node):
    type_name = "t.boom"
    inputs = (Port("x", Wire.ANY, required=False),)
    outputs = (Port("out", Wire.ANY),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("kaboom")


RESULTS: dict[str, Any] = {
    "undeclared": {"out": 1, "surprise": 2},
    "missing": {},
    "none": None,
    "list": [("out", 1)],
    "text": "out",
    "error": {"error": "disk full"},
}


class MisbehaveConfig(BaseModel):
    kind: str


class Misbehave(Node):
    """Returns one of RESULTS, none of which keeps the contract (one required output, `out`)."""

    type_name = "t.misbehave"
    config_model = MisbehaveConfig
    inputs = (Port("x", Wire.ANY, required=False),)
    outputs = (Port("out", Wire.ANY),)

    def forward(self, inputs: dict[str, Any]) -> Any:
        assert isinstance(self.config, MisbehaveConfig)
        return RESULTS[self.config.kind]


class AsyncMisbehave(Misbehave):
    type_name = "t.amisbehave"

    async def forward(self, inputs: dict[str, Any]) -> Any:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().forward(inputs)


class PingConfig(BaseModel):
    me: str
    other: str


def _event(key: Any, name: str) -> asyncio.Event:
    return EVENTS.setdefault((key, name), asyncio.Event())


class Ping(Node):
    """Sets its own event, then waits for its partner's: two pings finish only if they run concurrently (a
    sequential engine times the first one out, which fails the episode)."""

    type_name = "t.ping"
    config_model = PingConfig
    inputs = (Port("step", Wire.INTEGER, required=False),)
    outputs = (Port("out", Wire.TEXT),)

    async def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(self.config, PingConfig)
        key = inputs.get("step", "once")
        _event(key, self.config.me).set()
        await asyncio.wait_for(_event(key, self.config.other).wait(), timeout=1.0)
        LOG.append(("ping", self.id, key))
        return {"out": self.id}


class Nap(Node):
    type_name = "t.nap"
    inputs = (Port("x", Wire.ANY, required=False),)
    outputs = (Port("out", Wire.ANY),)

    async def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        LOG.append(("fire", self.id))
        return {"out": 1}


class AsyncBoom(Nap):
    type_name = "t.aboom"

    async def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        raise RuntimeError("async kaboom")


T = Nodeset(
    "t",
    (Source, Probe, Vandal, Spy, Fragile, StopAt, Judge, Boom, Misbehave, AsyncMisbehave, Ping, Nap, AsyncBoom),
)
NODESETS = {"null": env_nodeset("null"), "t": T}


# -- graphs and runners ----------------------------------------------------------------------------------------------


def canonical(
    *, budget: int | None = 5, agent: str = AGENT, args: dict[str, Any] | None = None, stop: bool = True,
    evaluate: str | None = "null.evaluate", verdict: bool = False,
) -> tuple[GraphBuilder, dict[str, NodeRef]]:  # fmt: skip
    """reset -> loop(observe -> reason -> step) -> evaluate, over the null env."""
    g = GraphBuilder("canon", step_budget=budget)
    n = {"reset": g.node("null.reset", "reset")}
    n["iterIn"], n["iterOut"] = g.loop(carry={"result": "step"})
    n["observe"] = g.node("null.observe", "observe")
    n["reason"] = g.node("reason", "reason", agent=agent, args=args or {})
    n["step"] = g.node("null.step", "step")
    g.connect(n["reset"]["observation"], n["iterIn"]["start"])
    g.connect(n["iterIn"]["step"], n["observe"]["trigger"])
    g.connect(n["observe"]["observation"], n["reason"]["observation"])
    g.connect(n["reason"]["chunk"], n["step"]["action"])
    g.connect(n["step"]["result"], n["iterOut"]["result"])
    if stop:
        g.connect(n["step"]["done"], n["iterOut"]["stop"])
    if evaluate == "null.evaluate":
        n["evaluate"] = g.node("null.evaluate", "evaluate")
        g.connect(n["iterOut"]["final_result"], n["evaluate"]["result"])
    elif evaluate == "t.judge":
        n["evaluate"] = judge = g.node("t.judge", "judge", verdict=verdict)
        g.connect(n["iterOut"]["final_result"], judge["result"])
        g.connect(n["iterOut"]["final_steps"], judge["steps"])
        g.connect(n["iterOut"]["final_stop"], judge["stopped"])
    return g, n


def attach(g: GraphBuilder, n: dict[str, NodeRef], band: str, node: NodeRef, port: str = "x") -> None:
    """Place `node` in `band`: no input (pre-loop), fed by iterIn (loop body) or by iterOut's final side (after)."""
    if band == "body":
        g.connect(n["iterIn"]["step"], node[port])
    elif band == "post":
        g.connect(n["iterOut"]["final_steps"], node[port])


class Harness:
    """A GraphRunner over a recording env, with its trace in a MemoryRecorder."""

    def __init__(self, graph: Graph, env: NullEnv | None = None, **kwargs: Any) -> None:
        self.env = env if env is not None else RecEnv()
        self.bus, self.recorder = EventBus(), MemoryRecorder()
        self.bus.subscribe(self.recorder)
        env_ = self.env
        runtime = Runtime(envs=lambda name: env_, env_spec=env_.spec, env_capabilities=env_.capabilities)
        self.runner = GraphRunner(compile_graph(graph, nodesets=NODESETS), runtime, bus=self.bus, **kwargs)

    def run(self, index: int = 0, task: str = "t") -> EpisodeOutcome:
        return self.runner.run(TaskInstance("null", task, index))

    def signals(self) -> list[tuple[str, str]]:
        return [(e.signal, e.scope_id) for e in self.recorder.of("signal")]

    def signal_names(self) -> list[str]:
        return [e.signal for e in self.recorder.of("signal")]


@pytest.fixture
def make() -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def build(graph: Graph | GraphBuilder, env: NullEnv | None = None, **kwargs: Any) -> Harness:
        harness = Harness(graph.build() if isinstance(graph, GraphBuilder) else graph, env, **kwargs)
        made.append(harness)
        return harness

    yield build
    for harness in made:
        harness.runner.close()


def ep(index: int = 0, task: str = "t") -> str:
    return TaskInstance("null", task, index).episode_id


def acts() -> int:
    return sum(1 for entry in LOG if entry[0] == "act")


# -- bands and signals -----------------------------------------------------------------------------------------------


def test_bands_fire_in_order_around_the_loop(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=2, evaluate="t.judge")
    g.node("t.source", "source")
    g.node("t.spy", "spy")
    attach(g, n, "body", g.node("t.probe", "body"))
    make(g).run()
    first_step = LOG.index(("signal", "step_start"))
    assert LOG[:2] == [("signal", "episode_reset"), ("signal", "run_start")]
    assert sorted(LOG[2:first_step]) == sorted([("fire", "source"), ("fire", "spy"), ("env.reset", 0)])
    iteration = [("signal", "step_start"), ("fire", "body"), ("act", None), ("env.step",), ("signal", "step_end")]
    rest = [("act", None) if entry[0] == "act" else entry for entry in LOG[first_step:]]
    assert rest == [*iteration, *iteration, ("fire", "judge"), ("signal", "run_end")]


def test_signals_are_traced_in_order(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=2)[0])
    harness.run()
    assert harness.signal_names() == [
        "episode_reset", "run_start", "step_start", "step_end", "step_start", "step_end", "run_end"
    ]  # fmt: skip
    kinds = harness.recorder.kinds()
    assert kinds.index("episode.start") < kinds.index("action") < kinds.index("episode.end")
    assert kinds[-1] == "signal"  # run_end comes last, after the episode's end


def test_step_signals_carry_the_iteration_scope(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=3)[0])
    harness.run()
    steps = [(s, scope) for s, scope in harness.signals() if s.startswith("step_")]
    assert steps == [(s, f"iterIn:{i}") for i in range(3) for s in ("step_start", "step_end")]


def test_run_signals_carry_the_episode_scope(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=2)[0])
    harness.run(0)
    harness.run(1)
    episode_signals = [(s, scope) for s, scope in harness.signals() if not s.startswith("step_")]
    assert episode_signals == [
        ("episode_reset", ep(0)), ("run_start", ep(0)), ("run_end", ep(0)),
        ("episode_reset", ep(1)), ("run_start", ep(1)), ("run_end", ep(1)),
    ]  # fmt: skip


def test_run_end_follows_a_failure_in_the_loop(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=5)
    attach(g, n, "body", g.node("t.boom", "boom"))
    harness = make(g)
    outcome = harness.run()
    assert outcome.status is EpisodeStatus.ERROR
    assert harness.signal_names() == ["episode_reset", "run_start", "step_start", "step_end", "run_end"]
    assert harness.recorder.kinds()[-2:] == ["episode.end", "signal"]


def test_run_end_follows_a_failure_before_the_loop(make: Callable[..., Harness]) -> None:
    g, _ = canonical(budget=5)
    g.node("t.boom", "boom")
    harness = make(g)
    outcome = harness.run()
    assert outcome.status is EpisodeStatus.ERROR
    assert harness.signal_names() == ["episode_reset", "run_start", "run_end"]
    assert acts() == 0


def test_pre_loop_nodes_fire_once_per_execution(make: Callable[..., Harness]) -> None:
    g, _ = canonical(budget=4)
    g.node("t.source", "source")
    harness = make(g)
    harness.run(0)
    harness.run(0)
    assert LOG.count(("fire", "source")) == 2
    assert LOG.count(("env.reset", 0)) == 2  # the second execution re-arms the finished episode


def test_evaluate_fires_once_with_the_final_side(make: Callable[..., Harness]) -> None:
    g, _ = canonical(budget=3, evaluate="t.judge")
    outcome = make(g).run()
    assert LOG.count(("fire", "judge")) == 1
    [given] = SEEN["judge"]
    assert given["steps"] == 3
    assert given["stopped"] is False
    assert given["result"]["success"] is False
    assert outcome.status is EpisodeStatus.FAILURE
    assert outcome.reason == "max_steps"
    assert outcome.metrics["judged"] == 1.0


@pytest.mark.parametrize(
    ("env_succeeds", "verdict", "expected"),
    [
        (True, True, (EpisodeStatus.SUCCESS, "success")),
        (True, False, (EpisodeStatus.FAILURE, "judged unsuccessful")),  # a judge may deny the env's success
        (False, True, (EpisodeStatus.FAILURE, "max_steps")),  # but never invent one
    ],
)
def test_the_evaluate_node_confirms_or_denies_the_envs_success_once(
    make: Callable[..., Harness], env_succeeds: bool, verdict: bool, expected: tuple[EpisodeStatus, str]
) -> None:
    g, _ = canonical(budget=3, evaluate="t.judge", verdict=verdict)
    outcome = make(g, RecEnv(success_at=2 if env_succeeds else None)).run()
    assert (outcome.status, outcome.reason) == expected
    assert outcome.success is (expected[0] is EpisodeStatus.SUCCESS)
    assert LOG.count(("fire", "judge")) == 1


def test_env_success_ends_the_loop(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=10)[0], RecEnv(success_at=2))
    outcome = harness.run()
    assert (outcome.status, outcome.steps, outcome.reason) == (EpisodeStatus.SUCCESS, 2, "success")
    assert harness.signal_names().count("step_start") == 2


def test_the_stop_port_ends_the_loop(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=10, stop=False, evaluate="t.judge")
    stop = g.node("t.stop_at", "stop_at", n=3)
    g.connect(n["iterIn"]["step"], stop["step"])
    g.connect(stop["stop"], n["iterOut"]["stop"])
    harness = make(g)
    outcome = harness.run()
    assert (outcome.status, outcome.steps, outcome.reason) == (EpisodeStatus.FAILURE, 3, "stopped")
    assert harness.signal_names().count("step_start") == 3
    assert SEEN["judge"] == [{"result": SEEN["judge"][0]["result"], "steps": 3, "stopped": True}]


@pytest.mark.parametrize(
    ("graph_budget", "env_budget", "max_steps", "expected"),
    [(4, 1000, None, 4), (None, 3, None, 3), (6, 1000, 2, 2)],
    ids=["graph", "env", "runner"],
)
def test_the_step_budget_ends_the_loop(
    make: Callable[..., Harness], graph_budget: int | None, env_budget: int, max_steps: int | None, expected: int
) -> None:
    harness = make(canonical(budget=graph_budget)[0], RecEnv(max_episode_steps=env_budget), max_steps=max_steps)
    outcome = harness.run()
    assert (outcome.status, outcome.steps, outcome.reason) == (EpisodeStatus.FAILURE, expected, "max_steps")
    assert harness.signal_names().count("step_start") == expected
    assert LOG.count(("env.step",)) == expected


# -- state containers ------------------------------------------------------------------------------------------------


def container_graph(budget: int = 3) -> GraphBuilder:
    """Each iteration appends its index to a step, an episode and a run container."""
    g, n = canonical(budget=budget)
    for name, lifetime in (("s", "step"), ("e", "episode"), ("r", "run")):
        g.container(name, lifetime, "append")
        writer = g.node("remember", f"write_{name}", container=name)
        g.connect(n["iterIn"]["step"], writer["value"])
    return g


def first_checkpoint(harness: Harness) -> dict[str, Any]:
    return harness.runner.checkpoints[0][1]


def values(harness: Harness) -> dict[str, Any]:
    return {c.name: c.read() for c in harness.runner.containers}


def test_containers_are_cleared_only_by_their_signals(make: Callable[..., Harness]) -> None:
    harness = make(container_graph())
    harness.run(0)
    assert list(harness.runner.checkpoints) == [
        (0, {"s": [0], "e": [0], "r": [0]}),
        (1, {"s": [1], "e": [0, 1], "r": [0, 1]}),
        (2, {"s": [2], "e": [0, 1, 2], "r": [0, 1, 2]}),
    ]
    assert values(harness) == {"s": [], "e": [0, 1, 2], "r": [0, 1, 2]}  # step_end cleared s; run_end clears nothing

    harness.run(0)  # the same episode again: run_start clears r, nothing clears e
    assert first_checkpoint(harness) == {"s": [0], "e": [0, 1, 2, 0], "r": [0]}

    harness.runner.signal("episode_reset")  # from the env panel, between executions
    assert values(harness) == {"s": [], "e": [], "r": [0, 1, 2]}

    harness.run(0)
    assert first_checkpoint(harness) == {"s": [0], "e": [0], "r": [0]}

    harness.run(1)  # another episode: auto episode_reset clears e
    assert first_checkpoint(harness) == {"s": [0], "e": [0], "r": [0]}
    assert values(harness) == {"s": [], "e": [0, 1, 2], "r": [0, 1, 2]}


def test_without_auto_episode_reset_only_the_owner_clears_episode_containers(make: Callable[..., Harness]) -> None:
    harness = make(container_graph(budget=2), auto_episode_reset=False)
    harness.run(0)
    harness.run(1)
    assert first_checkpoint(harness)["e"] == [0, 1, 0]
    assert "episode_reset" not in harness.signal_names()
    harness.runner.signal("episode_reset")
    assert values(harness)["e"] == []


def test_checkpoints_are_traced_each_iteration(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=3)
    g.container("latest", "step").container("total", "run", "add")
    for name in ("latest", "total"):
        writer = g.node("remember", f"write_{name}", container=name)
        g.connect(n["iterIn"]["step"], writer["value"])
    harness = make(g)
    harness.run()
    expected = [(0, {"latest": 0, "total": 0}), (1, {"latest": 1, "total": 1}), (2, {"latest": 2, "total": 3})]
    assert list(harness.runner.checkpoints) == expected
    traced = [(e.step, e.values) for e in harness.recorder.of("container.checkpoint")]
    assert traced == expected
    order = [e.event if e.event != "signal" else e.signal for e in harness.recorder.events]
    loop = [k for k in order if k in ("step_start", "container.checkpoint", "step_end")]
    assert loop == ["step_start", "container.checkpoint", "step_end"] * 3  # taken before step_end clears `latest`
    harness.run()
    assert list(harness.runner.checkpoints) == expected  # each execution keeps its own


def test_recall_reads_what_remember_wrote(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=3)
    g.container("log", "episode", "append")
    writer = g.node("remember", "writer", container="log")
    reader = g.node("recall", "reader", container="log")
    probe = g.node("t.probe", "probe")
    g.connect(n["iterIn"]["step"], writer["value"])
    g.connect(n["iterIn"]["step"], reader["trigger"])
    g.connect(reader["value"], probe["x"])
    make(g).run()
    read = [seen["x"] for seen in SEEN["probe"]]
    assert len(read) == 3
    for i, value in enumerate(read):  # every earlier iteration's write is there (this one's may be too)
        assert value[:i] == list(range(i))
        assert value in (list(range(i)), list(range(i + 1)))


def test_a_node_cannot_clear_a_container_through_what_it_recalled(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=3)
    g.container("log", "episode", "append")
    writer = g.node("remember", "writer", container="log")
    reader = g.node("recall", "reader", container="log")
    vandal = g.node("t.vandal", "vandal")
    g.connect(n["iterIn"]["step"], writer["value"])
    g.connect(n["step"]["reward"], reader["trigger"])  # reads after this iteration's write
    g.connect(reader["value"], vandal["x"])
    harness = make(g)
    harness.run()
    assert [values["log"] for _, values in harness.runner.checkpoints] == [[0], [0, 1], [0, 1, 2]]
    assert harness.runner.containers["log"].read() == [0, 1, 2]


# -- failures --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("band", ["pre", "body", "post"])
def test_a_node_that_raises_makes_the_episode_an_error(make: Callable[..., Harness], band: str) -> None:
    g, n = canonical(budget=3)
    attach(g, n, band, g.node("t.boom", "boom"))
    harness = make(g)
    outcome = harness.run()
    assert outcome.status is EpisodeStatus.ERROR
    assert not outcome.success
    assert "'boom'" in outcome.reason and "kaboom" in outcome.reason
    assert harness.recorder.of("episode.end")[0].status == "error"


@pytest.mark.parametrize("band", ["pre", "body", "post"])
@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("undeclared", "surprise"),
        ("missing", "'out'"),
        ("none", "NoneType"),
        ("list", "list"),
        ("text", "str"),
        ("error", "disk full"),
    ],
)
def test_a_result_that_breaks_the_contract_is_an_error(
    make: Callable[..., Harness], band: str, kind: str, named: str
) -> None:
    g, n = canonical(budget=3)
    attach(g, n, band, g.node("t.misbehave", "bad", kind=kind))
    outcome = make(g).run()
    assert outcome.status is EpisodeStatus.ERROR, outcome
    assert "'bad'" in outcome.reason
    assert named in outcome.reason


@pytest.mark.parametrize("method", ["reset", "observe", "step"])
def test_an_env_node_that_raises_is_infra_invalid(make: Callable[..., Harness], method: str) -> None:
    env = RecEnv(fail={method: RuntimeError("simulator fell over")})
    outcome = make(canonical(budget=3)[0], env).run()
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert f"'{method}'" in outcome.reason
    assert "simulator fell over" in outcome.reason


def test_a_diverged_simulation_is_infra_invalid(make: Callable[..., Harness]) -> None:
    env = RecEnv(fail={"step": SimulationDiverged("NaN in qpos")})
    outcome = make(canonical(budget=3)[0], env).run()
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert "'step'" in outcome.reason and "NaN in qpos" in outcome.reason


def test_a_closed_runner_refuses_to_run(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=2)[0])
    harness.runner.close()
    with pytest.raises(RuntimeError, match="closed"):
        harness.run()


def test_an_env_node_rejecting_the_action_is_an_error(make: Callable[..., Harness]) -> None:
    env = RecEnv(fail={"step": InvalidAction("wrong shape")})
    outcome = make(canonical(budget=3)[0], env).run()
    assert outcome.status is EpisodeStatus.ERROR
    assert "'step'" in outcome.reason and "wrong shape" in outcome.reason


def test_an_agent_that_raises_is_an_error(make: Callable[..., Harness]) -> None:
    outcome = make(canonical(budget=3, agent="graph_agents:RaisingAgent")[0]).run()
    assert outcome.status is EpisodeStatus.ERROR
    assert "'reason'" in outcome.reason and "policy exploded" in outcome.reason


def test_a_failing_signal_from_the_owner_raises_signal_failed(make: Callable[..., Harness]) -> None:
    g, _ = canonical(budget=2)
    g.node("t.fragile", "fragile", fail_on="episode_reset")
    harness = make(g)
    with pytest.raises(SignalFailed) as info:
        harness.runner.signal("episode_reset")
    assert "'fragile'" in str(info.value)


def test_a_node_failing_on_run_start_is_an_error(make: Callable[..., Harness]) -> None:
    g, _ = canonical(budget=2)
    g.node("t.fragile", "fragile", fail_on="run_start")
    outcome = make(g).run()
    assert outcome.status is EpisodeStatus.ERROR
    assert "'fragile'" in outcome.reason


def test_an_agent_that_cannot_be_built_names_the_node() -> None:
    g, _ = canonical(agent="graph_agents:NoSuchAgent")
    env = RecEnv()
    runtime = Runtime(envs=lambda name: env, env_spec=env.spec, env_capabilities=env.capabilities)
    with pytest.raises(GraphSetupError, match="'reason'"):
        GraphRunner(compile_graph(g.build(), nodesets=NODESETS), runtime)


def test_server_mode_needs_a_runner_that_supports_it() -> None:
    g, _ = canonical()
    g.node("t.source", "source")
    g.nodeset("t", "server")
    env = RecEnv()
    runtime = Runtime(envs=lambda name: env, env_spec=env.spec, env_capabilities=env.capabilities)
    with pytest.raises(GraphSetupError, match="'source'"):
        GraphRunner(compile_graph(g.build(), nodesets=NODESETS), runtime)


# -- concurrency -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("band", ["pre", "body", "post"])
def test_async_nodes_of_one_level_run_concurrently(make: Callable[..., Harness], band: str) -> None:
    g, n = canonical(budget=2)
    for me, other in (("a", "b"), ("b", "a")):
        attach(g, n, band, g.node("t.ping", f"ping_{me}", me=me, other=other), "step")
    outcome = make(g).run()
    assert outcome.status is EpisodeStatus.FAILURE, outcome.reason
    assert outcome.reason == "max_steps"
    pings = [entry for entry in LOG if entry[0] == "ping"]
    assert len(pings) == (2 if band != "body" else 4)
    assert {entry[1] for entry in pings} == {"ping_a", "ping_b"}


def test_a_failing_async_node_names_itself(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=2)
    attach(g, n, "body", g.node("t.nap", "nap"))
    attach(g, n, "body", g.node("t.aboom", "aboom"))
    outcome = make(g).run()
    assert outcome.status is EpisodeStatus.ERROR
    assert "'aboom'" in outcome.reason and "async kaboom" in outcome.reason


def test_an_async_node_returning_an_error_dict_is_an_error(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=2)
    attach(g, n, "body", g.node("t.nap", "nap"))
    attach(g, n, "body", g.node("t.amisbehave", "bad", kind="error"))
    outcome = make(g).run()
    assert outcome.status is EpisodeStatus.ERROR
    assert "'bad'" in outcome.reason and "disk full" in outcome.reason


def test_a_sync_failure_beside_an_async_node_leaves_no_coroutine_behind(make: Callable[..., Harness]) -> None:
    g, n = canonical(budget=2)
    attach(g, n, "body", g.node("t.nap", "nap"))
    attach(g, n, "body", g.node("t.boom", "boom"))
    harness = make(g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = harness.run()
        gc.collect()
    assert outcome.status is EpisodeStatus.ERROR
    assert "'boom'" in outcome.reason
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


# -- the chunk executor and the shield -------------------------------------------------------------------------------


def kernel_run(env: NullEnv, agent: Any, max_steps: int) -> EpisodeOutcome:
    with Kernel(env, agent, max_steps=max_steps) as kernel:
        return kernel.run(TaskInstance("null", "t"))


def test_a_chunked_policy_is_asked_once_per_chunk(make: Callable[..., Harness]) -> None:
    args = {"chunk": 4, "execution_steps": 2, "delta": 0.25}
    harness = make(canonical(budget=6, args=args)[0])
    outcome = harness.run()
    assert outcome.steps == 6
    assert acts() == 3
    assert [float(a[0]) for a in harness.env.actions] == [0.0, 0.25] * 3
    chunks = harness.recorder.of("agent.chunk")
    assert [(c.size, c.execution_steps) for c in chunks] == [(4, 2)] * 3

    LOG.clear()
    env = RecEnv()
    kernel_outcome = kernel_run(env, graph_agents.ScriptedAgent(**args), 6)
    assert acts() == 3
    assert [a.tolist() for a in env.actions] == [a.tolist() for a in harness.env.actions]
    assert (kernel_outcome.status, kernel_outcome.steps) == (outcome.status, outcome.steps)


def test_a_nan_action_is_a_safety_abort(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=3, agent="graph_agents:NaNAgent")[0])
    outcome = harness.run()
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    assert outcome.safety_interventions == 1
    assert outcome.steps == 0
    assert harness.env.actions == []
    [review] = harness.recorder.of("safety.review")
    assert review.approved is False


def test_clipping_is_a_modification_that_asks_the_policy_again(make: Callable[..., Harness]) -> None:
    args = {"value": 2.0, "chunk": 3}
    harness = make(canonical(budget=3, args=args)[0])
    outcome = harness.run()
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 3)
    assert outcome.safety_interventions == 3
    assert acts() == 3  # each clip cleared the chunk executor
    assert all(np.all(a == 1.0) for a in harness.env.actions)
    assert [r.modified for r in harness.recorder.of("safety.review")] == [True] * 3

    LOG.clear()
    kernel_outcome = kernel_run(RecEnv(), graph_agents.ScriptedAgent(**args), 3)
    assert kernel_outcome.safety_interventions == outcome.safety_interventions
    assert acts() == 3


def test_in_bounds_chunks_are_played_out(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=3, args={"value": 0.5, "chunk": 3})[0])
    outcome = harness.run()
    assert outcome.safety_interventions == 0
    assert acts() == 1
    assert all(np.all(a == 0.5) for a in harness.env.actions)


def test_the_chunk_executor_starts_empty_in_each_execution(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=2, args={"chunk": 5})[0])
    harness.run(0)
    harness.run(1)
    assert acts() == 2  # the three actions left over from the first execution are not played in the second


# -- agent hooks -----------------------------------------------------------------------------------------------------


def test_agent_hooks_follow_the_episode(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=2, agent="graph_agents:HookAgent")[0])
    harness.run(0)
    harness.run(1)
    calls = [entry for entry in LOG if entry[0] != "signal"]
    one = [("act", None), ("env.step",), ("on_step", False)]

    def episode(i: int) -> list[Any]:
        return [("env.reset", i), ("reset", i), *one, *one, ("end", "failure")]

    assert [("act", None) if c[0] == "act" else c for c in calls] == [*episode(0), *episode(1)]
    signals = [entry[1] for entry in LOG if entry[0] == "signal"]
    per_run = ["episode_reset", "run_start", "step_start", "step_end", "step_start", "step_end", "run_end"]
    assert signals == per_run * 2

    graph_log = list(LOG)
    LOG.clear()
    env, agent = RecEnv(), graph_agents.HookAgent()
    with Kernel(env, agent, max_steps=2) as kernel:
        kernel.run(TaskInstance("null", "t", 0))
        kernel.run(TaskInstance("null", "t", 1))
    assert [e for e in LOG if e[0] != "signal"] == [e for e in graph_log if e[0] != "signal"]
    assert [e for e in LOG if e[0] == "signal"] == [e for e in graph_log if e[0] == "signal"]


def test_on_step_gets_the_step_result_as_in_the_kernel(make: Callable[..., Harness]) -> None:
    make(canonical(budget=2, agent="graph_agents:ObservingAgent")[0]).run()
    graph_log = [entry for entry in LOG if entry[0] == "on_step.obs"]
    LOG.clear()
    kernel_run(RecEnv(), graph_agents.ObservingAgent(), 2)
    kernel_log = [entry for entry in LOG if entry[0] == "on_step.obs"]
    assert kernel_log == [("on_step.obs", ["state"])] * 2
    assert graph_log == kernel_log


def test_an_agents_own_containers_join_the_graphs(make: Callable[..., Harness]) -> None:
    harness = make(canonical(budget=2, agent="graph_agents:MemoAgent")[0])
    harness.run(0)
    assert harness.runner.containers["acts"].read() == [1, 2]
    assert [values["acts"] for _, values in harness.runner.checkpoints] == [[1], [1, 2]]
    harness.run(1)  # another episode: episode_reset clears the agent's container too
    assert harness.runner.containers["acts"].read() == [3, 4]


def test_an_agent_returning_nothing_is_an_error(make: Callable[..., Harness]) -> None:
    outcome = make(canonical(budget=2, agent="graph_agents:NoneAgent")[0]).run()
    assert outcome.status is EpisodeStatus.ERROR
    assert "'reason'" in outcome.reason


def test_on_episode_end_hears_an_error(make: Callable[..., Harness]) -> None:
    env = RecEnv(fail={"step": RuntimeError("simulator fell over")})
    make(canonical(budget=2, agent="graph_agents:HookAgent")[0], env).run()
    assert LOG[-2:] == [("end", "infra_invalid"), ("signal", "run_end")]


# -- the memory example on BabyAI ------------------------------------------------------------------------------------


def test_the_memory_example_keeps_episode_memory_until_the_episode_changes() -> None:
    from hylo.envs.registry import get_benchmark
    from hylo.graph import load_graph
    from hylo.graph.store import EXAMPLES_DIR

    graph = load_graph(EXAMPLES_DIR / "babyai_memory.json")
    assert graph.placement is not None and graph.placement.task is not None
    bench = get_benchmark("babyai")
    env = bench.make_env()
    runtime = Runtime(envs=lambda name: env, benchmark=bench, env_spec=env.spec, env_capabilities=env.capabilities,
                      privileged=env.privileged_state)  # fmt: skip
    split, task = bench.check_split(graph.placement.split), graph.placement.task
    bus, recorder = EventBus(), MemoryRecorder()
    bus.subscribe(recorder)
    with GraphRunner(compile_graph(graph), runtime, bus=bus, max_steps=bench.default_step_budget(task)) as runner:
        first = runner.run(bench.task_instance(split, task, 0))
        assert first.status is EpisodeStatus.SUCCESS
        decisions = runner.containers["decisions"].read()
        assert [d["step"] for d in decisions] == list(range(first.steps))  # one decision per step, in order
        checkpoints = list(runner.checkpoints)
        assert [len(values["decisions"]) for _, values in checkpoints] == list(range(1, first.steps + 1))
        earned = runner.containers["return"].read()
        assert earned == pytest.approx(first.metrics["return"]) and earned > 0  # the rewards of the execution

        runner.signal("episode_reset")  # the env panel placed another episode
        assert runner.containers["decisions"].read() == []
        assert runner.containers["return"].read() == earned  # a run-lifetime container does not hear it

        runner.run(bench.task_instance(split, task, 0))
        again = runner.containers["decisions"].read()
        assert [d["step"] for d in again][:1] == [0]

        again_len = len(again)
        replay = runner.run(bench.task_instance(split, task, 0))  # the same episode once more: its memory carries on
        assert len(runner.containers["decisions"].read()) > again_len
        assert runner.containers["return"].read() == pytest.approx(replay.metrics["return"])  # run_start cleared it

        second = runner.run(bench.task_instance(split, task, 1))  # another episode: memory starts over
        assert second.status is EpisodeStatus.SUCCESS
        assert [d["step"] for d in runner.containers["decisions"].read()] == list(range(second.steps))
