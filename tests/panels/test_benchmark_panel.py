"""The benchmark panel: the cascade benchmark → split → task → episode_index/seed, the intents its hooks return,
its direct placement of a planned episode (`place`), and the PanelDriver that places the batch runner's episodes
through it and carries `episode_reset` to a Kernel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from hylo.core import ActionChunk, AgentBase, ContainerSpec, EpisodeContext, Kernel, Observation, Signal
from hylo.core.types import TaskInstance
from hylo.envs import GridGoal
from hylo.envs.babyai import LEVELS, BabyAIBenchmark
from hylo.envs.benchmark import Benchmark, UnknownChoice
from hylo.panels import BenchmarkPanel, PanelRefused, PanelReply, PanelState, SideEffect
from hylo.panels.placement import PanelDriver

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


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def load(panel: BenchmarkPanel) -> dict[str, Any]:
    """The panel's `on_load`, as the HTTP API shows it."""
    state = run(panel.on_load())
    assert isinstance(state, PanelState)
    return state.to_json()


def change(panel: BenchmarkPanel, name: str, value: Any) -> dict[str, Any]:
    """The answer to a field change, as the HTTP API shows it."""
    reply = run(panel.on_field_change(name, value))
    assert isinstance(reply, PanelReply)
    return reply.to_json()


def refusal(hook: Any) -> str:
    """The message of the refusal `hook` raises."""
    with pytest.raises(PanelRefused) as refused:
        run(hook)
    return str(refused.value)


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
    loaded = load(babyai)
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
    assert load(two)["step_budget"] == 11
    change(two, "task", "push")
    assert load(two)["step_budget"] == 22


def test_on_load_reports_an_unavailable_benchmark_with_its_reason() -> None:
    panel = BenchmarkPanel(TwoSplits(available=(False, "simulator not installed")))
    loaded = load(panel)
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
    assert load(two)["step_budget"] == BUDGETS["lift"]


def test_split_change_keeps_a_task_the_new_split_has(two: BenchmarkPanel) -> None:
    change(two, "task", "shared")
    change(two, "episode_index", 2)
    result = change(two, "split", "test")
    assert result["side_effect"] == "signal"
    assert placement(two) == ("test", "shared", 2, 0)
    assert result["signal_payload"]["episode_id"] == "twosplits/test/shared/0002@s0"


def test_task_options_follow_the_current_split(two: BenchmarkPanel) -> None:
    assert run(two.on_options("task")).to_json() == {"ok": True, "side_effect": "none", "options": SPLIT_TASKS["train"]}
    change(two, "split", "test")
    assert run(two.on_options("task")).options == tuple(SPLIT_TASKS["test"])
    assert run(two.on_options("split")).options == ("train", "test")


def test_babyai_task_options_are_its_curated_levels(babyai: BenchmarkPanel) -> None:
    assert run(babyai.on_options("task")).options == tuple(LEVELS)


def test_options_of_an_unknown_field_are_refused(babyai: BenchmarkPanel) -> None:
    assert "'colour'" in refusal(babyai.on_options("colour"))


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
    assert named in refusal(two.on_field_change(name, value))  # a refusal carries no intent: nothing is signalled
    assert placement(two) == before


# -- actions ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action, effect", [("play", "run_start"), ("pause", "run_pause"), ("step", "run_step"), ("stop", "run_stop")]
)
def test_actions_answer_their_side_effect(babyai: BenchmarkPanel, action: str, effect: str) -> None:
    assert run(babyai.on_action(action)).to_json() == {"ok": True, "side_effect": effect}


def test_unknown_action_is_refused(babyai: BenchmarkPanel) -> None:
    error = refusal(babyai.on_action("rewind"))
    assert "'rewind'" in error
    assert "play" in error


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


# -- place: a planned episode at once --------------------------------------------------------------------------------


def planned(split: str, task: str, index: int, seed: int) -> TaskInstance:
    """The batch runner's planned episode (as `TwoSplits` plans it); an index below 0, which no plan has, is written
    in after the fact, to see the panel refuse it too."""
    made = TwoSplits().task_instance(split, task, max(index, 0), seed)
    if index < 0:
        object.__setattr__(made, "index", index)
    return made


