"""Agents by name: `-A key=value` parsing, the built-ins, the benchmark's expert, entry points and `module:Class`."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from hylo.agents import HoldAgent, RandomAgent
from hylo.agents import registry as registry_module
from hylo.agents.registry import AgentSpecError, make_agent, parse_agent_args, registered_agents
from hylo.core import registry as core_registry
from hylo.envs import GridGoal
from hylo.envs.babyai import BabyAIBenchmark, BabyAIExpert
from hylo.envs.benchmark import Benchmark, UnknownChoice

FIXTURES = "registry_fixture_agents"


@pytest.fixture
def fixture_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


class NoExpert(Benchmark):
    name = "noexpert"

    def splits(self) -> list[str]:
        return ["default"]

    def tasks(self, split: str) -> list[str]:
        return ["only"]

    def make_env(self, *, render_images: bool = False) -> GridGoal:
        return GridGoal()

    def default_step_budget(self, task: str) -> int:
        return 10


# -- parse_agent_args -------------------------------------------------------------------------------------------------


def test_values_that_are_json_literals_are_parsed() -> None:
    assert parse_agent_args(
        ["n=3", "neg=-2", "x=0.5", "big=1e3", "on=true", "off=false", "nothing=null", "xs=[1, 2]", 'obj={"a": [1]}']
    ) == {
        "n": 3,
        "neg": -2,
        "x": 0.5,
        "big": 1000.0,
        "on": True,
        "off": False,
        "nothing": None,
        "xs": [1, 2],
        "obj": {"a": [1]},
    }


def test_types_of_parsed_values() -> None:
    args = parse_agent_args(["n=3", "x=0.5", "on=true"])
    assert type(args["n"]) is int
    assert type(args["x"]) is float
    assert args["on"] is True


def test_plain_words_stay_strings() -> None:
    assert parse_agent_args(["model=gpt", "path=/tmp/ckpt.pt", "phrase=go left", "True=True", "empty="]) == {
        "model": "gpt",
        "path": "/tmp/ckpt.pt",
        "phrase": "go left",
        "True": "True",  # JSON spells it `true`; the capitalised word is a string
        "empty": "",
    }


def test_quoted_values_are_strings() -> None:
    args = parse_agent_args(['version="3"', 'flag="true"', 'name="x"'])
    assert args == {"version": "3", "flag": "true", "name": "x"}


def test_only_the_first_equals_sign_splits() -> None:
    assert parse_agent_args(["query=a=b", "expr==="]) == {"query": "a=b", "expr": "=="}


def test_whitespace_around_the_key_is_ignored_and_last_pair_wins() -> None:
    assert parse_agent_args([" chunk =2", "chunk=4"]) == {"chunk": 4}


def test_no_pairs_is_no_args() -> None:
    assert parse_agent_args([]) == {}


@pytest.mark.parametrize("pair", ["chunk", "=3", "1x=2", "my-key=1", "a.b=1", " =1", ""])
def test_a_bad_pair_is_refused_by_name(pair: str) -> None:
    with pytest.raises(AgentSpecError) as info:
        parse_agent_args(["ok=1", pair])
    assert repr(pair) in str(info.value)
    assert isinstance(info.value, ValueError)  # a CLI catching ValueError reports it too


# -- built-ins --------------------------------------------------------------------------------------------------------


def test_registered_agents_include_the_builtins() -> None:
    agents = registered_agents()
    assert {"random", "hold", "expert"} <= set(agents)
    assert agents["random"] == "hylo.agents.basic:RandomAgent"
    assert agents["hold"] == "hylo.agents.basic:HoldAgent"


def test_random_and_hold_are_built_with_their_args() -> None:
    random = make_agent("random", {"chunk": 2})
    assert type(random) is RandomAgent
    assert random.chunk == 2
    assert make_agent("random").chunk == 1
    assert type(make_agent("hold")) is HoldAgent
    assert make_agent("random") is not make_agent("random")  # a fresh agent every time


def test_make_agent_does_not_mutate_the_callers_args() -> None:
    args: dict[str, Any] = {"chunk": 3}
    make_agent("random", args)
    assert args == {"chunk": 3}


@pytest.mark.parametrize("name, args", [("random", {"chunks": 2}), ("hold", {"chunk": 2})])
def test_builtin_with_wrong_args_is_refused_by_name(name: str, args: dict[str, Any]) -> None:
    with pytest.raises(AgentSpecError, match=rf"cannot build agent '{name}' with arguments") as info:
        make_agent(name, args)
    assert str(args) in str(info.value)


# -- expert -----------------------------------------------------------------------------------------------------------


def test_expert_is_the_benchmarks_own() -> None:
    expert = make_agent("expert", benchmark=BabyAIBenchmark())
    assert type(expert) is BabyAIExpert
    assert callable(expert.act)


def test_expert_without_a_benchmark_is_refused() -> None:
    with pytest.raises(AgentSpecError, match="'expert' needs a benchmark"):
        make_agent("expert")


def test_expert_of_a_benchmark_without_one_is_refused() -> None:
    with pytest.raises(AgentSpecError, match="'noexpert' has no expert"):
        make_agent("expert", benchmark=NoExpert())


def test_expert_with_args_it_does_not_take_is_refused() -> None:
    with pytest.raises(AgentSpecError, match=r"'expert'.*speed"):
        make_agent("expert", {"speed": 2}, BabyAIBenchmark())


def test_other_agents_ignore_the_benchmark() -> None:
    assert type(make_agent("hold", benchmark=NoExpert())) is HoldAgent


# -- module:Class -----------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("fixture_path")
def test_module_class_is_built_with_args() -> None:
    agent = make_agent(f"{FIXTURES}:Greeter", {"greeting": "hi", "times": 3, "mood": "calm"})
    assert type(agent).__name__ == "Greeter"
    assert (agent.greeting, agent.times, agent.extra) == ("hi", 3, {"mood": "calm"})


@pytest.mark.usefixtures("fixture_path")
def test_module_class_with_parsed_cli_args() -> None:
    agent = make_agent(f"{FIXTURES}:Greeter", parse_agent_args(["greeting=hey", "times=2"]))
    assert (agent.greeting, agent.times) == ("hey", 2)


@pytest.mark.usefixtures("fixture_path")
def test_module_factory_function_and_nested_class() -> None:
    assert make_agent(f"{FIXTURES}:make_greeter", {"times": 5}).greeting == "from factory"
    assert type(make_agent(f"{FIXTURES}:Outer.Inner")).__name__ == "Inner"


@pytest.mark.usefixtures("fixture_path")
@pytest.mark.parametrize(
    "name, args, message",
    [
        ("no_such_module_for_hylo:Agent", {}, "cannot import agent module 'no_such_module_for_hylo'"),
        (f"{FIXTURES}:Missing", {}, f"module '{FIXTURES}' has no 'Missing'"),
        (f"{FIXTURES}:Outer.Missing", {}, "has no 'Outer.Missing'"),
        (f"{FIXTURES}:NOT_CALLABLE", {}, f"'{FIXTURES}:NOT_CALLABLE' is not a class or factory"),
        (f"{FIXTURES}:NoAct", {}, f"agent '{FIXTURES}:NoAct' built .* which has no act"),
        (f"{FIXTURES}:Strict", {}, f"cannot build agent '{FIXTURES}:Strict'.*level"),
        (f"{FIXTURES}:Strict", {"level": 1, "speed": 2}, "cannot build agent .*'speed'"),
        (f"{FIXTURES}:", {}, f"bad agent import path '{FIXTURES}:'"),
        (":Greeter", {}, "bad agent import path ':Greeter'"),
    ],
)
def test_bad_module_class_is_refused_by_name(name: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentSpecError, match=message):
        make_agent(name, args)


@pytest.mark.usefixtures("fixture_path")
def test_allow_import_false_refuses_module_class() -> None:
    with pytest.raises(UnknownChoice) as info:
        make_agent(f"{FIXTURES}:Greeter", allow_import=False)
    assert f"'{FIXTURES}:Greeter'" in str(info.value)
    assert {"random", "hold", "expert"} <= set(info.value.choices)
    assert "module:Class" not in info.value.choices
    # registered agents are still fine
    assert type(make_agent("hold", allow_import=False)) is HoldAgent


def test_unknown_plain_name_lists_the_choices() -> None:
    with pytest.raises(UnknownChoice) as info:
        make_agent("rando")
    message = str(info.value)
    assert "'rando'" in message
    for choice in ("random", "hold", "expert", "module:Class"):
        assert choice in message
    assert info.value.choices[-1] == "module:Class"


# -- entry points -----------------------------------------------------------------------------------------------------


def test_entry_point_agents_are_registered_and_built(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, fixture_path: None
) -> None:
    group = registry_module.ENTRY_POINT_GROUP
    plugins = [
        EntryPoint("greeter", f"{FIXTURES}:Greeter", group),
        EntryPoint("random", f"{FIXTURES}:Greeter", group),  # cannot shadow a built-in
    ]

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        return [ep for ep in plugins if ep.group == group]

    monkeypatch.setattr(core_registry, "entry_points", fake_entry_points)
    registry_module.AGENT_REGISTRY.refresh()  # entry points are read once per process: read the fake ones
    request.addfinalizer(registry_module.AGENT_REGISTRY.refresh)
    agents = registered_agents()
    assert agents["greeter"] == f"{FIXTURES}:Greeter"
    assert agents["random"] == "hylo.agents.basic:RandomAgent"
    assert make_agent("greeter", {"times": 4}, allow_import=False).times == 4
    assert type(make_agent("random")) is RandomAgent
