"""`gym:<id>` runs real gymnasium environments: episodes end when the env says so, seeds reproduce them, malformed
or non-finite actions are the agent's fault, a diverged MuJoCo simulation is the infrastructure's, and a third-party
`module:Env-v0` id works through the benchmark like a built-in one."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from hylo.agents.basic import RandomAgent
from hylo.conformance import check_environment
from hylo.core import (
    AgentBase,
    Environment,
    EpisodeOutcome,
    EpisodeStatus,
    HyloError,
    InvalidAction,
    Kernel,
    Observation,
    SafetyShield,
    TaskInstance,
)
from hylo.envs.benchmark import UnknownChoice
from hylo.envs.gym_adapter import GymBenchmark, GymEnvironment
from hylo.envs.mujoco_watch import find_mjdata
from hylo.envs.registry import get_benchmark

PLUGIN_MODULE = "gym_plugin_env"
PLUGIN_ID = f"{PLUGIN_MODULE}:PluginEnv-v0"


class Policy(AgentBase):
    """Acts by a function of the observation and keeps every observation it was shown."""

    def __init__(self, policy: Callable[[Observation], Any]) -> None:
        self.policy = policy
        self.seen: list[Observation] = []

    def act(self, obs: Observation) -> Any:
        self.seen.append(obs)
        return self.policy(obs)


class RecordingRandom(RandomAgent):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Observation] = []

    def act(self, obs: Observation) -> Any:
        self.seen.append(obs)
        return super().act(obs)


def run(env: Environment, agent: Any, task: TaskInstance, **kernel: Any) -> EpisodeOutcome:
    with Kernel(env, agent, **kernel) as runner:
        return runner.run(task)


def obs_keys(env: Environment) -> list[str]:
    space = env.spec.observation_space
    assert isinstance(space, gymnasium.spaces.Dict)
    return list(space.spaces)


def task_of(env_id: str, index: int = 0) -> TaskInstance:
    return TaskInstance(f"gym:{env_id}", env_id, index)


@pytest.fixture
def quiet_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run in an empty directory, so that a MUJOCO_LOG.TXT written there would be seen."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> str:
    """The plugin module is importable but not imported, and its env not registered: only the id can bring it in."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.delitem(sys.modules, PLUGIN_MODULE, raising=False)
    monkeypatch.delitem(gymnasium.registry, "PluginEnv-v0", raising=False)
    return PLUGIN_ID


# -- classic control ---------------------------------------------------------------------------------------------


def test_cartpole_random_agent_episodes_end_when_the_pole_falls() -> None:
    bench = get_benchmark("gym:CartPole-v1")
    assert isinstance(bench, GymBenchmark)
    assert (bench.name, bench.display_name, bench.splits(), bench.tasks("default")) == (
        "gym:CartPole-v1",
        "CartPole-v1",
        ["default"],
        ["CartPole-v1"],
    )
    assert bench.default_step_budget("CartPole-v1") == 500
    assert bench.available() == (True, "")
    with bench.make_env() as env:
        assert env.spec.max_episode_steps == 500 and env.spec.control_rate_hz == 50
        assert env.spec.action_space == gymnasium.spaces.Discrete(2)
        assert obs_keys(env) == ["state"]
        outcomes = [run(env, RandomAgent(), bench.task_instance("default", "CartPole-v1", i)) for i in range(20)]
        # a random policy drops the pole long before the 500-step limit
        assert {(o.status, o.reason) for o in outcomes} == {(EpisodeStatus.FAILURE, "terminated")}
        assert all(0 < o.steps < 100 for o in outcomes)
        assert len({o.steps for o in outcomes}) > 3  # the seeds make different episodes

        cart, _, angle, _ = env.observe().state  # the terminal observation: the pole (or the cart) is past its limit
        limits = env.gym_env.unwrapped
        assert abs(angle) > limits.theta_threshold_radians or abs(cart) > limits.x_threshold  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match="ended"):
            env.step(0)
        env.reset(task_of("CartPole-v1"))
        env.step(0)  # a reset revives it


def test_same_seed_same_episode_and_reset_is_idempotent() -> None:
    def episode(env: GymEnvironment, task: TaskInstance) -> tuple[EpisodeOutcome, list[Any]]:
        agent = RecordingRandom()
        outcome = run(env, agent, task)
        return outcome, [obs.state for obs in agent.seen]

    task = task_of("CartPole-v1", 3)
    with GymEnvironment("CartPole-v1") as env, GymEnvironment("CartPole-v1") as fresh:
        first, seen = episode(env, task)
        episode(env, task_of("CartPole-v1", 4))  # another episode in between changes nothing
        again, seen_again = episode(env, task)
        other, seen_fresh = episode(fresh, task)
        assert (first.status, first.steps, first.metrics) == (again.status, again.steps, again.metrics)
        assert (first.status, first.steps, first.metrics) == (other.status, other.steps, other.metrics)
        np.testing.assert_array_equal(seen, seen_again)
        np.testing.assert_array_equal(seen, seen_fresh)

        start = env.reset(task)
        env.step(1)
        np.testing.assert_array_equal(env.reset(task).state, start.state)
        np.testing.assert_array_equal(env.reset(task).state, start.state)
        assert not np.array_equal(env.reset(task_of("CartPole-v1", 4)).state, start.state)


