"""The SafetyShield and its guards: every action is reviewed before it reaches the environment."""

from __future__ import annotations

import math
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    BoundsGuard,
    Environment,
    EnvSpec,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    FiniteGuard,
    IncompatibleComponents,
    InvalidAction,
    Kernel,
    MemoryRecorder,
    Observation,
    RotationGuard,
    SafetyAbort,
    SafetyShield,
    StepResult,
    TaskInstance,
)
from hylo.envs import GridGoal

TASK = TaskInstance(benchmark="test", task="shield")
BOX3 = spaces.Box(-1.0, 1.0, (3,), np.float32)
NAN = float("nan")
INF = float("inf")


class RecordingEnv(Environment):
    """Records every action it receives; never ends on its own."""

    def __init__(self, action_space: spaces.Space[Any]) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"t": spaces.Box(0, np.inf, (), np.float64)}),
            action_space=action_space,
            control_rate_hz=10.0,
            max_episode_steps=10,
            name="recording",
        )
        self.resets = 0
        self.actions: list[Any] = []

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    def reset(self, task: TaskInstance) -> Observation:
        self.resets += 1
        self.actions = []
        return self.observe()

    def step(self, action: Any) -> StepResult:
        self.actions.append(action)
        return StepResult(self.observe())

    def observe(self) -> Observation:
        return Observation(t=len(self.actions))


class ListAgent:
    """Plays the given actions, one per act; repeats the last one when they run out."""

    def __init__(self, actions: list[Any]) -> None:
        self.actions = actions
        self.k = 0

    def act(self, obs: Observation) -> ActionChunk:
        action = self.actions[min(self.k, len(self.actions) - 1)]
        self.k += 1
        return ActionChunk([action])


def run(
    env: Environment, actions: list[Any], shield: SafetyShield | None = None, max_steps: int = 3
) -> tuple[EpisodeOutcome, MemoryRecorder]:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    outcome = Kernel(env, ListAgent(actions), shield=shield, max_steps=max_steps, bus=bus).run(TASK)
    return outcome, recorder


# -- FiniteGuard -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action",
    [[NAN, 0.0, 0.0], [0.0, INF, 0.0], [0.0, 0.0, -INF], np.array([0.0, NAN, 0.0], np.float32)],
    ids=["nan", "inf", "-inf", "array-nan"],
)
def test_finite_guard_rejects_non_finite(action: Any) -> None:
    with pytest.raises(SafetyAbort) as info:
        FiniteGuard().check(action, BOX3)
    assert info.value.guard == "finite"
    with pytest.raises(SafetyAbort, match="finite"):
        SafetyShield().review(action, BOX3)


@pytest.mark.parametrize("action", [NAN, INF], ids=["nan", "inf"])
def test_finite_guard_rejects_a_scalar_float(action: float) -> None:
    with pytest.raises(SafetyAbort):
        FiniteGuard().check(action, spaces.Box(-1.0, 1.0, (), np.float32))


def test_finite_guard_passes_finite_actions_unchanged() -> None:
    action = np.array([0.5, -0.5, 0.0], np.float32)
    out, reason = FiniteGuard().check(action, BOX3)
    assert out is action
    assert reason is None
    assert FiniteGuard().check(3, spaces.Discrete(4)) == (3, None)


def test_finite_guard_checks_inside_dict_actions() -> None:
    space = spaces.Dict({"arm": BOX3, "gripper": spaces.Discrete(2)})
    with pytest.raises(SafetyAbort):
        FiniteGuard().check({"arm": np.array([0.0, NAN, 0.0]), "gripper": 1}, space)


def test_default_shield_reports_nan_as_finite_not_bounds() -> None:
    # NaN is also "out of bounds"; the default shield must call it what it is.
    with pytest.raises(SafetyAbort) as info:
        SafetyShield().review(np.array([5.0, NAN, 0.0]), BOX3)
    assert info.value.guard == "finite"


# -- BoundsGuard -------------------------------------------------------------------------------------------------------


def test_bounds_guard_clips_with_a_reason() -> None:
    review = SafetyShield([BoundsGuard()]).review(np.array([2.0, -3.0, 0.5]), BOX3)
    assert review.modified is True
    np.testing.assert_allclose(review.action, [1.0, -1.0, 0.5])
    assert BOX3.contains(np.asarray(review.action, np.float32))
    assert len(review.reasons) == 1
    assert "bounds" in review.reasons[0]
    assert "clip" in review.reasons[0]


