"""The BabyAI benchmark: the expert solves the curated levels, a random agent does not, episodes are reproducible from
their seed, and the environment keeps the promises the Kernel relies on (checked by the conformance suite)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from minigrid.utils.baby_ai_bot import BabyAIBot

from hylo.agents import RandomAgent
from hylo.conformance import check_environment
from hylo.core import (
    AgentBase,
    EpisodeContext,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    InvalidAction,
    Kernel,
    MemoryRecorder,
    Observation,
    SafetyShield,
    TaskInstance,
)
from hylo.envs.babyai import LEVELS, BabyAIBenchmark, BabyAIEnvironment, BabyAIExpert
from hylo.envs.benchmark import UnknownChoice

BENCH = BabyAIBenchmark()
NAMED = ["GoToLocal", "PickupLoc", "PutNextLocal", "GoToObj", "OpenDoor"]


def task(level: str, index: int) -> TaskInstance:
    return BENCH.task_instance("default", level, index)


def run(env: BabyAIEnvironment, agent: Any, level: str, index: int, **kernel: Any) -> EpisodeOutcome:
    kernel.setdefault("max_steps", BENCH.default_step_budget(level))
    with Kernel(env, agent, **kernel) as runner:
        return runner.run(task(level, index))


def success_rate(agent: Any, level: str, episodes: int) -> float:
    env = BabyAIEnvironment()
    try:
        outcomes = [run(env, agent, level, i) for i in range(episodes)]
    finally:
        env.close()
    assert all(o.status.scored for o in outcomes), [o.reason for o in outcomes if not o.status.scored]
    return sum(o.success for o in outcomes) / episodes


class Recording(AgentBase):
    """Wraps an agent and keeps every observation it was shown and every action it chose."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requirements = inner.requirements
        self.seen: list[Observation] = []
        self.actions: list[Any] = []

    def reset(self, ctx: EpisodeContext) -> None:
        self.inner.reset(ctx)

    def act(self, obs: Observation) -> Any:
        chunk = self.inner.act(obs)
        self.seen.append(obs)
        self.actions.extend(chunk.actions)
        return chunk


class Fixed(AgentBase):
    def __init__(self, action: Any) -> None:
        self.action = action

    def act(self, obs: Observation) -> Any:
        return self.action


def test_expert_solves_go_to_local() -> None:
    assert success_rate(BabyAIExpert(), "GoToLocal", 10) >= 0.9


@pytest.mark.parametrize("level", NAMED)
def test_expert_solves_each_named_level_within_its_budget(level: str) -> None:
    env = BabyAIEnvironment()
    outcomes = [run(env, BabyAIExpert(), level, i) for i in range(3)]
    assert [o.status for o in outcomes] == [EpisodeStatus.SUCCESS] * 3, [o.reason for o in outcomes]
    assert all(0 < o.metrics["return"] <= 1 for o in outcomes)  # BabyAI pays 1 - 0.9 * steps / max_steps


def test_random_agent_rarely_succeeds() -> None:
    assert success_rate(RandomAgent(), "GoToLocal", 10) < 0.5


def test_the_expert_reads_the_simulator_once_per_episode_and_the_read_is_traced() -> None:
    bus, recorder = EventBus(), MemoryRecorder()
    bus.subscribe(recorder)
    outcome = run(BabyAIEnvironment(), BabyAIExpert(), "GoToLocal", 0, bus=bus)
    assert outcome.success
    assert [e.name for e in recorder.of("privileged.state")] == ["simulator"]


def test_the_same_seed_replays_the_same_episode() -> None:
    env = BabyAIEnvironment()
    first, second = Recording(BabyAIExpert()), Recording(BabyAIExpert())
    outcome_a = run(env, first, "PutNextLocal", 4)
    run(env, BabyAIExpert(), "PickupLoc", 2)  # another level in between: nothing carries over
    outcome_b = run(BabyAIEnvironment(), second, "PutNextLocal", 4)
    assert first.actions == second.actions
    assert outcome_a == outcome_b and outcome_a.success
    assert len(first.seen) == len(second.seen) > 3
    for a, b in zip(first.seen, second.seen, strict=True):
        assert (a["instruction"], a["direction"]) == (b["instruction"], b["direction"])
        np.testing.assert_array_equal(a["grid"], b["grid"])


def test_reset_revives_the_placed_episode_even_after_steps_and_after_its_end() -> None:
    env = BabyAIEnvironment()
    placed = task("GoToLocal", 7)
    start = env.reset(placed)
    moved = env.step(2 if start["grid"][3, 5, 0] == 1 else 0).obs  # forward onto empty floor, else turn left
    assert moved["direction"] != start["direction"] or not np.array_equal(moved["grid"], start["grid"])
    again = env.reset(placed)
    assert again["instruction"] == start["instruction"] and again["direction"] == start["direction"]
    np.testing.assert_array_equal(again["grid"], start["grid"])
    results = [env.step(6) for _ in range(BENCH.default_step_budget("GoToLocal"))]  # "done" is a no-op in BabyAI
    assert [r.truncated for r in results] == [False] * 63 + [True]  # the level's own limit ends the episode
    assert not any(r.terminated or r.success for r in results)
    revived = env.reset(placed)
    assert revived["instruction"] == start["instruction"] and revived["direction"] == start["direction"]
    np.testing.assert_array_equal(revived["grid"], start["grid"])
    assert not env.step(6).truncated  # the step count was restored too


def test_different_indices_place_different_episodes() -> None:
    env = BabyAIEnvironment()
    starts = [env.reset(task("GoToLocal", i)) for i in range(6)]
    keys = {(o["instruction"], o["direction"], o["grid"].tobytes()) for o in starts}
    assert len(keys) == 6
    assert len({o["instruction"] for o in starts}) > 1


