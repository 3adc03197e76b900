"""Feature names and action conventions: resolved and compared as a bind-time check sees them."""

from __future__ import annotations

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core.agent import AgentBase, AgentRequirements, check_compatible
from hylo.core.conventions import ActionConvention, ConventionError, compare_conventions
from hylo.core.errors import IncompatibleComponents
from hylo.core.features import resolve_features
from hylo.core.types import EnvSpec
from hylo.envs.libero import ACTION_CONVENTION as LIBERO_ACTIONS
from hylo.envs.metaworld import FEATURE_NAMES as METAWORLD_FEATURES

OBS = spaces.Dict({
    "images": spaces.Dict({"corner": spaces.Box(0, 255, (64, 48, 3), np.uint8),
                           "wrist": spaces.Box(0, 255, (32, 32, 3), np.uint8)}),
    "state": spaces.Box(-np.inf, np.inf, (39,), np.float64),
    "instruction": spaces.Text(256),
})  # fmt: skip


def test_a_slice_and_a_camera_wildcard_resolve_to_named_features_and_read_them():
    found = resolve_features(OBS, (("images/wrist", "observation.images.hand"), ("images/*", "observation.images.*"),
                                   ("state[0:4]", "observation.state"), ("instruction", "task")))  # fmt: skip
    assert found["observation.images.hand"].path == "images/wrist"
    assert found["observation.images.corner"].shape == (64, 48, 3)
    assert "observation.images.wrist" in found  # the wildcard names it too: first declaration per name wins
    assert found["observation.state"].shape == (4,)
    obs = {"state": np.arange(39.0), "images": {}, "instruction": "reach"}
    assert found["observation.state"].read(obs).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert found["task"].read(obs) == "reach"


def test_metaworld_declares_lerobots_four_float_agent_pos_and_one_camera():
    found = resolve_features(OBS, METAWORLD_FEATURES)
    assert found["observation.state"].shape == (4,)
    assert found["observation.image"].path == "images/corner"


class Reader(AgentBase):
    def __init__(self, features: tuple[tuple[str, tuple[int, ...]], ...], convention: ActionConvention | None) -> None:
        self.requirements = AgentRequirements(features=features, action_convention=convention)

    def act(self, obs: object) -> int:
        return 0


def _spec(convention: ActionConvention | None) -> EnvSpec:
    return EnvSpec(OBS, spaces.Box(-1, 1, (7,)), name="arm", feature_names=(("images/*", "observation.images.*"),
                   ("state", "observation.state")), action_convention=convention)  # fmt: skip


def test_a_missing_camera_and_a_wrong_image_size_are_refused_naming_both_sides():
    agent = Reader((("observation.images.top", (3, 64, 48)), ("observation.images.wrist", (3, 64, 64))), None)
    with pytest.raises(IncompatibleComponents) as refused:
        check_compatible(_spec(None), agent)
    text = str(refused.value)
    assert "needs observation.images.top 3x64x48; env 'arm' gives" in text
    assert "observation.images.corner = images/corner (image 64x48x3)" in text
    assert "needs observation.images.wrist of shape 3x64x64; env 'arm' gives images/wrist (image 32x32x3)" in text


def test_matching_features_bind():
    check_compatible(
        _spec(None), Reader((("observation.images.corner", (3, 64, 48)), ("observation.state", (39,))), None)
    )


def test_a_different_gripper_sign_refuses_and_an_unknown_side_only_warns():
    flipped = ActionConvention.parse("ee_delta/axis_angle/open_positive")
    check = compare_conventions("policy", "libero", flipped, LIBERO_ACTIONS)
    assert (
        check.problems[0] == "action gripper: agent 'policy' acts in open_positive, env 'libero' takes close_positive"
    )
    assert "ee_delta/axis_angle/close_positive" in check.problems[-1]
    with pytest.raises(IncompatibleComponents, match="open_positive"):
        check_compatible(_spec(LIBERO_ACTIONS), Reader((), flipped))
    unknown = compare_conventions("policy", "libero", None, LIBERO_ACTIONS)
    assert not unknown.problems and unknown.warnings
    partial = compare_conventions(
        "policy", "libero", ActionConvention.parse("ee_delta/?/close_positive"), LIBERO_ACTIONS
    )
    assert not partial.problems and any("rotation unknown for agent" in w for w in partial.warnings)


def test_a_bad_convention_names_the_value():
    with pytest.raises(ConventionError, match="rotation 'quat' is not one of"):
        ActionConvention.parse("ee_delta/quat/close_positive")
    with pytest.raises(ConventionError, match="fields \\['sign'\\] unknown"):
        ActionConvention.parse({"control": "ee_delta", "sign": 1})
    assert ActionConvention.parse(LIBERO_ACTIONS.to_json()) == LIBERO_ACTIONS
