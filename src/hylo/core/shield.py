"""The SafetyShield: every action passes its guards before it reaches the environment.

A guard either approves an action (possibly modified, with a reason) or rejects it by raising `SafetyAbort`.
In real-robot mode any modification is a rejection: on hardware, an action that needed clipping means the policy
is off its distribution, and nothing should move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, NamedTuple, Protocol, runtime_checkable

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.errors import IncompatibleComponents, InvalidAction, SafetyAbort
from hylo.core.types import Action


class GuardMode(StrEnum):
    CLIP = "clip"
    REJECT = "reject"


class ShieldReview(NamedTuple):
    """The shield's verdict on an approved action: the action to execute, and why it differs from the proposal."""

    action: Action
    modified: bool
    reasons: tuple[str, ...] = ()


@runtime_checkable
class Guard(Protocol):
    """One safety check. `check` returns the (possibly modified) action and a reason when it modified it, or
    raises SafetyAbort to reject. `bind` refuses, at bind time, an action space the guard cannot apply to."""

    name: str

    def bind(self, space: spaces.Space[Any]) -> None: ...

    def check(self, action: Action, space: spaces.Space[Any]) -> tuple[Action, str | None]: ...


def _as_float_array(action: Action, guard: str) -> np.ndarray[Any, Any]:
    try:
        return np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidAction(f"{guard}: action is not numeric: {action!r}") from exc


class FiniteGuard:
    """Rejects actions holding NaN or infinity (anywhere in a Dict / Tuple action)."""

    name = "finite"

    def bind(self, space: spaces.Space[Any]) -> None:
        return None

    def check(self, action: Action, space: spaces.Space[Any]) -> tuple[Action, str | None]:
        if isinstance(space, spaces.Dict) and isinstance(action, dict):
            for key, sub in space.spaces.items():
                if key in action:
                    self.check(action[key], sub)
            return action, None
        if isinstance(space, spaces.Tuple) and isinstance(action, (tuple, list)):
            for sub_action, sub in zip(action, space.spaces, strict=False):
                self.check(sub_action, sub)
            return action, None
        if isinstance(action, (int, np.integer)):
            return action, None
        if isinstance(action, float):
            if not math.isfinite(action):
                raise SafetyAbort(self.name, f"non-finite action {action!r}")
            return action, None
        array = _as_float_array(action, self.name)
        if not np.isfinite(array).all():
            bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
            raise SafetyAbort(self.name, f"{bad} non-finite value(s) in action {np.array2string(array, precision=3)}")
        return action, None


class BoundsGuard:
    """Keeps actions inside the action space: a Box action out of bounds is clipped (a traced modification) or,
    in `reject` mode, rejected; a discrete action outside its space is always rejected (there is no nearest
    valid choice). An action of the wrong form (shape, type, keys) is not unsafe but malformed: `InvalidAction`,
    which the Kernel counts as the agent's error."""

    name = "bounds"

    def __init__(self, mode: GuardMode | str = GuardMode.CLIP) -> None:
        try:
            self.mode = GuardMode(mode)
        except ValueError:
            raise ValueError(f"unknown bounds mode {mode!r}; choose one of {[m.value for m in GuardMode]}") from None

    def bind(self, space: spaces.Space[Any]) -> None:
        return None

    def check(self, action: Action, space: spaces.Space[Any]) -> tuple[Action, str | None]:
        if isinstance(space, spaces.Box):
            return self._check_box(action, space)
        if isinstance(space, spaces.Discrete):
            return self._check_discrete(action, space), None
        if isinstance(space, spaces.Dict):
            return self._check_dict(action, space)
        if not space.contains(action):
            raise SafetyAbort(self.name, f"action {action!r} outside {space}")
        return action, None

    def _check_box(self, action: Action, space: spaces.Box) -> tuple[Action, str | None]:
        array = _as_float_array(action, self.name)
        if array.shape != space.shape:
            raise InvalidAction(f"action shape {array.shape} does not match the space's {space.shape}")
        low, high = space.low, space.high
        if ((array >= low) & (array <= high)).all():
            return (action if isinstance(action, np.ndarray) else array.astype(space.dtype)), None
        if self.mode is GuardMode.REJECT or np.isnan(array).any():
            raise SafetyAbort(self.name, f"action {np.array2string(array, precision=3)} outside {space}")
        clipped = np.clip(array, low, high).astype(space.dtype)
        worst = float(np.max(np.maximum(array - high, low - array)))
        return clipped, f"bounds: clipped to the action space (largest excess {worst:.4g})"

    def _check_discrete(self, action: Action, space: spaces.Discrete[Any]) -> Action:
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
                action = int(action)
            else:
                raise InvalidAction(f"action {action!r} is not an integer for {space}")
        start = int(space.start)
        if not start <= action < start + int(space.n):
            raise SafetyAbort(self.name, f"action {action} outside {space}")
        return action

    def _check_dict(self, action: Action, space: spaces.Dict) -> tuple[Action, str | None]:
        if not isinstance(action, dict) or set(action) != set(space.spaces):
            keys = sorted(action) if isinstance(action, dict) else action
            raise InvalidAction(f"action keys {keys!r} do not match {sorted(space.spaces)}")
        out: dict[str, Any] = {}
        reasons: list[str] = []
        for key, sub in space.spaces.items():
            out[key], reason = self.check(action[key], sub)
            if reason:
                reasons.append(f"{key}: {reason}")
        return out, "; ".join(reasons) or None


