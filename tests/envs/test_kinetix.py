"""Kinetix through hylo, on the package's own JAX simulator: RTC's shipped levels, the package's goal signal as
success, a seed replays its episode in any env of the process, the programs are compiled once per process, a
non-finite state is the infrastructure's fault and a NaN action the agent's, and an evaluation runs end to end."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("kinetix")
jax = pytest.importorskip("jax")

import hylo  # noqa: E402
from hylo.conformance import ConformanceWarning, check_environment  # noqa: E402
from hylo.core import AgentBase, EpisodeContext, EpisodeStatus, Kernel, Observation, TaskInstance  # noqa: E402
from hylo.core import registry as core_registry  # noqa: E402
from hylo.core.chunk import ActionChunk  # noqa: E402
from hylo.core.errors import HyloError, InvalidAction, SimulationDiverged, UnknownChoice  # noqa: E402
from hylo.core.shield import SafetyShield  # noqa: E402
from hylo.envs.kinetix import (  # noqa: E402
    MAX_EPISODE_STEPS,
    STATE_SIZE,
    KinetixBenchmark,
    KinetixEnvironment,
    compilations,
    episode_key,
)
from hylo.envs.registry import BENCHMARK_REGISTRY, ENTRY_POINT_GROUP, registered_benchmarks  # noqa: E402

BENCH = KinetixBenchmark()
RTC_SHIPPED = [
    "l/grasp_easy",
    "l/hard_lunar_lander",
    "l/mjc_half_cheetah",
    "l/mjc_swimmer",
    "l/mjc_walker",
    "l/h17_unicycle",
    "l/chain_lander",
    "l/car_launch",
]


@pytest.fixture(scope="module")
def env() -> Iterator[KinetixEnvironment]:
    environment = BENCH.make_env()
    yield environment
    environment.close()


def task(name: str, index: int = 0) -> TaskInstance:
    return BENCH.task_instance("rtc" if name in RTC_SHIPPED else name[0], name, index)


def rollout(env: KinetixEnvironment, instance: TaskInstance, actions: np.ndarray[Any, Any]) -> list[Any]:
    """The state after reset and after each action (stopping where the episode ends)."""
    states = [env.reset(instance)["state"]]
    for action in actions:
        result = env.step(action)
        states.append(result.obs["state"])
        if result.terminated or result.truncated:
            break
    return states


def actions(count: int, seed: int = 0) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(-1, 1, (count, 4)), rng.uniform(0, 1, (count, 2))], axis=1).astype(np.float32)


class Constant(AgentBase):
    def __init__(self, action: Any) -> None:
        self.action = action

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(self.action)


class Corrupting(Constant):
    """Holds still, but before its `at`-th act puts a NaN into a body's velocity (as a diverging solver would)."""

    def __init__(self, env: KinetixEnvironment, at: int) -> None:
        super().__init__(np.zeros(6, np.float32))
        self.env, self.at = env, at

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.calls = 0

    def act(self, obs: Observation) -> ActionChunk:
        self.calls += 1
        if self.calls == self.at:
            state = self.env.env_state()
            velocity = state.polygon.velocity.at[-1, 0].set(np.nan)
            self.env.set_env_state(state.replace(polygon=state.polygon.replace(velocity=velocity)))
        return super().act(obs)


def test_rtc_split_holds_the_shipped_rtc_levels_and_names_the_missing_ones(env: KinetixEnvironment) -> None:
    assert BENCH.splits() == ["rtc", "l", "m", "s"] and BENCH.tasks("rtc") == RTC_SHIPPED
    assert sorted(BENCH.unavailable_tasks()) == ["l/cartpole_thrust", "l/catapult", "l/catcher_v3", "l/trampoline"]
    assert {"l/h4_cartpole", "m/h3_car_thrust", "s/h8_unicycle_balance"} <= {
        name for split in ("l", "m", "s") for name in BENCH.tasks(split)
    }
    with pytest.raises(HyloError, match=r"l/catapult cannot run here.*does not ship"):
        BENCH.check_tasks("rtc", ["l/catapult"])
    with pytest.raises(UnknownChoice, match="l/grasp_easy"):
        env.reset(TaskInstance("kinetix", "l/grasp_eazy"))
    assert BENCH.default_step_budget("l/grasp_easy") == MAX_EPISODE_STEPS == 256
    assert env.spec.control_rate_hz == 30.0 and env.spec.action_space.shape == (6,)


def test_green_touching_blue_is_success_and_touching_red_a_failure(env: KinetixEnvironment) -> None:
    obs = env.reset(task("l/grasp_easy"))
    assert obs["state"].shape == (STATE_SIZE,) and obs["state"].dtype == np.float32 and "images" not in obs
    assert obs["instruction"] == task("l/grasp_easy").instruction and "green block" in obs["instruction"]
    state = env.env_state()
    roles, active = np.asarray(state.polygon_shape_roles), np.asarray(state.polygon.active)
    green, blue = (int(np.flatnonzero((roles == role) & active)[0]) for role in (1, 2))
    above_blue = state.polygon.position.at[green].set(state.polygon.position[blue] + np.array([0.0, 0.1]))
    env.set_env_state(state.replace(polygon=state.polygon.replace(position=above_blue)))
    result = env.step(env.hold_action())  # the package's GoalR: the green block touched the blue goal
    assert (result.success, result.terminated, result.truncated) == (True, True, False) and result.reward > 0.9
    with pytest.raises(RuntimeError, match="ended"):
        env.step(env.hold_action())

    env.reset(task("l/grasp_easy"))  # held still, the arm lets the block fall on the red floor
    steps = 0
    while not (result := env.step(env.hold_action())).terminated and not result.truncated:
        steps += 1
    assert (result.success, result.terminated) == (False, True) and result.reward < -0.9 and steps < 100