def test_bounds_guard_clips_infinity_into_the_space() -> None:
    review = SafetyShield([BoundsGuard()]).review(np.array([INF, -INF, 0.0]), BOX3)
    np.testing.assert_allclose(review.action, [1.0, -1.0, 0.0])


def test_bounds_guard_approves_in_bounds_unmodified() -> None:
    review = SafetyShield().review([1.0, -1.0, 0.0], BOX3)
    assert review.modified is False
    assert review.reasons == ()
    np.testing.assert_allclose(review.action, [1.0, -1.0, 0.0])


def test_bounds_guard_reject_mode() -> None:
    shield = SafetyShield([FiniteGuard(), BoundsGuard("reject")])
    with pytest.raises(SafetyAbort) as info:
        shield.review(np.array([1.5, 0.0, 0.0]), BOX3)
    assert info.value.guard == "bounds"
    assert shield.review(np.array([1.0, 0.0, 0.0]), BOX3).modified is False


def test_bounds_guard_clip_never_approves_a_nan_action() -> None:
    # NaN cannot be clipped into the space: even without a FiniteGuard in front, the bounds guard must not pass it on
    # as an approved ("clipped") action.
    with pytest.raises(SafetyAbort):
        SafetyShield([BoundsGuard()]).review(np.array([NAN, 0.0, 0.0]), BOX3)


def test_a_wrong_shape_is_malformed_not_unsafe() -> None:
    with pytest.raises(InvalidAction, match="shape"):
        SafetyShield().review(np.zeros(4), BOX3)


def test_bounds_guard_unknown_mode() -> None:
    with pytest.raises(ValueError, match="sideways"):
        BoundsGuard("sideways")


@pytest.mark.parametrize("action", [4, -1, 100])
def test_discrete_out_of_range_is_rejected_even_in_clip_mode(action: Any) -> None:
    with pytest.raises(SafetyAbort) as info:
        SafetyShield([BoundsGuard("clip")]).review(action, spaces.Discrete(4))
    assert info.value.guard == "bounds"


@pytest.mark.parametrize("action", [1.5, True, "1"])
def test_a_non_integer_discrete_action_is_malformed(action: Any) -> None:
    with pytest.raises(InvalidAction, match="not an integer"):
        SafetyShield([BoundsGuard("clip")]).review(action, spaces.Discrete(4))


@pytest.mark.parametrize("action", [0, 3, np.int64(2), np.array(1)])
def test_discrete_in_range_is_approved(action: Any) -> None:
    review = SafetyShield().review(action, spaces.Discrete(4))
    assert review.modified is False
    assert int(review.action) == int(action)


def test_discrete_with_start() -> None:
    space = spaces.Discrete(3, start=1)
    assert SafetyShield().review(3, space).modified is False
    with pytest.raises(SafetyAbort):
        SafetyShield().review(0, space)


def test_discrete_out_of_range_in_the_kernel_is_safety_abort() -> None:
    env = GridGoal()
    outcome, recorder = run(env, [1, 7])
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    assert outcome.steps == 1
    assert recorder.of("safety.review")[-1].guard == "bounds"


def test_a_refused_step_closes_with_the_scope_it_opened_with() -> None:
    outcome, recorder = run(GridGoal(), [1, 7])
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    steps = [(e.signal, e.scope_id) for e in recorder.of("signal") if e.signal in ("step_start", "step_end")]
    assert steps == [("step_start", "step:0"), ("step_end", "step:0"), ("step_start", "step:1"), ("step_end", "step:1")]


# -- Dict action spaces ------------------------------------------------------------------------------------------------

DICT = spaces.Dict({"arm": BOX3, "gripper": spaces.Discrete(2)})


def test_dict_action_clips_the_out_of_bounds_part() -> None:
    review = SafetyShield().review({"arm": np.array([0.0, 2.0, 0.0]), "gripper": 1}, DICT)
    assert review.modified is True
    np.testing.assert_allclose(review.action["arm"], [0.0, 1.0, 0.0])
    assert review.action["gripper"] == 1
    assert any("arm" in reason for reason in review.reasons)


def test_dict_action_in_bounds_is_unmodified() -> None:
    review = SafetyShield().review({"arm": np.zeros(3, np.float32), "gripper": 0}, DICT)
    assert review.modified is False