def test_place_moves_the_panel_at_once_and_answers_episode_reset(two: BenchmarkPanel) -> None:
    reply = two.place(planned("test", "shared", 4, 2))
    assert placement(two) == ("test", "shared", 4, 2)
    assert reply.effect is SideEffect.SIGNAL and reply.signal == "episode_reset"
    assert reply.signal_payload == {"split": "test", "task": "shared", "episode_index": 4, "seed": 2,
                                    "changed": "episode_index",  # the last field that moved, as field by field
                                    "episode_id": "twosplits/test/shared/0004@s2"}  # fmt: skip
    assert two.task_instance() == planned("test", "shared", 4, 2)
    assert two.place(planned("test", "lift", 5, 2)).signal_payload["changed"] == "episode_index"
    assert two.place(planned("test", "shared", 5, 2)).signal_payload["changed"] == "task"
    assert two.place(planned("test", "shared", 5, 2)) == PanelReply()  # the episode placed already: nothing


@pytest.mark.parametrize(
    "moves",
    [
        [("train", "push", 3, 1), ("test", "shared", 3, 1), ("test", "lift", 0, 1), ("test", "lift", 0, 1)],
        [("train", "reach", 0, 0), ("train", "reach", 0, 7), ("train", "shared", 2, 7), ("test", "shared", 2, 0)],
    ],
)
def test_place_answers_what_the_field_changes_that_move_the_panel_there_answer(
    moves: list[tuple[str, str, int, int]],
) -> None:
    direct, by_fields = BenchmarkPanel(TwoSplits()), BenchmarkPanel(TwoSplits())
    for split, task, index, seed in moves:
        reply = direct.place(planned(split, task, index, seed))
        fields = (("split", split), ("task", task), ("seed", seed), ("episode_index", index))
        replies = [change(by_fields, name, value) for name, value in fields]
        assert placement(direct) == placement(by_fields) == (split, task, index, seed)
        moved = [answer for answer in replies if answer["side_effect"] == "signal"]
        assert (reply.effect is SideEffect.SIGNAL) == bool(moved)
        if moved:
            assert reply.to_json() == moved[-1]  # the last move's answer: where the panel is, and what moved it there


@pytest.mark.parametrize(
    "args, named",
    [
        (("validation", "reach", 0, 0), "'validation'"),
        (("train", "lift", 0, 0), "'lift'"),
        (("test", "reach", 0, 0), "'reach'"),  # a task the new split lacks: the split does not move either
        (("train", "reach", -2, 0), "-2"),
        (("train", "reach", 0, -5), "-5"),
    ],
)
def test_place_refuses_a_bad_value_naming_it_and_changes_nothing(
    two: BenchmarkPanel, args: tuple[str, str, int, int], named: str
) -> None:
    two.place(planned("train", "push", 1, 3))
    with pytest.raises(PanelRefused, match=named):
        two.place(planned(*args))
    assert placement(two) == ("train", "push", 1, 3)


def test_place_refuses_an_episode_of_another_benchmark(babyai: BenchmarkPanel) -> None:
    with pytest.raises(PanelRefused, match="'twosplits'"):
        babyai.place(planned("train", "reach", 0, 0))
    assert babyai.task_instance().benchmark == "babyai"


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
def rig() -> Iterator[tuple[PanelDriver, BenchmarkPanel, Kernel, RememberingAgent]]:
    bench = TwoSplits()
    agent = RememberingAgent()
    env = bench.make_env()
    kernel = Kernel(env, agent, max_steps=2, auto_episode_reset=False)
    panel = BenchmarkPanel(bench)
    yield PanelDriver(panel, kernel), panel, kernel, agent
    kernel.close()
    env.close()


Rig = tuple[PanelDriver, BenchmarkPanel, Kernel, RememberingAgent]


def test_place_places_the_planned_task_and_returns_it(rig: Rig) -> None:
    driver, panel, _, _ = rig
    task = planned("test", "shared", 4, 2)
    assert driver.place(task) is task
    assert placement(panel) == ("test", "shared", 4, 2)
    assert load(panel)["episode_id"] == "twosplits/test/shared/0004@s2"
    assert load(panel)["step_budget"] == BUDGETS["shared"]