def test_cartpole_passes_the_conformance_suite() -> None:
    check_environment(lambda: GymEnvironment("CartPole-v1"))


def test_out_of_bounds_box_action_is_clipped_by_the_shield_not_refused() -> None:
    with GymEnvironment("Pendulum-v1") as env:
        assert env.capabilities.hold_action and env.hold_action().tolist() == [0.0]
        outcome = run(env, Policy(lambda obs: np.array([5.0])), task_of("Pendulum-v1"), max_steps=5)
        assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 5)
        assert outcome.safety_interventions == 5  # each action was clipped to the torque limit

        env.reset(task_of("Pendulum-v1"))
        env.step(np.array([5.0]))  # the env itself leaves bounds to the shield


def test_make_kwargs_reach_gymnasium_make() -> None:
    with GymEnvironment("Pendulum-v1", make_kwargs={"max_episode_steps": 7, "g": 0.0}) as env:
        assert env.spec.max_episode_steps == 7
        assert env.gym_env.unwrapped.g == 0.0  # type: ignore[attr-defined]
        outcome = run(env, Policy(lambda obs: env.hold_action()), task_of("Pendulum-v1"), max_steps=100)
        assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "truncated", 7)


def test_rendered_frames_match_the_declared_image_space() -> None:
    with GymEnvironment("CartPole-v1", render_images=True) as env:
        images = env.spec.observation_space["images"]  # type: ignore[index]
        space = images["render"]
        obs = env.reset(task_of("CartPole-v1"))
        frame = obs.images["render"]
        assert frame.dtype == np.uint8 and frame.shape == space.shape and frame.shape[2] == 3
        assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 1  # a drawing, not a blank
        assert env.step(1).obs["images"]["render"].shape == space.shape
    with GymEnvironment("CartPole-v1") as env:
        assert "images" not in env.reset(task_of("CartPole-v1"))


@pytest.mark.parametrize(
    ("env_id", "action", "shield"),
    [
        ("Pendulum-v1", np.zeros(3), None),  # the default shield refuses the shape
        ("Pendulum-v1", np.zeros(3), SafetyShield.permissive()),  # with no guard, the env does
        ("Pendulum-v1", "push", SafetyShield.permissive()),
        ("CartPole-v1", np.array([0, 1]), SafetyShield.permissive()),
        ("CartPole-v1", 7, SafetyShield.permissive()),  # no nearest choice to clip to: not a crash of the env
    ],
)
def test_malformed_action_is_the_agents_error(env_id: str, action: Any, shield: SafetyShield | None) -> None:
    with GymEnvironment(env_id) as env:
        outcome = run(env, Policy(lambda obs: action), task_of(env_id), shield=shield)
        assert outcome.status is EpisodeStatus.ERROR, outcome.reason
        assert "malformed" in outcome.reason or "rejected" in outcome.reason


def test_invalid_action_message_names_the_action_and_the_space() -> None:
    with GymEnvironment("Pendulum-v1") as env:
        env.reset(task_of("Pendulum-v1"))
        with pytest.raises(
            InvalidAction, match=r"\[0\. 0\. 0\.\].*Box\(-2\.0, 2\.0, \(1,\).*shape \(3,\) is not \(1,\)"
        ):
            env.step(np.zeros(3))
        env.step(np.array([1], np.int64))  # another number type is cast, not refused
    with GymEnvironment("CartPole-v1") as env:
        env.reset(task_of("CartPole-v1"))
        with pytest.raises(InvalidAction, match=r"0\.5 .*Discrete\(2\).*one integer"):
            env.step(0.5)
        with pytest.raises(InvalidAction, match=r"True .*Discrete\(2\)"):
            env.step(True)
        env.step(np.int64(1))


# -- third-party ids and Dict observations -----------------------------------------------------------------------


def test_module_id_is_imported_by_gymnasium_and_runs_through_the_benchmark(plugin: str) -> None:
    bench = get_benchmark(f"gym:{plugin}")
    assert PLUGIN_MODULE in sys.modules  # naming the id was enough to register the env
    assert bench.tasks("default") == [plugin]
    assert bench.default_step_budget(plugin) == 30  # the registered max_episode_steps

    def expert(obs: Observation) -> int:
        goal = int(str(obs.instruction).split()[-1])
        return 1 + int(np.sign(goal - obs["position"][0]))

    agent = Policy(expert)
    with bench.make_env() as env:
        assert set(obs_keys(env)) == {"position", "mission", "instruction"}
        assert isinstance(env.spec.action_space, gymnasium.spaces.Discrete)
        assert not env.capabilities.hold_action
        with pytest.raises(HyloError, match="no hold action"):
            env.hold_action()
        outcomes = [run(env, agent, bench.task_instance("default", plugin, i)) for i in range(5)]
        assert {(o.status, o.reason) for o in outcomes} == {(EpisodeStatus.SUCCESS, "success")}
        first = agent.seen[0]
        assert first.instruction == first["mission"] and str(first.instruction).startswith("reach cell ")
        assert first.state is None  # a Dict observation keeps its own keys

        stay = run(env, Policy(lambda obs: 1), bench.task_instance("default", plugin, 0))
        assert (stay.status, stay.reason, stay.steps) == (EpisodeStatus.FAILURE, "truncated", 30)


