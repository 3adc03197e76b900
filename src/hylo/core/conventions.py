"""Action conventions: what an action's numbers mean, declared by envs and agents and compared before any step.

A policy trained on end-effector deltas with an axis-angle rotation and a gripper that closes on +1 acts nonsense in
an env that takes joint positions, Euler angles or a gripper that opens on +1 — and it fails quietly, as a low success
rate. An env declares its `ActionConvention` (`EnvSpec.action_convention`); an agent may declare its own
(`AgentRequirements.action_convention`, a LeRobot checkpoint through `-A action_convention=...`). At bind time a
different control mode, rotation format or gripper convention refuses the run with both declarations; a field one
side leaves unknown, or a different frame or unit, is a warning kept in the run's record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from hylo.core.errors import HyloError, shown

Control = Literal[
    "ee_delta", "ee_absolute", "joint_delta", "joint_position", "joint_velocity", "planar_position", "discrete"
]
Rotation = Literal["none", "axis_angle", "euler_xyz", "quaternion_xyzw", "quaternion_wxyz", "rotation_6d"]
Gripper = Literal["none", "close_positive", "open_positive"]

CONTROLS: tuple[str, ...] = Control.__args__  # type: ignore[attr-defined]
ROTATIONS: tuple[str, ...] = Rotation.__args__  # type: ignore[attr-defined]
GRIPPERS: tuple[str, ...] = Gripper.__args__  # type: ignore[attr-defined]

REFUSING = ("control", "rotation", "gripper")
"""The fields whose mismatch refuses a run (the others warn)."""


class ConventionError(HyloError):
    """An action convention that cannot be read (an unknown control mode, rotation or gripper value)."""


@dataclass(frozen=True, slots=True)
class ActionConvention:
    """What each number of an action means. None: not declared (unknown).

    - `control`: `ee_delta` (end-effector displacement per step), `ee_absolute`, `joint_delta`, `joint_position`
      (absolute joint targets), `joint_velocity`, `planar_position` (a point on a plane, PushT), `discrete`
    - `rotation`: how the rotation part is written (`none`: the action has no rotation)
    - `gripper`: `close_positive` (a larger value closes: robosuite's -1 open / +1 close), `open_positive` (a larger
      value opens: ALOHA's 0 closed / 1 open), `none`
    - `frame`: the frame of a Cartesian action (`base`, `world`, `end_effector`); `units`: `normalized` (scaled to
      the bounds), `meters`, `radians`, `pixels`
    - `labels`, `low`, `high`: each dimension's name and bounds
    """

    control: Control | None = None
    rotation: Rotation | None = None
    gripper: Gripper | None = None
    frame: str | None = None
    units: str | None = None
    labels: tuple[str, ...] = ()
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name, allowed in (("control", CONTROLS), ("rotation", ROTATIONS), ("gripper", GRIPPERS)):
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise ConventionError(f"action convention {name} {shown(value, 40)} is not one of {', '.join(allowed)}")

    @classmethod
    def parse(cls, value: Any) -> ActionConvention:
        """From `control/rotation/gripper` (`ee_delta/axis_angle/close_positive`; `-` or `?` for unknown) or a
        mapping of the fields."""
        if isinstance(value, ActionConvention):
            return value
        if isinstance(value, str):
            parts = [part.strip() for part in value.split("/")]
            if len(parts) > 3:
                raise ConventionError(
                    f"action convention {shown(value, 80)}: write control/rotation/gripper, e.g. "
                    "ee_delta/axis_angle/close_positive"
                )
            named = dict(zip(REFUSING, parts, strict=False))
            return cls(**{k: None if v in ("", "-", "?") else v for k, v in named.items()})  # type: ignore[arg-type]
        if isinstance(value, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ConventionError(f"action convention fields {unknown} unknown (known: {', '.join(sorted(known))})")
            data: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
            return cls(**data)
        raise ConventionError(f"an action convention is a string or a mapping, got {shown(value, 80)}")

    def to_json(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    def summary(self) -> str:
        """`ee_delta/axis_angle/close_positive` (`?` for an unknown field)."""
        return "/".join(getattr(self, name) or "?" for name in REFUSING)


@dataclass(frozen=True, slots=True)
class ConventionCheck:
    """The comparison of an agent's convention with an env's: `problems` refuse the run, `warnings` are recorded."""

    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def compare_conventions(
    agent: str, env: str, wanted: ActionConvention | None, given: ActionConvention | None
) -> ConventionCheck:
    """Compare `agent`'s declared convention with `env`'s (see the module's docstring)."""
    if wanted is None or given is None:
        return _undeclared(agent, env, wanted, given)
    problems: list[str] = []
    warnings: list[str] = []
    for name in ("control", "rotation", "gripper", "frame", "units"):
        finding = _field_finding(name, agent, env, getattr(wanted, name), getattr(given, name))
        if finding is not None:
            refuses, text = finding
            (problems if refuses else warnings).append(text)
    problems += _dimension_problems(agent, env, wanted.labels, given.labels)
    if problems:
        both = f"(agent {agent!r}: {wanted.summary()}; env {env!r}: {given.summary()})"
        problems.append(f"the action conventions declared {both}")
    return ConventionCheck(tuple(problems), tuple(warnings))


def _undeclared(
    agent: str, env: str, wanted: ActionConvention | None, given: ActionConvention | None
) -> ConventionCheck:
    """The check when a side declares no convention: nothing when neither does, else a warning naming that side."""
    if wanted is None and given is None:
        return ConventionCheck()
    side = "agent " + repr(agent) if wanted is None else "env " + repr(env)
    return ConventionCheck(warnings=(f"action convention unknown for {side}: actions are not checked",))


def _field_finding(name: str, agent: str, env: str, a: str | None, e: str | None) -> tuple[bool, str] | None:
    """How the agent's and the env's values of field `name` differ: (whether that refuses the run, the message), or
    None when they agree."""
    if a is None or e is None:
        return None if a == e else (False, f"action {name} unknown for {'agent' if a is None else 'env'}: not checked")
    if a == e:
        return None
    return name in REFUSING, f"action {name}: agent {agent!r} acts in {a}, env {env!r} takes {e}"


def _dimension_problems(agent: str, env: str, wanted: tuple[str, ...], given: tuple[str, ...]) -> list[str]:
    """A refusal when both sides label their action's dimensions and their counts differ."""
    if not (wanted and given and len(wanted) != len(given)):
        return []
    return [
        f"agent {agent!r} acts in {len(wanted)} dimensions ({', '.join(wanted)}); env {env!r} "
        f"takes {len(given)} ({', '.join(given)})"
    ]