class RotationRepr(StrEnum):
    AXIS_ANGLE = "axis_angle"
    EULER = "euler"
    QUATERNION = "quaternion"


class RotationGuard:
    """Bounds the rotation an action carries at `start:start+size` of a 1-D Box action.

    - `axis_angle`: the rotation angle (the vector's norm) must not exceed `max_angle`; clip scales it down
    - `euler`: each angle must lie in [-max_angle, max_angle]; clip clamps each
    - `quaternion`: the quaternion must be unit within `tolerance`; clip normalises it
    """

    name = "rotation"

    def __init__(
        self,
        start: int,
        representation: RotationRepr | str = RotationRepr.AXIS_ANGLE,
        max_angle: float = math.pi,
        mode: GuardMode | str = GuardMode.REJECT,
        tolerance: float = 1e-3,
    ) -> None:
        try:
            self.representation = RotationRepr(representation)
        except ValueError:
            choices = [r.value for r in RotationRepr]
            raise ValueError(f"unknown rotation representation {representation!r}; choose one of {choices}") from None
        self.mode = GuardMode(mode)
        if start < 0:
            raise ValueError(f"rotation start index must be >= 0, got {start}")
        if not max_angle > 0:
            raise ValueError(f"max_angle must be > 0, got {max_angle}")
        self.start = start
        self.size = 4 if self.representation is RotationRepr.QUATERNION else 3
        self.max_angle = float(max_angle)
        self.tolerance = float(tolerance)

    def bind(self, space: spaces.Space[Any]) -> None:
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise IncompatibleComponents(f"rotation guard needs a 1-D Box action space, got {space}")
        if self.start + self.size > space.shape[0]:
            raise IncompatibleComponents(
                f"rotation guard reads indices {self.start}..{self.start + self.size - 1} but the action has "
                f"{space.shape[0]} dimensions"
            )

    def check(self, action: Action, space: spaces.Space[Any]) -> tuple[Action, str | None]:
        array = _as_float_array(action, self.name)
        rot = array[self.start : self.start + self.size]
        if not np.isfinite(rot).all():
            raise SafetyAbort(self.name, f"non-finite rotation {np.array2string(rot, precision=3)}")
        if self.representation is RotationRepr.AXIS_ANGLE:
            angle = float(np.linalg.norm(rot))
            if angle <= self.max_angle:
                return action, None
            problem = f"rotation angle {angle:.4g} rad exceeds {self.max_angle:.4g}"
            fixed = rot * (self.max_angle / angle)
        elif self.representation is RotationRepr.EULER:
            if (np.abs(rot) <= self.max_angle).all():
                return action, None
            problem = f"euler angles {np.array2string(rot, precision=3)} exceed ±{self.max_angle:.4g} rad"
            fixed = np.clip(rot, -self.max_angle, self.max_angle)
        else:
            norm = float(np.linalg.norm(rot))
            if abs(norm - 1.0) <= self.tolerance:
                return action, None
            problem = f"quaternion norm {norm:.4g} is not 1"
            if norm == 0.0:
                raise SafetyAbort(self.name, problem)
            fixed = rot / norm
        if self.mode is GuardMode.REJECT:
            raise SafetyAbort(self.name, problem)
        out = array.copy()
        out[self.start : self.start + self.size] = fixed
        return out.astype(getattr(space, "dtype", np.float64)), f"rotation: {problem}; corrected"


