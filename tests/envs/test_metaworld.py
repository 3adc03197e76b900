"""Meta-World through hylo, on the real MuJoCo simulator: the expert solves tasks and a random agent does not, a seed
places the same episode, a diverging simulation is the infrastructure's fault and a NaN action the agent's, nothing
leaks to stdout, frames are rendered only when asked for, and the env passes the conformance suite."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from metaworld.policies import ENV_POLICY_MAP

from hylo.agents import RandomAgent
from hylo.conformance import ConformanceWarning, check_environment
from hylo.core import AgentBase, EpisodeContext, EpisodeOutcome, EpisodeStatus, Kernel, Observation, TaskInstance
from hylo.core.chunk import ActionChunk
from hylo.core.errors import InvalidAction
from hylo.core.shield import SafetyShield
from hylo.envs.benchmark import UnknownChoice
from hylo.envs.metaworld import (
    INSTRUCTIONS,
    MAX_EPISODE_STEPS,
    MetaWorldBenchmark,
    MetaWorldEnvironment,
    MetaWorldExpert,
)

BENCH = MetaWorldBenchmark()


@pytest.fixture(scope="module")
def env() -> Iterator[MetaWorldEnvironment]:
    environment = BENCH.make_env()
    yield environment
    environment.close()


def task(name: str, index: int = 0) -> TaskInstance:
    return BENCH.task_instance("mt10", name, index)


def run(env: MetaWorldEnvironment, agent: Any, instance: TaskInstance, **kernel: Any) -> EpisodeOutcome:
    with Kernel(env, agent, **kernel) as runner:
        return runner.run(instance)


class RecordingExpert(MetaWorldExpert):
    """The expert, keeping every action it took."""

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.actions: list[np.ndarray[Any, Any]] = []

    def act(self, obs: Observation) -> ActionChunk:
        chunk = super().act(obs)
        self.actions.append(chunk.actions[0])
        return chunk


class Corrupting(MetaWorldExpert):
    """The expert, but before its `at`-th action it damages the simulator state (as a diverging solver would)."""

    def __init__(self, env: MetaWorldEnvironment, at: int, corrupt: Callable[[Any], None]) -> None:
        super().__init__()
        self.env, self.at, self.corrupt = env, at, corrupt

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.calls = 0

    def act(self, obs: Observation) -> ActionChunk:
        self.calls += 1
        if self.calls == self.at:
            self.corrupt(self.env.mjdata())
        return super().act(obs)


class Constant(AgentBase):
    def __init__(self, action: Any) -> None:
        self.action = action

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(self.action)


@pytest.mark.parametrize("name", ["reach-v3", "pick-place-v3"])
def test_expert_solves_its_task(env: MetaWorldEnvironment, name: str) -> None:
    outcomes = [run(env, MetaWorldExpert(), task(name, i), max_steps=MAX_EPISODE_STEPS) for i in range(10)]
    successes = [o for o in outcomes if o.status is EpisodeStatus.SUCCESS]
    assert len(successes) >= 9, [(o.status.value, o.reason) for o in outcomes]
    assert max(o.steps for o in successes) < 150  # it succeeds early: the Kernel ends the episode there


def test_random_agent_rarely_picks_and_places(env: MetaWorldEnvironment) -> None:
    outcomes = [run(env, RandomAgent(), task("pick-place-v3", i), max_steps=100) for i in range(5)]
    assert all(o.status is EpisodeStatus.FAILURE and o.steps == 100 for o in outcomes)


def test_a_seed_places_the_same_episode_and_another_index_another(env: MetaWorldEnvironment) -> None:
    first = env.reset(task("pick-place-v3", 3))["state"].copy()
    other = env.reset(task("pick-place-v3", 4))["state"].copy()
    assert np.abs(first[-3:] - other[-3:]).max() > 0.01  # another goal
    assert np.abs(first[4:7] - other[4:7]).max() > 0.01  # the puck elsewhere
    global_rng = np.random.get_state()[1].copy()
    fresh = MetaWorldEnvironment()  # builds its own simulator
    try:
        np.testing.assert_array_equal(fresh.reset(task("pick-place-v3", 3))["state"], first)
    finally:
        fresh.close()
    np.testing.assert_array_equal(np.random.get_state()[1], global_rng)  # numpy's global generator was not used
    runs = []
    for _ in range(2):  # the same env, after another episode: the same start, the same actions, the same outcome
        np.testing.assert_array_equal(env.reset(task("pick-place-v3", 3))["state"], first)
        expert = RecordingExpert()
        outcome = run(env, expert, task("pick-place-v3", 3))
        runs.append((outcome.status, outcome.steps, np.array(expert.actions)))
        env.reset(task("pick-place-v3", 4))
    assert runs[0][0] is EpisodeStatus.SUCCESS
    assert runs[0][:2] == runs[1][:2]
    np.testing.assert_array_equal(runs[0][2], runs[1][2])


def test_reset_revives_the_start_of_the_episode(env: MetaWorldEnvironment) -> None:
    start = env.reset(task("reach-v3", 1))["state"].copy()
    for _ in range(20):
        moved = env.step(np.array([1.0, -1.0, 0.5, 1.0], np.float32)).obs["state"]
    assert np.abs(moved[:3] - start[:3]).max() > 0.05
    np.testing.assert_array_equal(env.reset(task("reach-v3", 1))["state"], start)


def test_episode_is_truncated_at_500_steps(env: MetaWorldEnvironment) -> None:
    outcome = run(env, Constant(np.zeros(4, np.float32)), task("reach-v3"), max_steps=2 * MAX_EPISODE_STEPS)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "truncated", 500)
    terminal = env.observe()
    np.testing.assert_array_equal(env.observe()["state"], terminal["state"])
    with pytest.raises(RuntimeError, match="truncated"):
        env.step(np.zeros(4, np.float32))


def test_step_reports_reward_success_and_small_info(env: MetaWorldEnvironment) -> None:
    obs = env.reset(task("reach-v3"))
    assert obs["instruction"] == INSTRUCTIONS["reach-v3"] == task("reach-v3").instruction
    assert obs["state"].shape == (39,) and obs["state"].dtype == np.float64
    result = env.step(np.zeros(4, np.float32))
    assert isinstance(result.reward, float) and result.reward > 0
    assert (result.terminated, result.truncated, result.success) == (False, False, False)
    assert result.info["success"] == 0.0 and all(isinstance(v, float) for v in result.info.values())


def test_control_rate_matches_simulated_time(env: MetaWorldEnvironment) -> None:
    env.reset(task("reach-v3"))
    before = env.mjdata().time
    for _ in range(8):
        env.step(np.zeros(4, np.float32))
    assert env.mjdata().time - before == pytest.approx(8 * env.spec.dt)
    assert env.spec.control_rate_hz == pytest.approx(80.0)


def test_hold_action_keeps_hand_still_and_grip_closed(env: MetaWorldEnvironment) -> None:
    env.reset(task("reach-v3"))
    for _ in range(15):
        env.step(np.array([0.5, 0.0, 0.5, 1.0], np.float32))  # move up and close the gripper
    hold = env.hold_action()
    assert env.spec.action_space.contains(hold) and hold[3] == 1.0
    for _ in range(30):
        settled = env.step(env.hold_action()).obs["state"].copy()
    for _ in range(20):
        held = env.step(env.hold_action()).obs["state"]
    assert np.abs(held[:3] - settled[:3]).max() < 1e-3
    assert held[3] == pytest.approx(settled[3], abs=1e-3) and held[3] < 0.5  # the fingers stay closed


@pytest.mark.parametrize(
    ("warning", "corrupt"),
    [
        ("BADQVEL", lambda data: data.qvel.fill(1e30)),
        ("BADQPOS", lambda data: data.qpos.fill(np.nan)),
    ],
)
def test_diverging_simulation_is_infra_invalid_and_quiet(
    env: MetaWorldEnvironment,
    warning: str,
    corrupt: Callable[[Any], None],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="hylo.mujoco"):
        outcome = run(env, Corrupting(env, at=5, corrupt=corrupt), task("reach-v3"))
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert warning in outcome.reason and outcome.steps == 4
    assert any("unstable" in record.getMessage() for record in caplog.records)  # MuJoCo's warning went to logging
    assert capfd.readouterr().out == ""
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert run(env, MetaWorldExpert(), task("reach-v3")).status is EpisodeStatus.SUCCESS  # the next episode is fine


@pytest.mark.parametrize("bad", [[np.nan, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, np.nan], [0.0, np.inf, 0.0, 0.0]])
def test_non_finite_action_past_a_disabled_shield_is_the_agents_error(
    env: MetaWorldEnvironment, bad: list[float], capfd: pytest.CaptureFixture[str]
) -> None:
    # Unchecked, a NaN displacement reaches the mocap and MuJoCo reports BADQACC (which would blame the simulator);
    # a NaN gripper effort is MuJoCo's BADCTRL. Either way it is the agent's action.
    action = np.array(bad, np.float32)
    outcome = run(env, Constant(action), task("reach-v3"), shield=SafetyShield(guards=[]))
    assert outcome.status is EpisodeStatus.ERROR
    assert "non-finite" in outcome.reason and outcome.steps == 0
    assert capfd.readouterr().out == ""


@pytest.mark.parametrize(
    "action", [np.zeros(3), np.zeros((2, 4)), np.array(["a", "b", "c", "d"]), [None] * 4, [[0.0], [0.0, 0.0], 0.0, 0.0]]
)
def test_malformed_action_is_refused(env: MetaWorldEnvironment, action: Any) -> None:
    env.reset(task("reach-v3"))
    with pytest.raises(InvalidAction):
        env.step(action)


def test_frames_are_rendered_only_when_asked(env: MetaWorldEnvironment) -> None:
    assert "images" not in env.reset(task("reach-v3"))
    assert "images" not in env.spec.observation_space.spaces
    rendering = MetaWorldEnvironment(render_images=True, width=96, height=64)
    try:
        first = rendering.reset(task("pick-place-v3"))["images"]["corner"]
        assert first.dtype == np.uint8 and first.shape == (64, 96, 3)
        assert rendering.spec.observation_space["images"]["corner"].shape == (64, 96, 3)
        assert len(np.unique(first.reshape(-1, 3), axis=0)) > 50  # a scene, not a blank frame
        assert first[:8].std() < 30  # upright: the top of the frame is the plain back wall, not the tiled floor
        red = (first[..., 0] > 120) & (first[..., 1] < 60) & (first[..., 2] < 60)
        assert np.nonzero(red)[1].mean() > 48  # not mirrored: seen from this corner, the (red) robot stands right
        for _ in range(25):
            later = rendering.step(np.array([1.0, 0.0, -1.0, 0.0], np.float32)).obs["images"]["corner"]
        assert np.abs(later.astype(int) - first.astype(int)).mean() > 0.5  # the arm moved in the picture
        np.testing.assert_array_equal(rendering.observe()["images"]["corner"], later)
    finally:
        rendering.close()


def test_benchmark_lists_tasks_and_refuses_unknown_names(env: MetaWorldEnvironment) -> None:
    assert BENCH.splits() == ["mt10", "mt50"]
    mt10, mt50 = BENCH.tasks("mt10"), BENCH.tasks("mt50")
    assert len(mt10) == 10 and len(mt50) == 50 and set(mt10) < set(mt50)
    assert {"reach-v3", "pick-place-v3", "window-close-v3"} <= set(mt10)
    assert set(mt50) == set(INSTRUCTIONS) == set(ENV_POLICY_MAP)
    assert len(set(INSTRUCTIONS.values())) == 50  # the instruction tells the tasks apart
    assert BENCH.default_step_budget("reach-v3") == 500
    with pytest.raises(UnknownChoice, match="mt10"):
        BENCH.tasks("mt1000")
    with pytest.raises(UnknownChoice, match="pick-place-v3"):
        env.reset(TaskInstance("metaworld", "pick-plaice-v3"))
    outcome = run(env, MetaWorldExpert(), TaskInstance("metaworld", "pick-plaice-v3"))
    assert outcome.status is EpisodeStatus.INFRA_INVALID and "pick-plaice-v3" in outcome.reason
    with pytest.raises(UnknownChoice, match="reach-v3"):
        MetaWorldExpert().reset(EpisodeContext(seed=0, env_spec=env.spec, task=TaskInstance("metaworld", "x-v3")))


def test_environment_conformance_with_the_expert_driving() -> None:
    tasks = [task("reach-v3"), task("pick-place-v3")]
    policies = {INSTRUCTIONS[t.task]: ENV_POLICY_MAP[t.task]() for t in tasks}

    def expert(obs: Mapping[str, Any]) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.clip(policies[obs["instruction"]].get_action(obs["state"]), -1, 1).astype(np.float32)

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConformanceWarning)  # it would mean a rule about ended episodes went unchecked
        check_environment(BENCH.make_env, tasks, policy=expert, steps=100)