def test_a_seed_replays_its_episode_in_any_env_and_another_seed_draws_other_noise(env: KinetixEnvironment) -> None:
    moves = actions(40)
    first = rollout(env, task("l/hard_lunar_lander", 3), moves)
    fresh = KinetixEnvironment()
    try:
        rollout(fresh, task("l/mjc_swimmer", 1), actions(10, 1))  # another episode first
        again = rollout(fresh, task("l/hard_lunar_lander", 3), moves)
    finally:
        fresh.close()
    assert len(first) == len(again) > 10
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    other = rollout(env, task("l/hard_lunar_lander", 4), moves)
    np.testing.assert_array_equal(other[0], first[0])  # a level starts from its saved state whatever the seed
    assert any(not np.array_equal(a, b) for a, b in zip(first[1:], other[1:], strict=False))  # the noise differs

    noiseless = KinetixEnvironment(action_noise_std=0.0)  # the package's own dynamics: the seed changes nothing
    try:
        one, two = (rollout(noiseless, task("l/hard_lunar_lander", i), moves[:20]) for i in (3, 4))
    finally:
        noiseless.close()
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(episode_key(5), jax.random.PRNGKey(5))
    assert not np.array_equal(episode_key(2**32 + 5), episode_key(5))  # a 64-bit seed keeps its high word


def test_the_programs_are_compiled_once_per_process(env: KinetixEnvironment) -> None:
    levels = ("l/grasp_easy", "l/chain_lander")
    for name in levels:
        env.reset(task(name))  # builds the programs (when no test did) and loads the levels
    assert compilations()["reset"] == compilations()["step"] == 1
    events: list[str] = []
    counting = [True]
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, _secs, **_: events.append(event) if counting[0] and "/jax/core/compile/" in event else None
    )
    try:
        for index in range(2):
            other = KinetixEnvironment()
            for name in levels:
                rollout(other, task(name, index), actions(30, index))
            other.close()
        assert events == []  # nothing was traced, lowered or compiled for the new envs and their episodes
        jax.jit(lambda x: x * 3 + 1)(np.float32(2))
        assert events  # what the listener hears when something is compiled
    finally:
        counting[0] = False
    assert compilations()["reset"] == compilations()["step"] == 1


def test_a_non_finite_state_is_infra_invalid_and_a_nan_action_the_agents_error(env: KinetixEnvironment) -> None:
    with Kernel(env, Corrupting(env, at=5)) as kernel:
        outcome = kernel.run(task("l/mjc_walker"))
    assert outcome.status is EpisodeStatus.INFRA_INVALID and "non-finite state" in outcome.reason
    assert outcome.steps == 4
    env.reset(task("l/mjc_walker"))
    state = env.env_state()
    env.set_env_state(state.replace(polygon=state.polygon.replace(velocity=state.polygon.velocity * np.nan)))
    with pytest.raises(SimulationDiverged, match="non-finite state"):
        env.step(env.hold_action())

    env.reset(task("l/mjc_walker"))
    for bad in (np.array([0, 0, np.nan, 0, 0, 0], np.float32), np.zeros(4, np.float32), "left"):
        with pytest.raises(InvalidAction):
            env.step(bad)
    with Kernel(env, Constant(np.full(6, np.nan, np.float32)), shield=SafetyShield(guards=[])) as kernel:
        outcome = kernel.run(task("l/mjc_walker"))  # past a disabled shield, the env refuses it itself
    assert outcome.status is EpisodeStatus.ERROR and "non-finite" in outcome.reason and outcome.steps == 0


def test_frames_are_rendered_only_when_asked() -> None:
    plain, rendering = KinetixEnvironment(), KinetixEnvironment(render_images=True)
    try:
        assert "images" not in plain.reset(task("l/car_launch"))
        frame = rendering.reset(task("l/car_launch"))["images"]["scene"]
        assert frame.shape == (125, 125, 3) and frame.dtype == np.uint8
        assert (frame[-5:] != frame[0, 0]).any(axis=-1).all()  # the floor fills the bottom rows: upright
        assert rendering.video_frame((64, 48)).shape == (48, 64, 3)
        np.testing.assert_array_equal(plain.video_frame(None), frame)
    finally:
        plain.close()
        rendering.close()


def test_environment_conformance() -> None:
    tasks = [task("l/grasp_easy"), task("s/h8_unicycle_balance")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConformanceWarning)  # it would mean a rule about ended episodes went unchecked
        check_environment(BENCH.make_env, tasks, steps=30)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """`kinetix` is a registered benchmark (an entry point, where hylo does not list it itself)."""
    if "kinetix" in registered_benchmarks():
        return
    plugin = EntryPoint("kinetix", "hylo.envs.kinetix:KinetixBenchmark", ENTRY_POINT_GROUP)
    monkeypatch.setattr(core_registry, "entry_points", lambda *, group: [plugin] if group == ENTRY_POINT_GROUP else [])
    BENCHMARK_REGISTRY.refresh()
    request.addfinalizer(BENCHMARK_REGISTRY.refresh)


@pytest.mark.usefixtures("registered")
def test_an_evaluation_runs_an_episode_to_the_levels_goal(tmp_path: Path) -> None:
    result = hylo.evaluate(
        "kinetix", split="s", tasks=["s/h8_unicycle_balance"], agent="hold", episodes=1, log_dir=str(tmp_path)
    )
    (row,) = result.episodes
    assert (row.status, row.success) == (EpisodeStatus.SUCCESS, True) and 0 < row.steps < MAX_EPISODE_STEPS
    assert result.summary.success_rate == 1.0