class SafetyShield:
    """An ordered stack of guards; `review` runs them in turn.

    `SafetyShield()` is the default shield (non-finite -> reject, out of bounds -> clip). `real_robot=True` turns every
    modification into a rejection.
    """

    def __init__(self, guards: Sequence[Guard] | None = None, *, real_robot: bool = False) -> None:
        self.guards: tuple[Guard, ...] = (FiniteGuard(), BoundsGuard()) if guards is None else tuple(guards)
        for guard in self.guards:
            if not isinstance(guard, Guard):
                raise TypeError(f"{guard!r} is not a guard: it needs `name`, `bind` and `check`")
        self.real_robot = real_robot
        self._space: spaces.Space[Any] | None = None
        self._fast: _FastBox | None = None

    @classmethod
    def permissive(cls) -> SafetyShield:
        """A shield with no guards (`--no-shield`): every action is approved unchanged."""
        return cls(())

    @property
    def guard_names(self) -> list[str]:
        return [g.name for g in self.guards]

    def bind(self, action_space: spaces.Space[Any]) -> None:
        problems: list[str] = []
        for guard in self.guards:
            try:
                guard.bind(action_space)
            except IncompatibleComponents as exc:
                problems.extend(exc.problems)
        if problems:
            raise IncompatibleComponents(problems)
        self._space = action_space
        self._fast = _FastBox.build(self.guards, action_space)

    def review(self, action: Action, space: spaces.Space[Any] | None = None) -> ShieldReview:
        """Approve `action` (possibly modified) or raise SafetyAbort."""
        fast = self._fast
        if (
            fast is not None
            and (space is None or space is self._space)
            and type(action) is np.ndarray
            and action.shape == fast.shape
            and action.dtype.kind in "fiu"
            and fast.inside(action.tolist())
        ):
            return ShieldReview(action, False)
        space = space if space is not None else self._space
        if space is None:
            raise RuntimeError("SafetyShield.review needs an action space: bind the shield or pass one")
        reasons: list[str] | None = None
        for guard in self.guards:
            action, reason = guard.check(action, space)
            if reason is not None:
                if self.real_robot:
                    raise SafetyAbort(guard.name, f"real-robot mode forbids modifying actions ({reason})")
                if reasons is None:
                    reasons = []
                reasons.append(reason)
        if reasons is None:
            return ShieldReview(action, False)
        return ShieldReview(action, True, tuple(reasons))


class _FastBox:
    """Fast acceptance for the common case: only finite/bounds guards on a Box with finite bounds.

    An action inside finite bounds is finite and needs no clipping, so one pass of scalar comparisons approves it
    (NaN fails every comparison); anything else falls through to the guards, which decide and explain.
    """

    __slots__ = ("high", "low", "shape", "uniform")

    def __init__(self, shape: tuple[int, ...], low: np.ndarray[Any, Any], high: np.ndarray[Any, Any]) -> None:
        self.shape = shape
        self.uniform = bool((low == low.flat[0]).all() and (high == high.flat[0]).all())
        self.low: Any = float(low.flat[0]) if self.uniform else low.ravel().tolist()
        self.high: Any = float(high.flat[0]) if self.uniform else high.ravel().tolist()

    @classmethod
    def build(cls, guards: tuple[Guard, ...], space: spaces.Space[Any]) -> _FastBox | None:
        if not all(type(g) in (FiniteGuard, BoundsGuard) for g in guards) or not isinstance(space, spaces.Box):
            return None
        if space.dtype is None or space.dtype.kind != "f" or len(space.shape) != 1 or space.shape[0] > 64:
            return None
        if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            return None
        return cls(space.shape, space.low, space.high)

    def inside(self, values: list[Any]) -> bool:
        if self.uniform:
            lo, hi = self.low, self.high
            for x in values:  # noqa: SIM110 (a plain loop is twice as fast as all() on the hot path)
                if not lo <= x <= hi:
                    return False
            return True
        for lo, x, hi in zip(self.low, values, self.high, strict=True):  # noqa: SIM110
            if not lo <= x <= hi:
                return False
        return True