@pytest.mark.parametrize(
    "action",
    [{"arm": np.zeros(3), "gripper": 2}, {"arm": np.array([NAN, 0.0, 0.0]), "gripper": 0}],
    ids=["discrete-out-of-range", "nan"],
)
def test_unsafe_dict_action_rejected(action: Any) -> None:
    with pytest.raises(SafetyAbort):
        SafetyShield().review(action, DICT)


@pytest.mark.parametrize(
    "action",
    [{"arm": np.zeros(3)}, {"arm": np.zeros(3), "gripper": 0, "base": 1}, np.zeros(3)],
    ids=["missing-key", "extra-key", "not-a-dict"],
)
def test_malformed_dict_action_rejected(action: Any) -> None:
    with pytest.raises(InvalidAction, match="keys"):
        SafetyShield().review(action, DICT)


def test_dict_action_clip_in_the_kernel() -> None:
    env = RecordingEnv(DICT)
    outcome, recorder = run(env, [{"arm": np.array([3.0, 0.0, 0.0], np.float32), "gripper": 1}], max_steps=2)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 2)
    assert outcome.safety_interventions == 2
    for action in env.actions:
        np.testing.assert_allclose(action["arm"], [1.0, 0.0, 0.0])
        assert action["gripper"] == 1
    assert all(r.modified for r in recorder.of("safety.review"))


# -- RotationGuard -----------------------------------------------------------------------------------------------------

BOX7 = spaces.Box(-10.0, 10.0, (7,), np.float32)


def _pose(rotation: list[float]) -> np.ndarray:
    """A 7-D action: position 0.1, 0.2, 0.3, then the rotation (3 or 4 numbers), then gripper 0.5 if room is left."""
    gripper = [0.5] if len(rotation) == 3 else []
    return np.array([0.1, 0.2, 0.3, *rotation, *gripper])


def test_rotation_axis_angle_within_bound_is_unchanged() -> None:
    guard = RotationGuard(start=3, representation="axis_angle", max_angle=1.0, mode="clip")
    action = _pose([0.5, 0.5, 0.0])
    out, reason = guard.check(action, BOX7)
    assert reason is None
    np.testing.assert_array_equal(out, action)


