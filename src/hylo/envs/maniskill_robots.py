"""What ManiSkill3's robots take: the Panda's control modes and what their actions' numbers mean (for the benchmark
and its expert, which acts in joint positions)."""

from __future__ import annotations

from hylo.core.conventions import ActionConvention

ACTION_CONVENTIONS: dict[str, ActionConvention] = {
    "pd_joint_delta_pos": ActionConvention(
        control="joint_delta", rotation="none", gripper="open_positive", frame="joint", units="normalized",
        labels=(*(f"dq{i}" for i in range(1, 8)), "gripper"), low=(-1.0,) * 8, high=(1.0,) * 8,
    ),
    "pd_joint_pos": ActionConvention(
        control="joint_position", rotation="none", gripper="open_positive", frame="joint", units="radians",
        labels=(*(f"q{i}" for i in range(1, 8)), "gripper"),
    ),
    "pd_ee_delta_pos": ActionConvention(
        control="ee_delta", rotation="none", gripper="open_positive", frame="base", units="normalized",
        labels=("dx", "dy", "dz", "gripper"), low=(-1.0,) * 4, high=(1.0,) * 4,
    ),
    "pd_ee_delta_pose": ActionConvention(
        control="ee_delta", rotation="euler_xyz", gripper="open_positive", frame="base", units="normalized",
        labels=("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"), low=(-1.0,) * 7, high=(1.0,) * 7,
    ),
}  # fmt: skip
"""The Panda's control modes (`mani_skill.agents.robots.panda`): joint deltas of up to 0.1 rad per step (the
default), absolute joint targets, or end-effector deltas of up to 0.1 m and 0.1 rad per step (XYZ Euler angles) in
the robot's base frame; every mode ends with the gripper's target, normalised: -1 closed (-0.01 m per finger) to +1
open (0.04 m)."""
PANDAS = ("Panda", "PandaWristCam")
"""The robots (ManiSkill's agent classes) that take these actions: the Panda, with or without its wrist camera
(`PandaStick` has no gripper: its tasks declare no convention)."""