def test_place_into_a_task_only_the_new_split_has(rig: Rig) -> None:
    driver, panel, _, _ = rig
    assert driver.place(planned("train", "push", 0, 0)).task == "push"
    # the split change alone would reset the task to "lift"; the panel places the requested task
    assert driver.place(planned("test", "shared", 1, 0)).episode_id == "twosplits/test/shared/0001@s0"
    assert placement(panel) == ("test", "shared", 1, 0)


def test_a_new_episode_clears_episode_memory_but_keeps_run_memory(rig: Rig) -> None:
    driver, _, kernel, agent = rig
    first = driver.place(planned("train", "reach", 0, 0))
    kernel.run(first)
    memory = kernel.containers
    assert memory["episode_memory"].read() == [first.episode_id] * 2
    assert memory["run_memory"].read() == [first.episode_id] * 2

    agent.signals.clear()
    second = driver.place(planned("train", "reach", 1, 0))
    assert agent.signals == ["episode_reset"]
    assert memory["episode_memory"].read() == []  # cleared by the panel's episode_reset
    assert memory["run_memory"].read() == [first.episode_id] * 2  # a run container outlives a change of episode

    kernel.run(second)
    assert memory["episode_memory"].read() == [second.episode_id] * 2


def test_a_move_of_several_fields_signals_once(rig: Rig) -> None:
    driver, _, _, agent = rig
    driver.place(planned("test", "shared", 3, 4))  # split, task, seed and index all move
    assert agent.signals == ["episode_reset"]


def test_replacing_the_same_episode_sends_no_episode_reset(rig: Rig) -> None:
    driver, _, kernel, agent = rig
    task = driver.place(planned("train", "push", 3, 1))
    kernel.run(task)
    agent.signals.clear()
    again = driver.place(planned("train", "push", 3, 1))
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
def test_a_refused_placement_raises_naming_the_value(rig: Rig, args: tuple[str, str, int, int], named: str) -> None:
    driver, panel, _, agent = rig
    with pytest.raises(PanelRefused, match=named):
        driver.place(planned(*args))
    assert placement(panel) == ("train", "reach", 0, 0)  # nothing before the bad field changed either
    assert agent.signals == []


def test_a_refused_field_change_leaves_the_placement_and_memory_alone(rig: Rig) -> None:
    driver, panel, kernel, agent = rig
    task = driver.place(planned("train", "push", 1, 0))
    kernel.run(task)
    agent.signals.clear()
    with pytest.raises(PanelRefused, match=r"got 2\.5"):
        panel.change("episode_index", 2.5)
    assert placement(panel) == ("train", "push", 1, 0)
    assert agent.signals == []
    assert kernel.containers["episode_memory"].read() == [task.episode_id] * 2


def test_driver_without_a_kernel_still_places(two: BenchmarkPanel) -> None:
    driver = PanelDriver(two)
    assert driver.place(planned("test", "lift", 2, 0)).episode_id == "twosplits/test/lift/0002@s0"
    assert placement(two) == ("test", "lift", 2, 0)


class AwaitingPanel(BenchmarkPanel):
    """A benchmark panel whose field hook really suspends (it awaits the event loop) before answering."""

    async def on_field_change(self, name: str, value: Any) -> PanelReply:
        await asyncio.sleep(0)
        return await super().on_field_change(name, value)


def test_a_panel_whose_hooks_suspend_is_placed_directly_also_inside_a_running_event_loop() -> None:
    """The batch runner never awaits a hook: a placement is plain code, also from a notebook or an async program,
    where asyncio refuses to run a second loop in the same thread."""
    agent = RememberingAgent()
    bench = TwoSplits()
    kernel = Kernel(bench.make_env(), agent, max_steps=2, auto_episode_reset=False)
    panel = AwaitingPanel(bench)
    driver = PanelDriver(panel, kernel)

    async def caller() -> str:
        return driver.place(planned("test", "lift", 3, 1)).episode_id

    try:
        assert asyncio.run(caller()) == "twosplits/test/lift/0003@s1"
        assert placement(panel) == ("test", "lift", 3, 1)
        assert agent.signals == ["episode_reset"]
        assert change(panel, "episode_index", 4)["side_effect"] == "signal"  # its hook, awaited on a loop
        assert placement(panel) == ("test", "lift", 4, 1)
    finally:
        kernel.close()