def test_rotation_axis_angle_clip_scales_the_angle_down() -> None:
    guard = RotationGuard(start=3, representation="axis_angle", max_angle=1.0, mode="clip")
    review = SafetyShield([guard]).review(_pose([0.0, 2.0, 0.0]), BOX7)
    assert review.modified is True
    out = np.asarray(review.action)
    np.testing.assert_allclose(out[3:6], [0.0, 1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(out[[0, 1, 2, 6]], [0.1, 0.2, 0.3, 0.5], atol=1e-6)  # the rest is untouched
    assert "rotation" in review.reasons[0]


def test_rotation_axis_angle_reject() -> None:
    guard = RotationGuard(start=3, representation="axis_angle", max_angle=1.0, mode="reject")
    with pytest.raises(SafetyAbort) as info:
        SafetyShield([guard]).review(_pose([0.0, 2.0, 0.0]), BOX7)
    assert info.value.guard == "rotation"


def test_rotation_guard_rejects_by_default() -> None:
    with pytest.raises(SafetyAbort):
        RotationGuard(start=0, max_angle=1.0).check(np.array([2.0, 0.0, 0.0]), spaces.Box(-5, 5, (3,)))


def test_rotation_euler_clip_clamps_each_angle() -> None:
    guard = RotationGuard(start=3, representation="euler", max_angle=1.0, mode="clip")
    review = SafetyShield([guard]).review(_pose([0.5, -2.0, 3.0]), BOX7)
    assert review.modified is True
    out = np.asarray(review.action)
    np.testing.assert_allclose(out[3:6], [0.5, -1.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(out[[0, 1, 2, 6]], [0.1, 0.2, 0.3, 0.5], atol=1e-6)


def test_rotation_euler_within_bound_and_reject() -> None:
    guard = RotationGuard(start=3, representation="euler", max_angle=1.0, mode="reject")
    assert SafetyShield([guard]).review(_pose([0.9, -0.9, 0.0]), BOX7).modified is False
    with pytest.raises(SafetyAbort) as info:
        SafetyShield([guard]).review(_pose([0.0, 0.0, -1.5]), BOX7)
    assert info.value.guard == "rotation"


def test_rotation_quaternion_clip_normalises() -> None:
    guard = RotationGuard(start=3, representation="quaternion", mode="clip")
    review = SafetyShield([guard]).review(_pose([0.0, 0.0, 0.0, 2.0]), BOX7)
    assert review.modified is True
    out = np.asarray(review.action)
    np.testing.assert_allclose(out[3:7], [0.0, 0.0, 0.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(out[:3], [0.1, 0.2, 0.3], atol=1e-6)
    assert math.isclose(float(np.linalg.norm(out[3:7])), 1.0, rel_tol=1e-5)


def test_rotation_quaternion_unit_is_unchanged_and_reject_mode() -> None:
    unit = _pose([0.5, 0.5, 0.5, 0.5])
    guard = RotationGuard(start=3, representation="quaternion", mode="reject")
    assert SafetyShield([guard]).review(unit, BOX7).modified is False
    with pytest.raises(SafetyAbort):
        SafetyShield([guard]).review(_pose([0.0, 0.0, 0.0, 2.0]), BOX7)


def test_rotation_zero_quaternion_is_rejected_even_in_clip_mode() -> None:
    guard = RotationGuard(start=3, representation="quaternion", mode="clip")
    with pytest.raises(SafetyAbort):
        SafetyShield([guard]).review(_pose([0.0, 0.0, 0.0, 0.0]), BOX7)


@pytest.mark.parametrize(
    ("guard", "space", "names"),
    [
        (RotationGuard(start=3, representation="quaternion"), spaces.Box(-1, 1, (6,)), ("3..6", "6")),
        (RotationGuard(start=0, representation="axis_angle"), spaces.Box(-1, 1, (2,)), ("0..2", "2")),
        (RotationGuard(start=5, representation="euler"), spaces.Box(-1, 1, (7,)), ("5..7", "7")),
    ],
    ids=["quaternion", "axis_angle", "euler"],
)
def test_rotation_bind_refuses_too_short_action_spaces(
    guard: RotationGuard, space: spaces.Box, names: tuple[str, ...]
) -> None:
    with pytest.raises(IncompatibleComponents) as info:
        SafetyShield([guard]).bind(space)
    for name in names:
        assert name in str(info.value)


def test_rotation_bind_refuses_non_box_spaces() -> None:
    with pytest.raises(IncompatibleComponents, match="Box"):
        SafetyShield([RotationGuard(start=0)]).bind(spaces.Discrete(4))


def test_rotation_bind_accepts_an_exact_fit() -> None:
    SafetyShield([RotationGuard(start=3, representation="quaternion")]).bind(BOX7)


def test_rotation_guard_too_short_via_kernel_constructor() -> None:
    env = RecordingEnv(spaces.Box(-1.0, 1.0, (4,), np.float32))
    shield = SafetyShield([FiniteGuard(), BoundsGuard(), RotationGuard(start=3, representation="euler")])
    with pytest.raises(IncompatibleComponents, match="rotation"):
        Kernel(env, ListAgent([np.zeros(4, np.float32)]), shield=shield)
    assert env.resets == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"start": 0, "representation": "matrix"}, {"start": -1}, {"start": 0, "max_angle": 0.0}],
    ids=["representation", "start", "max_angle"],
)
def test_rotation_guard_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RotationGuard(**kwargs)


def test_rotation_reject_in_the_kernel_is_safety_abort() -> None:
    env = RecordingEnv(BOX7)
    shield = SafetyShield([FiniteGuard(), BoundsGuard(), RotationGuard(start=3, max_angle=1.0)])
    outcome, recorder = run(env, [_pose([0.1, 0.0, 0.0]), _pose([2.0, 0.0, 0.0])], shield=shield)
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    assert outcome.steps == 1
    assert "rotation" in outcome.reason
    assert len(env.actions) == 1
    last = recorder.of("safety.review")[-1]
    assert (last.approved, last.guard) == (False, "rotation")


# -- real-robot mode ---------------------------------------------------------------------------------------------------


def test_real_robot_turns_a_clip_into_an_abort() -> None:
    shield = SafetyShield(real_robot=True)
    assert shield.review(np.array([0.5, 0.0, 0.0]), BOX3).modified is False
    with pytest.raises(SafetyAbort, match="real-robot") as info:
        shield.review(np.array([1.5, 0.0, 0.0]), BOX3)
    assert info.value.guard == "bounds"


def test_real_robot_rotation_clip_is_an_abort() -> None:
    guard = RotationGuard(start=3, representation="quaternion", mode="clip")
    with pytest.raises(SafetyAbort, match="real-robot"):
        SafetyShield([guard], real_robot=True).review(_pose([0.0, 0.0, 0.0, 2.0]), BOX7)


def test_real_robot_clip_in_the_kernel_is_safety_abort() -> None:
    env = RecordingEnv(BOX3)
    far = np.array([0.0, 0.0, 2.0], np.float32)
    outcome, recorder = run(env, [np.zeros(3, np.float32), far], shield=SafetyShield(real_robot=True))
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    assert outcome.success is False
    assert outcome.steps == 1
    assert len(env.actions) == 1, "nothing moves once a clip was needed"
    reviews = recorder.of("safety.review")
    assert [r.approved for r in reviews] == [True, False]
    assert reviews[-1].modified is False


# -- permissive --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action",
    [np.array([NAN, 0.0, 0.0]), np.array([9.0, 0.0, 0.0]), "anything", None],
    ids=["nan", "oob", "str", "none"],
)
def test_permissive_approves_anything_unchanged(action: Any) -> None:
    shield = SafetyShield.permissive()
    assert shield.guard_names == []
    review = shield.review(action, BOX3)
    assert review.modified is False
    assert review.action is action


def test_permissive_in_the_kernel_lets_actions_through() -> None:
    env = RecordingEnv(BOX3)
    bad = np.array([NAN, 5.0, 0.0], np.float32)
    outcome, recorder = run(env, [bad], shield=SafetyShield.permissive(), max_steps=2)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 2)
    assert outcome.safety_interventions == 0
    assert len(env.actions) == 2
    assert np.isnan(env.actions[0][0]) and env.actions[0][1] == 5.0
    assert [r.approved for r in recorder.of("safety.review")] == [True, True]
    (start,) = recorder.of("episode.start")
    assert start.guards == []


# -- custom guards and the trace ---------------------------------------------------------------------------------------


class SlowZoneGuard:
    """A user guard: rejects any first coordinate above 0.5."""

    name = "slow_zone"

    def bind(self, space: spaces.Space[Any]) -> None:
        return None

    def check(self, action: Any, space: spaces.Space[Any]) -> tuple[Any, str | None]:
        if float(np.asarray(action)[0]) > 0.5:
            raise SafetyAbort(self.name, "too fast near the human")
        return action, None


def test_custom_guard_rejection_is_safety_abort() -> None:
    env = RecordingEnv(BOX3)
    shield = SafetyShield([FiniteGuard(), BoundsGuard(), SlowZoneGuard()])
    outcome, recorder = run(env, [np.array([0.9, 0.0, 0.0], np.float32)], shield=shield)
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    assert "slow_zone" in outcome.reason
    assert "too fast near the human" in outcome.reason
    assert env.actions == []
    assert recorder.of("safety.review")[-1].guard == "slow_zone"


def test_shield_refuses_a_non_guard() -> None:
    with pytest.raises(TypeError):
        SafetyShield([object()])  # type: ignore[list-item]


def test_every_review_is_a_safety_review_event() -> None:
    env = RecordingEnv(BOX3)
    ok = np.zeros(3, np.float32)
    far = np.array([2.0, 0.0, 0.0], np.float32)
    bad = np.array([NAN, 0.0, 0.0], np.float32)
    outcome, recorder = run(env, [ok, ok, far, ok, bad], max_steps=10)
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    assert outcome.steps == 4
    reviews = recorder.of("safety.review")
    assert [(r.approved, r.modified) for r in reviews] == [
        (True, False),
        (True, False),
        (True, True),
        (True, False),
        (False, False),
    ]
    assert reviews[2].reasons and "bounds" in reviews[2].reasons[0]
    assert reviews[4].guard == "finite"
    # each approved review is followed by the action it approved (the clipped one when it was modified)
    kinds = [k for k in recorder.kinds() if k in ("safety.review", "action")]
    assert kinds == ["safety.review", "action"] * 4 + ["safety.review"]
    np.testing.assert_allclose(recorder.of("action")[2].action, [1.0, 0.0, 0.0])
