"""The benchmark panel (001): the cascade benchmark → split → task → episode_index/seed, the intents its hooks return,
and the PanelDriver that places episodes through it and carries `episode_reset` to a Kernel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from hylo.core import ActionChunk, AgentBase, ContainerSpec, EpisodeContext, Kernel, Observation, Signal
from hylo.envs import GridGoal
from hylo.envs.babyai import LEVELS, BabyAIBenchmark
from hylo.envs.benchmark import Benchmark, UnknownChoice
from hylo.panels import BenchmarkPanel
from hylo.panels.placement import PanelDriver, PlacementError

# -- a two-split benchmark whose task lists differ ------------------------------------------------------------------

SPLIT_TASKS = {"train": ["reach", "push", "shared"], "test": ["lift", "shared"]}
BUDGETS = {"reach": 11, "push": 22, "shared": 33, "lift": 44}


class TwoSplits(Benchmark):
    name = "twosplits"
    display_name = "Two Splits"
    default_split = "train"

    def __init__(self, available: tuple[bool, str] = (True, "")) -> None:
        self._available = available

    def splits(self) -> list[str]:
        return list(SPLIT_TASKS)

    def tasks(self, split: str) -> list[str]:
        return list(SPLIT_TASKS[self.check_split(split)])

    def make_env(self, *, render_images: bool = False) -> GridGoal:
        return GridGoal(size=6, walls=3)

    def default_step_budget(self, task: str) -> int:
        return BUDGETS[task]

    def available(self) -> tuple[bool, str]:
        return self._available


def run(coro: Any) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(coro)
    return result


def change(panel: BenchmarkPanel, name: str, value: Any) -> dict[str, Any]:
    return run(panel.on_field_change(name, value))


def placement(panel: BenchmarkPanel) -> tuple[str, str, int, int]:
    p = panel.placement
    return (p.split, p.task, p.episode_index, p.seed)


@pytest.fixture
def babyai() -> BenchmarkPanel:
    return BenchmarkPanel(BabyAIBenchmark())


@pytest.fixture
def two() -> BenchmarkPanel:
    return BenchmarkPanel(TwoSplits())


# -- declaration ------------------------------------------------------------------------------------------------------


def test_info_declares_the_placement_fields_and_playback_actions(babyai: BenchmarkPanel) -> None:
    info = babyai.info()
    assert info["name"] == "env_babyai"
    assert info["display_name"] == "BabyAI"
    fields = {f["name"]: f for f in info["fields"]}
    assert list(fields) == ["benchmark", "split", "task", "episode_index", "seed"]
    assert fields["benchmark"]["options"] == ["babyai"]
    assert fields["split"]["options"] == ["default"]
    assert fields["task"]["dynamic"] is True and fields["task"]["options"] is None
    assert fields["episode_index"]["kind"] == "number" and fields["episode_index"]["min"] == 0
    assert fields["seed"]["kind"] == "number" and fields["seed"]["min"] == 0

    actions = {a["name"]: a for a in info["actions"]}
    assert {name: a["side_effect"] for name, a in actions.items()} == {
        "play": "run_start",
        "pause": "run_pause",
        "step": "run_step",
        "stop": "run_stop",
    }
    assert actions["play"]["enabled_when"] == "not_running"
    assert actions["stop"]["enabled_when"] == "active"
    assert info["context"]["mode"] == "local"


def test_constructor_places_the_first_task_of_the_default_split(two: BenchmarkPanel) -> None:
    assert placement(two) == ("train", "reach", 0, 0)
    assert placement(BenchmarkPanel(TwoSplits(), split="test")) == ("test", "lift", 0, 0)
    assert placement(BenchmarkPanel(TwoSplits(), split="test", task="shared")) == ("test", "shared", 0, 0)


@pytest.mark.parametrize(("split", "task", "bad"), [("nope", None, "nope"), ("test", "reach", "reach")])
def test_constructor_refuses_an_unknown_split_or_task(split: str, task: str | None, bad: str) -> None:
    with pytest.raises(UnknownChoice, match=repr(bad)):
        BenchmarkPanel(TwoSplits(), split=split, task=task)


# -- on_load ----------------------------------------------------------------------------------------------------------


def test_on_load_reports_status_budget_and_current_placement(babyai: BenchmarkPanel) -> None:
    bench = babyai.benchmark
    change(babyai, "task", "PutNextLocal")
    change(babyai, "episode_index", 3)
    change(babyai, "seed", 7)
    loaded = run(babyai.on_load())
    assert loaded["available"] is True
    assert loaded["status"] == "ready"
    assert loaded["step_budget"] == bench.default_step_budget("PutNextLocal") == 128
    assert {k: loaded[k] for k in ("benchmark", "split", "task", "episode_index", "seed")} == {
        "benchmark": "babyai",
        "split": "default",
        "task": "PutNextLocal",
        "episode_index": 3,
        "seed": 7,
    }
    assert loaded["episode_id"] == "babyai/default/PutNextLocal/0003@s7"
    assert loaded["episode_id"] == bench.task_instance("default", "PutNextLocal", 3, 7).episode_id


def test_on_load_step_budget_follows_the_task(two: BenchmarkPanel) -> None:
    assert run(two.on_load())["step_budget"] == 11
    change(two, "task", "push")
    assert run(two.on_load())["step_budget"] == 22


def test_on_load_reports_an_unavailable_benchmark_with_its_reason() -> None:
    panel = BenchmarkPanel(TwoSplits(available=(False, "simulator not installed")))
    loaded = run(panel.on_load())
    assert loaded["available"] is False
    assert loaded["status"] == "simulator not installed"


# -- on_field_change ----------------------------------------------------------------------------------------------


def test_new_episode_index_signals_episode_reset_with_payload(babyai: BenchmarkPanel) -> None:
    result = change(babyai, "episode_index", 5)
    assert result["ok"] is True
    assert result["side_effect"] == "signal"
    assert result["signal_name"] == "episode_reset" == Signal.EPISODE_RESET.value
    assert result["signal_payload"] == {
        "split": "default",
        "task": "GoToRedBallGrey",
        "episode_index": 5,
        "seed": 0,
        "changed": "episode_index",
        "episode_id": "babyai/default/GoToRedBallGrey/0005@s0",
    }
    assert babyai.placement.episode_index == 5


def test_same_value_again_is_no_change(babyai: BenchmarkPanel) -> None:
    change(babyai, "episode_index", 5)
    again = change(babyai, "episode_index", 5)
    assert again == {"ok": True, "side_effect": "none"}
    assert change(babyai, "task", "GoToRedBallGrey")["side_effect"] == "none"
    assert change(babyai, "split", "default")["side_effect"] == "none"
    assert change(babyai, "seed", 0)["side_effect"] == "none"
    assert change(babyai, "benchmark", "babyai")["side_effect"] == "none"


@pytest.mark.parametrize("name, value", [("task", "GoToLocal"), ("seed", 3)])
def test_task_and_seed_changes_also_signal_episode_reset(babyai: BenchmarkPanel, name: str, value: Any) -> None:
    result = change(babyai, name, value)
    assert result["side_effect"] == "signal"
    assert result["signal_name"] == "episode_reset"
    assert result["signal_payload"][name] == value
    assert result["signal_payload"]["episode_id"] == babyai.task_instance().episode_id
    assert getattr(babyai.placement, name) == value


def test_integral_strings_and_floats_are_accepted_as_episode_index(babyai: BenchmarkPanel) -> None:
    assert change(babyai, "episode_index", "4")["side_effect"] == "signal"
    assert babyai.placement.episode_index == 4
    assert change(babyai, "episode_index", 4.0)["side_effect"] == "none"  # the same episode
    assert babyai.placement.episode_index == 4


def test_split_change_resets_a_task_the_new_split_lacks(two: BenchmarkPanel) -> None:
    assert two.placement.task == "reach"  # only in train
    result = change(two, "split", "test")
    assert result["side_effect"] == "signal"
    assert placement(two)[:2] == ("test", "lift")  # the new split's first task
    assert result["signal_payload"]["episode_id"] == "twosplits/test/lift/0000@s0"
    assert run(two.on_load())["step_budget"] == BUDGETS["lift"]


def test_split_change_keeps_a_task_the_new_split_has(two: BenchmarkPanel) -> None:
    change(two, "task", "shared")
    change(two, "episode_index", 2)
    result = change(two, "split", "test")
    assert result["side_effect"] == "signal"
    assert placement(two) == ("test", "shared", 2, 0)
    assert result["signal_payload"]["episode_id"] == "twosplits/test/shared/0002@s0"


def test_task_options_follow_the_current_split(two: BenchmarkPanel) -> None:
    assert run(two.on_options("task")) == {"ok": True, "side_effect": "none", "options": SPLIT_TASKS["train"]}
    change(two, "split", "test")
    assert run(two.on_options("task"))["options"] == SPLIT_TASKS["test"]
    assert run(two.on_options("split"))["options"] == ["train", "test"]


def test_babyai_task_options_are_its_curated_levels(babyai: BenchmarkPanel) -> None:
    assert run(babyai.on_options("task"))["options"] == list(LEVELS)


def test_options_of_an_unknown_field_are_refused(babyai: BenchmarkPanel) -> None:
    result = run(babyai.on_options("colour"))
    assert result["ok"] is False
    assert "'colour'" in result["error"]


@pytest.mark.parametrize(
    "name, value, named",
    [
        ("split", "validation", "'validation'"),
        ("task", "lift", "'lift'"),  # a task of the other split
        ("task", "Nope", "'Nope'"),
        ("benchmark", "metaworld", "'metaworld'"),
        ("episode_index", -1, "-1"),
        ("episode_index", "-3", "-3"),
        ("episode_index", 1.5, "1.5"),
        ("episode_index", "two", "'two'"),
        ("episode_index", True, "True"),
        ("episode_index", None, "None"),
        ("seed", -7, "-7"),
        ("colour", "red", "'colour'"),
    ],
)
def test_bad_values_are_refused_and_change_nothing(two: BenchmarkPanel, name: str, value: Any, named: str) -> None:
    change(two, "task", "push")
    change(two, "episode_index", 2)
    before = placement(two)
    result = change(two, name, value)
    assert result["ok"] is False
    assert result["side_effect"] == "none"
    assert named in result["error"]
    assert "signal_name" not in result
    assert placement(two) == before


# -- actions ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action, effect", [("play", "run_start"), ("pause", "run_pause"), ("step", "run_step"), ("stop", "run_stop")]
)
def test_actions_answer_their_side_effect(babyai: BenchmarkPanel, action: str, effect: str) -> None:
    assert run(babyai.on_action(action)) == {"ok": True, "side_effect": effect}


def test_unknown_action_is_refused(babyai: BenchmarkPanel) -> None:
    result = run(babyai.on_action("rewind"))
    assert result["ok"] is False
    assert "'rewind'" in result["error"]
    assert "play" in result["error"]


# -- task_instance ----------------------------------------------------------------------------------------------------


def test_task_instance_is_the_benchmarks_pure_function_of_the_placement(babyai: BenchmarkPanel) -> None:
    bench = babyai.benchmark
    change(babyai, "task", "GoToLocal")
    change(babyai, "episode_index", 9)
    change(babyai, "seed", 4)
    placed = babyai.task_instance()
    assert placed == bench.task_instance("default", "GoToLocal", 9, 4)

    # another panel walked there by another route places the very same episode
    other = BenchmarkPanel(BabyAIBenchmark(), task="GoToLocal")
    change(other, "seed", 4)
    change(other, "episode_index", 1)
    change(other, "episode_index", 9)
    again = other.task_instance()
    assert (again.episode_id, again.seed) == (placed.episode_id, placed.seed)

    # and a different index is a different episode with a different seed
    change(other, "episode_index", 10)
    assert other.task_instance().episode_id != placed.episode_id
    assert other.task_instance().seed != placed.seed


# -- PanelDriver ------------------------------------------------------------------------------------------------------


class RememberingAgent(AgentBase):
    """Keeps an episode-lifetime and a run-lifetime memory and records the signals it hears."""

    containers = [
        ContainerSpec("episode_memory", lifetime="episode", reducer="append"),
        ContainerSpec("run_memory", lifetime="run", reducer="append"),
    ]

    def __init__(self) -> None:
        self.signals: list[str] = []

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.episode = ctx.task.episode_id

    def act(self, obs: Observation) -> ActionChunk:
        self.ctx.containers["episode_memory"].write(self.episode)
        self.ctx.containers["run_memory"].write(self.episode)
        return ActionChunk.single(0)

    def on_signal(self, signal: Signal) -> None:
        self.signals.append(signal.value)


@pytest.fixture
def rig() -> Iterator[tuple[PanelDriver, Kernel, RememberingAgent]]:
    bench = TwoSplits()
    agent = RememberingAgent()
    env = bench.make_env()
    kernel = Kernel(env, agent, max_steps=2, auto_episode_reset=False)
    driver = PanelDriver(BenchmarkPanel(bench), kernel)
    yield driver, kernel, agent
    driver.close()
    kernel.close()
    env.close()


def test_place_pushes_the_fields_and_returns_the_placed_task(rig: tuple[PanelDriver, Kernel, RememberingAgent]) -> None:
    driver, _, _ = rig
    placed = driver.place("test", "shared", 4, 2)
    assert placed == TwoSplits().task_instance("test", "shared", 4, 2)
    assert placement(driver.panel) == ("test", "shared", 4, 2)
    assert driver.load()["episode_id"] == "twosplits/test/shared/0004@s2"
    assert driver.load()["step_budget"] == BUDGETS["shared"]


def test_place_into_a_task_only_the_new_split_has(rig: tuple[PanelDriver, Kernel, RememberingAgent]) -> None:
    driver, _, _ = rig
    assert driver.place("train", "push", 0, 0).task == "push"
    # the split change alone would reset the task to "lift"; the driver then sets the requested task
    assert driver.place("test", "shared", 1, 0).episode_id == "twosplits/test/shared/0001@s0"


def test_a_new_episode_clears_episode_memory_but_keeps_run_memory(
    rig: tuple[PanelDriver, Kernel, RememberingAgent],
) -> None:
    driver, kernel, agent = rig
    first = driver.place("train", "reach", 0, 0)
    kernel.run(first)
    memory = kernel.containers
    assert memory["episode_memory"].read() == [first.episode_id] * 2
    assert memory["run_memory"].read() == [first.episode_id] * 2

    agent.signals.clear()
    second = driver.place("train", "reach", 1, 0)
    assert agent.signals == ["episode_reset"]
    assert memory["episode_memory"].read() == []  # cleared by the panel's episode_reset
    assert memory["run_memory"].read() == [first.episode_id] * 2  # a run container outlives a change of episode

    kernel.run(second)
    assert memory["episode_memory"].read() == [second.episode_id] * 2


def test_replacing_the_same_episode_sends_no_episode_reset(rig: tuple[PanelDriver, Kernel, RememberingAgent]) -> None:
    driver, kernel, agent = rig
    task = driver.place("train", "push", 3, 1)
    kernel.run(task)
    agent.signals.clear()
    again = driver.place("train", "push", 3, 1)
    assert again == task
    assert agent.signals == []
    assert kernel.containers["episode_memory"].read() == [task.episode_id] * 2  # the episode memory stays

    kernel.run(again)  # a re-run of the same episode continues its memory
    assert "episode_reset" not in agent.signals
    assert kernel.containers["episode_memory"].read() == [task.episode_id] * 4


@pytest.mark.parametrize(
    "args, named",
    [
        (("validation", "reach", 0, 0), "'validation'"),
        (("train", "lift", 0, 0), "'lift'"),
        (("train", "reach", -2, 0), "-2"),
        (("train", "reach", 0, -5), "-5"),
    ],
)
def test_a_refused_placement_raises_naming_the_value(
    rig: tuple[PanelDriver, Kernel, RememberingAgent], args: tuple[Any, ...], named: str
) -> None:
    driver, _, agent = rig
    with pytest.raises(PlacementError, match=named):
        driver.place(*args)
    assert placement(driver.panel) == ("train", "reach", 0, 0)  # nothing before the bad field changed either
    assert agent.signals == []


def test_a_refused_field_change_leaves_the_placement_and_memory_alone(
    rig: tuple[PanelDriver, Kernel, RememberingAgent],
) -> None:
    driver, kernel, agent = rig
    task = driver.place("train", "push", 1, 0)
    kernel.run(task)
    agent.signals.clear()
    with pytest.raises(PlacementError, match=r"got 2\.5"):
        driver.set_field("episode_index", 2.5)
    assert placement(driver.panel) == ("train", "push", 1, 0)
    assert agent.signals == []
    assert kernel.containers["episode_memory"].read() == [task.episode_id] * 2


def test_driver_without_a_kernel_still_places(two: BenchmarkPanel) -> None:
    driver = PanelDriver(two)
    try:
        assert driver.place("test", "lift", 2, 0).episode_id == "twosplits/test/lift/0002@s0"
    finally:
        driver.close()


class AwaitingPanel(BenchmarkPanel):
    """A benchmark panel whose field hook really suspends (it awaits the event loop) before answering."""

    async def on_field_change(self, name: str, value: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return await super().on_field_change(name, value)


def test_a_panel_whose_hook_suspends_is_placed_on_the_event_loop() -> None:
    agent = RememberingAgent()
    bench = TwoSplits()
    kernel = Kernel(bench.make_env(), agent, max_steps=2, auto_episode_reset=False)
    driver = PanelDriver(AwaitingPanel(bench), kernel)
    try:
        placed = driver.place("test", "lift", 3, 1)
        assert placed.episode_id == "twosplits/test/lift/0003@s1"
        assert placement(driver.panel) == ("test", "lift", 3, 1)
        assert agent.signals == ["episode_reset"]
        assert driver.set_field("episode_index", 4)["side_effect"] == "signal"
        assert placement(driver.panel) == ("test", "lift", 4, 1)
    finally:
        driver.close()
        kernel.close()


def test_a_suspending_panel_is_placed_from_inside_a_running_event_loop() -> None:
    """As from a notebook or an async program, where asyncio refuses to run a second loop in the same thread."""
    agent = RememberingAgent()
    bench = TwoSplits()
    kernel = Kernel(bench.make_env(), agent, max_steps=2, auto_episode_reset=False)
    driver = PanelDriver(AwaitingPanel(bench), kernel)

    async def caller() -> str:
        return driver.place("test", "lift", 3, 1).episode_id

    try:
        assert asyncio.run(caller()) == "twosplits/test/lift/0003@s1"
        assert placement(driver.panel) == ("test", "lift", 3, 1)
        assert driver.set_field("episode_index", 4)["side_effect"] == "signal"  # and again outside any loop
        assert placement(driver.panel) == ("test", "lift", 4, 1)
    finally:
        driver.close()
        kernel.close()