def test_observation_layout_and_that_frames_appear_only_when_rendering() -> None:
    plain = BabyAIEnvironment()
    obs = plain.reset(task("GoToLocal", 0))
    assert "images" not in obs and "images" not in plain.spec.observation_space.spaces
    assert obs["grid"].shape == (7, 7, 3) and obs["grid"].dtype == np.uint8
    assert obs["direction"] in range(4) and obs.instruction and obs.instruction.startswith("go to")

    rendered = BabyAIEnvironment(render_images=True, tile_size=4)
    box = rendered.spec.observation_space["images"]["view"]
    frames = {}
    for level in ("GoToLocal", "OpenDoor"):  # an 8x8 grid and a 22x22 one give frames of one shape
        view = rendered.reset(task(level, 0)).images["view"]
        assert view.dtype == np.uint8 and view.shape == box.shape == (88, 88, 3)
        assert len(np.unique(view.reshape(-1, 3), axis=0)) > 3  # walls, floor, the agent, objects
        frames[level] = view
    turned = rendered.step(0).obs.images["view"]  # turning left redraws the agent
    assert not np.array_equal(turned, frames["OpenDoor"])
    assert not np.array_equal(frames["GoToLocal"], frames["OpenDoor"])


@pytest.mark.parametrize("action", [9, -1, 1.5, True, "2", np.array([1])])
def test_malformed_actions_raise_invalid_action(action: Any) -> None:
    env = BabyAIEnvironment()
    env.reset(task("GoToLocal", 0))
    with pytest.raises(InvalidAction):
        env.step(action)


@pytest.mark.parametrize("action", [9, 1.5])
def test_an_agent_returning_an_invalid_action_ends_the_episode_as_its_error(action: Any) -> None:
    outcome = run(BabyAIEnvironment(), Fixed(action), "GoToLocal", 0, shield=SafetyShield.permissive())
    assert outcome.status is EpisodeStatus.ERROR and "env rejected" in outcome.reason
    if isinstance(action, float):  # under the default shield too: a non-integer is malformed, not unsafe
        assert run(BabyAIEnvironment(), Fixed(action), "GoToLocal", 0).status is EpisodeStatus.ERROR


def test_after_the_end_observe_returns_the_terminal_frame_and_step_refuses() -> None:
    env = BabyAIEnvironment()
    env.reset(task("GoToObj", 1))
    bot = BabyAIBot(env.privileged_state("simulator"))
    last = None
    for _ in range(BENCH.default_step_budget("GoToObj")):
        last = int(bot.replan(last))
        result = env.step(last)
        if result.terminated or result.truncated:
            break
    assert result.success and result.reward > 0
    assert env.observe() is result.obs
    with pytest.raises(RuntimeError):
        env.step(0)


def test_each_level_keeps_one_simulator_across_episodes_until_close() -> None:
    env = BabyAIEnvironment()
    env.reset(task("GoToLocal", 0))
    sim = env.privileged_state("simulator")
    env.reset(task("GoToLocal", 1))
    assert env.privileged_state("simulator") is sim
    env.reset(task("PickupLoc", 0))
    assert env.privileged_state("simulator") is not sim
    with pytest.raises(KeyError, match="simulator"):
        env.privileged_state("grid")
    env.close()
    env.reset(task("GoToLocal", 0))  # a closed env rebuilds on demand
    assert env.privileged_state("simulator") is not sim


def test_unknown_levels_and_splits_name_the_valid_choices() -> None:
    with pytest.raises(UnknownChoice, match="GoToLocal") as info:
        BabyAIEnvironment().reset(TaskInstance("babyai", "GoToNowhere"))
    assert info.value.choices == BENCH.tasks("default")
    with pytest.raises(UnknownChoice, match="PickupLoc"):
        BENCH.default_step_budget("BossLevel")
    with pytest.raises(UnknownChoice, match="default"):
        BENCH.tasks("test")


def test_the_benchmark_lists_the_named_levels_with_minigrids_own_step_limits() -> None:
    assert set(NAMED) <= set(BENCH.tasks("default")) == set(LEVELS)
    assert BENCH.instruction("GoToLocal") is None and task("GoToLocal", 0).instruction is None
    assert isinstance(BENCH.expert(), BabyAIExpert) and isinstance(BENCH.make_env(), BabyAIEnvironment)
    for level in LEVELS:
        env = gym.make(f"BabyAI-{level}-v0")
        env.reset(seed=task(level, 0).seed)  # minigrid sets max_steps on reset
        assert BENCH.default_step_budget(level) == env.unwrapped.max_steps, level
        env.close()


class BotPolicy:
    """Drives the conformance checks' episodes to their end with BabyAIBot on the env they made last."""

    def __init__(self) -> None:
        self.envs: list[BabyAIEnvironment] = []
        self.bot: Any = None
        self.last: int | None = None

    def make_env(self) -> BabyAIEnvironment:
        self.envs.append(BabyAIEnvironment())
        return self.envs[-1]

    def __call__(self, obs: Mapping[str, Any]) -> int:
        sim = self.envs[-1].privileged_state("simulator")
        if self.bot is None or self.bot.mission is not sim or sim.step_count == 0:
            self.bot, self.last = BabyAIBot(sim), None
        self.last = int(self.bot.replan(self.last))
        return self.last


def test_conformance() -> None:
    policy = BotPolicy()
    check_environment(policy.make_env, tasks=[task("GoToLocal", 0), task("PutNextLocal", 1)], policy=policy)