def test_info_is_kept_small_and_success_read_from_it(plugin: str) -> None:
    with GymEnvironment(plugin) as env:
        obs = env.reset(task_of(plugin))
        goal, pos = int(str(obs.instruction).split()[-1]), int(obs["position"][0])
        toward = 2 if goal > pos else 0
        results = [env.step(toward) for _ in range(abs(goal - pos))]
        assert [r.success for r in results] == [False] * (len(results) - 1) + [True]
        assert results[-1].terminated
        assert results[0].info == {"is_success": False, "distance": abs(goal - pos) - 1}  # the 100-long array is gone


def test_unknown_ids_are_refused_with_the_id_named(plugin: str) -> None:
    with pytest.raises(UnknownChoice, match=r"unknown gymnasium environment 'CartPol-v1'.*CartPole-v1") as refused:
        get_benchmark("gym:CartPol-v1")
    assert "CartPole-v1" in refused.value.choices
    assert refused.value.choices[-1] == "<module>:<id>"  # how to name an env another package registers
    with pytest.raises(UnknownChoice, match="NoSuchEnv-v3"):
        GymEnvironment("NoSuchEnv-v3")
    with pytest.raises(UnknownChoice, match="gym_plugin_env:Missing-v0"):
        GymBenchmark(f"{PLUGIN_MODULE}:Missing-v0")
    with pytest.raises(HyloError, match=r"'no_such_module_xyz:Env-v0'.*no_such_module_xyz"):
        GymBenchmark("no_such_module_xyz:Env-v0")


def test_env_with_a_missing_dependency_is_unavailable_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = gymnasium.envs.registration.EnvSpec("HyloMissingDep-v0", entry_point="no_such_module_xyz:Env")
    monkeypatch.setitem(gymnasium.registry, spec.id, spec)
    bench = GymBenchmark(spec.id)
    ok, why = bench.available()
    assert not ok and "no_such_module_xyz" in why
    with pytest.raises(HyloError, match="could not make 'HyloMissingDep-v0'"):
        bench.make_env()


# -- MuJoCo ------------------------------------------------------------------------------------------------------


class BlowUp(AgentBase):
    """Holds still, then corrupts the simulator's velocities before the `at`-th step (as a diverging model would)."""

    def __init__(self, env: GymEnvironment, at: int) -> None:
        self.env, self.at, self.calls = env, at, 0

    def act(self, obs: Observation) -> Any:
        self.calls += 1
        if self.calls == self.at:
            data = find_mjdata(self.env.gym_env)
            assert data is not None
            data.qvel[:] = 1e30
        return self.env.hold_action()


def test_mujoco_divergence_is_infra_invalid(quiet_cwd: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with GymEnvironment("Ant-v5") as env:
        assert env.spec.control_rate_hz == 20 and env.spec.max_episode_steps == 1000
        outcome = run(env, BlowUp(env, at=3), task_of("Ant-v5"))
        assert outcome.status is EpisodeStatus.INFRA_INVALID
        assert "BADQVEL" in outcome.reason and outcome.steps == 2
        with pytest.raises(RuntimeError):  # the diverged episode is over
            env.step(env.hold_action())
        healthy = run(env, BlowUp(env, at=0), task_of("Ant-v5"), max_steps=5)  # a reset makes it usable again
        assert (healthy.status, healthy.steps) == (EpisodeStatus.FAILURE, 5)
    assert capfd.readouterr().out == ""


@pytest.mark.filterwarnings("ignore:.*reward is a NaN")  # gymnasium's env checker, on the unguarded NaN step
def test_non_finite_action_on_mujoco(quiet_cwd: Path, capfd: pytest.CaptureFixture[str]) -> None:
    nan = Policy(lambda obs: np.full(6, np.nan, np.float32))
    with GymEnvironment("HalfCheetah-v5") as env:
        env.reset(task_of("HalfCheetah-v5"))
        info = env.step(env.hold_action()).info
        assert json.loads(json.dumps(info)) == info and "x_position" in info  # numpy scalars became plain numbers
        unguarded = run(env, nan, task_of("HalfCheetah-v5"), shield=SafetyShield.permissive())
        assert unguarded.status is EpisodeStatus.ERROR  # MuJoCo's BADCTRL: the agent's fault, not the simulator's
        assert "BADCTRL" in unguarded.reason and unguarded.steps == 0
        guarded = run(env, nan, task_of("HalfCheetah-v5"))
        assert guarded.status is EpisodeStatus.SAFETY_ABORT and guarded.reason.startswith("finite")
        assert guarded.steps == 0
    assert capfd.readouterr().out == ""
