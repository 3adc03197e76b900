"""A privileged scripted expert for robomimic's Lift, Can and Square, built on LIBERO's expert's pieces.

It reads, every step, the gripper's site pose and finger opening and the task object's pose and collision box from
the robosuite env behind `ctx.privileged("simulator")`, and acts with the same saturated proportional OSC_POSE deltas
as `LiberoExpert` (`_saturate`, `_axis_angle`, its gains and closing rule), pointing the gripper straight down with
the yaw the grasp needs (turning the wrist the way that keeps it clear of its limits):

- reach: over the grasp point, the fingers turned to straddle it, then down a cone onto it (as LIBERO's expert);
  close;
- carry: lift, move the object's reference point over the target while turning it to the target's yaw, lower it;
- release, then back away upwards. A grasp that lifts nothing, or an object that slips out on the way, sends it
  back to reach, at most `MAX_ATTEMPTS` times.

Lift grasps the cube across a pair of faces and lifts it; Can grasps the can near its top and lowers it into its bin
compartment; Square grasps the square nut by its handle and lowers it over the square peg, its sides turned parallel
to the peg's.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation
from hylo.envs.libero import ACTION_CONVENTION
from hylo.envs.libero_expert import (
    CLOSE,
    CLOSE_MAX_STEPS,
    CLOSE_MIN_STEPS,
    OPEN,
    POS_GAIN,
    POS_SCALE,
    REACH_SLOPE,
    ROT_GAIN,
    ROT_SCALE,
    STALL_DIST,
    Phase,
    Vec,
    _axis_angle,
    _saturate,
    _Scene,
)

DOWN = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
"""The gripper site's orientation pointing straight down with its fingers closing along world y (Panda's home)."""
HOVER = 0.08
"""Metres above the grasp point at which the gripper lines up before it descends."""
ALIGN_XY, ALIGN_Z, ALIGN_YAW = 0.006, 0.02, 0.06
"""How close (metres sideways, metres up, radians of yaw) the hover pose must be before the descent."""
SETTLED = 0.002
"""Metres the gripper may have moved in the last step for the hover pose to count as reached (not swung through)."""
GRASP_TOL = 0.006
"""Metres from the grasp point at which the gripper closes."""
LIFTED = 0.01
"""Metres the object must have risen once the gripper has risen LIFT_CHECK metres: else the grasp missed."""
LIFT_CHECK = 0.04
LIFT_HEIGHT = 0.15
"""Metres a lift (Lift's whole task) raises the gripper; robosuite counts the cube lifted 4 cm over the table."""
SLIP = 0.03
"""Metres the object may drift from where it was held before the carry counts it as dropped."""
RELEASE_STEPS = 6
"""Steps the gripper stays still while it opens."""
BACK_OFF = 0.1
"""Metres the open gripper rises after a release."""
MAX_ATTEMPTS = 3
YAW_MIDDLE = math.pi / 4.0
"""The gripper yaw at which the Panda's last joint is mid-range (0 rad; at the arm's home pose, pi/4 rad, the yaw is
0). The hand turns to yaws near it, the short way round it, so that the wrist stays clear of its limits (±2.9 rad)."""
MAX_TURN = 1.0
"""Radians of yaw the hand is asked to turn by at most at once (so that it turns the way it is told, never the
other way round)."""


def _rot_z(angle: float) -> Vec:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _wrap(angle: float, period: float) -> float:
    """`angle` shifted by whole periods into [-period / 2, period / 2)."""
    return (angle + period / 2.0) % period - period / 2.0


def _gripper_yaw(rot: Vec) -> float:
    """The yaw of a gripper pointing down (0 when its fingers close along world y, as `DOWN`), within half a turn of
    `YAW_MIDDLE`."""
    closing = rot[:, 0]
    return _middle(math.atan2(-float(closing[0]), float(closing[1])))


def _middle(yaw: float, period: float = 2.0 * math.pi) -> float:
    """`yaw` shifted by whole periods to within half a period of `YAW_MIDDLE`."""
    return YAW_MIDDLE + _wrap(yaw - YAW_MIDDLE, period)


@dataclass(frozen=True, slots=True)
class _Fixture:
    """A fixed body of the scene (a peg, a bin) named as `_Scene` reads an object: by its root body."""

    root_body: str


@dataclass(frozen=True, slots=True)
class _Inner:
    """A robosuite env as LIBERO's scene reader (`_Scene`) reads the env inside a LIBERO env: the simulator, the
    robot, and the task's object and fixtures by name (robosuite names them in its own attributes, LIBERO's envs in
    these dictionaries)."""

    sim: Any
    robots: Any
    objects_dict: dict[str, Any]
    fixtures_dict: dict[str, Any]
    obj_body_id: dict[str, int]


def _scene(env: Any, obj: Any, fixtures: tuple[str, ...]) -> _Scene:
    """LIBERO's scene reader over robosuite's `env`, with its object `obj` (a robosuite `MujocoObject`, named by
    `obj.name`) and the fixed bodies `fixtures`."""
    model = env.sim.model
    named = {name: _Fixture(name) for name in fixtures}
    bodies = {obj.name: model.body_name2id(obj.root_body)} | {name: model.body_name2id(name) for name in fixtures}
    return _Scene(_Inner(env.sim, env.robots, {obj.name: obj}, named, bodies))


@dataclass(frozen=True, slots=True)
class Grasp:
    """Where the gripper site closes, and the yaw its fingers close at."""

    point: Vec
    yaw: float


@dataclass(frozen=True, slots=True)
class Place:
    """Where the held object's reference point goes: above `xy` at `carry_z` on the way, down to `release_z`; the
    object is turned to `yaw` on the way (None: the hand keeps its grasp's yaw); `tolerance` is how close sideways it
    must be over the target before it descends."""

    xy: Vec
    carry_z: float
    release_z: float
    yaw: float | None
    tolerance: float


class _Task(abc.ABC):
    """One task's geometry: the object, its grasp, and where it goes (None: lifting it is the task)."""

    FIXTURES: tuple[str, ...] = ()

    def __init__(self, env: Any) -> None:
        self.env = env
        obj = self.task_object()
        self.obj: str = obj.name
        self.scene = _scene(env, obj, self.FIXTURES)
        self.floor = float(self.scene.box(self.obj)[0][2])  # what the object stands on at the start

    @abc.abstractmethod
    def task_object(self) -> Any:
        """robosuite's `MujocoObject` the task is about."""

    def reference(self) -> Vec:
        """The point of the object that `place` positions (its body origin)."""
        return self.scene.body_pos(self.obj)

    def object_yaw(self) -> float:
        """The yaw of the object's x axis about world z."""
        rot = np.asarray(self.scene.sim.data.body_xmat[self.scene.inner.obj_body_id[self.obj]]).reshape(3, 3)
        return math.atan2(float(rot[1, 0]), float(rot[0, 0]))

    def below(self) -> float:
        """Metres from the object's bottom up to its reference point."""
        return float(self.reference()[2] - self.scene.box(self.obj)[0][2])

    @abc.abstractmethod
    def grasp(self) -> Grasp:
        """Where and at what yaw the fingers close on the object."""

    def place(self) -> Place | None:
        return None


class _Lift(_Task):
    """Across the pair of the cube's faces nearest the gripper's yaw, at its middle; lifted."""

    def task_object(self) -> Any:
        return self.env.cube

    def grasp(self) -> Grasp:
        low, high = self.scene.box(self.obj)
        return Grasp((low + high) / 2.0, _wrap(self.object_yaw(), math.pi / 2.0))


class _Can(_Task):
    """Around the can, 3 cm under its top (the palm stays above it); into the compartment its marker is in."""

    FIXTURES = ("bin2",)
    GRASP_BELOW_TOP = 0.03
    CLEARANCE = 0.05  # the can's bottom over the bins' walls
    DROP = 0.025  # the can's bottom over the compartment's floor (as high as the one it stood on) when let go
    MARGIN = 0.015  # metres between the can and its compartment's walls when it is let go

    def task_object(self) -> Any:
        return self.env.objects[self.env.object_id]

    def grasp(self) -> Grasp:
        low, high = self.scene.box(self.obj)
        point = (low + high) / 2.0
        point[2] = max(point[2], high[2] - self.GRASP_BELOW_TOP)
        return Grasp(point, 0.0)

    def place(self) -> Place:
        target = np.asarray(self.env.target_bin_placements[self.env.object_id], dtype=np.float64)
        walls = float(self.scene.box(self.FIXTURES[0])[1][2])
        below = self.below()
        low, high = self.scene.box(self.obj)
        # Anywhere its compartment (a quarter of the bin) holds it with a margin: the compartment's far corner is at
        # the edge of the arm's reach.
        room = float(np.min(np.asarray(self.env.bin_size[:2]) / 4.0 - (high[:2] - low[:2]) / 2.0)) - self.MARGIN
        return Place(target[:2], walls + self.CLEARANCE + below, self.floor + self.DROP + below, None, room)


class _Square(_Task):
    """By the nut's handle, across it; its centre lowered over the square peg, its sides parallel to the peg's."""

    FIXTURES = ("peg1",)
    CLEARANCE = 0.03  # the nut's bottom over the peg's top
    RELEASE_HEIGHT = 0.015  # the nut's bottom over the table when it is let go: around the peg, low on it
    TOLERANCE = 0.004  # metres (sideways) from the peg's axis at which the nut's centre descends
    GRASP_OUT = 0.008  # metres past the handle's site, away from the ring: the fingers clear the ring's corners
    GRASP_UP = 0.004  # metres above the handle's middle: the fingertips (1.1 cm below the site) clear the table

    def task_object(self) -> Any:
        return self.env.nuts[self.env.nut_id]

    def grasp(self) -> Grasp:
        handle = np.array(self.scene.sim.data.get_site_xpos(self.task_object().important_sites["handle"]))
        yaw = self.object_yaw()
        point = handle + np.array([self.GRASP_OUT * math.cos(yaw), self.GRASP_OUT * math.sin(yaw), self.GRASP_UP])
        return Grasp(point, _middle(yaw, math.pi))  # across the handle, either way round

    def place(self) -> Place:
        peg = self.FIXTURES[0]
        carry = float(self.scene.box(peg)[1][2]) + self.CLEARANCE + self.below()
        release = self.floor + self.RELEASE_HEIGHT + self.below()
        held = self.object_yaw() - _gripper_yaw(self.scene.eef()[1])  # the nut's yaw in the hand
        # Its sides parallel to the peg's (a multiple of a quarter turn), its handle (where the hand is) not on the
        # peg's far side, at the edge of the arm's reach; of those, the one that leaves the wrist the most room.
        quarter = math.pi / 2.0
        yaw = min((k * quarter for k in (1, 2, 3)), key=lambda turn: abs(_wrap(turn - held - YAW_MIDDLE, 2 * math.pi)))
        return Place(self.scene.body_pos(peg)[:2], carry, release, yaw, self.TOLERANCE)


TASKS: dict[str, type[_Task]] = {"Lift": _Lift, "PickPlaceCan": _Can, "NutAssemblySquare": _Square}
"""robosuite's env class → the task's geometry."""


class RobomimicExpert(AgentBase):
    """A scripted expert for robomimic's Lift, Can and Square (see the module), reading the simulator through
    `ctx.privileged`. In any other robosuite env `act` holds still with the gripper open."""

    name = "expert"
    requirements = AgentRequirements(
        action_space=spaces.Box(-1.0, 1.0, (7,)),
        needs_images=False,
        privileged_state=True,
        action_convention=ACTION_CONVENTION,
    )

    class Args(AgentArgs):
        pass

    def __init__(self) -> None:
        self._task: _Task | None = None
        self._phase = Phase.IDLE
        self.steps = 0
        self.attempts = 0
        self.phase_starts: list[tuple[str, int]] = []
        """(phase, step it began at) for the episode so far: where the steps went."""

    @property
    def phase(self) -> Phase:
        return self._phase

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self._task = None
        self._phase = Phase.IDLE
        self.steps = 0
        self.attempts = 0
        self.phase_starts = []
        self._hold_at: Vec | None = None
        self._hold_yaw = 0.0
        env = ctx.privileged("simulator")
        kind = TASKS.get(type(env).__name__)
        if kind is None:
            return
        self._task = kind(env)
        self._begin_reach()

    def act(self, obs: Observation) -> ActionChunk:
        acting = self._phase
        action = self._act()
        if not self.phase_starts or self.phase_starts[-1][0] != acting.value:
            self.phase_starts.append((acting.value, self.steps + 1))
        self.steps += 1
        return ActionChunk.single(np.clip(action, -1.0, 1.0).astype(np.float32))

    # Phases.

    def _begin_reach(self) -> None:
        self.attempts += 1
        self._phase = Phase.REACH if self.attempts <= MAX_ATTEMPTS else Phase.DONE
        self._stage = 0
        self._phase_steps = 0
        self._last_pos: Vec | None = None
        self._moved = np.inf
        self._still = 0

    def _enter(self, phase: Phase) -> None:
        self._phase, self._stage, self._phase_steps, self._still = phase, 0, 0, 0

    def _act(self) -> Vec:
        task = self._task
        if task is None or self._phase is Phase.IDLE:
            return np.array([*np.zeros(6), OPEN])
        scene = task.scene
        pos, rot = scene.eef()
        self._phase_steps += 1
        moved = np.inf if self._last_pos is None else float(np.linalg.norm(pos - self._last_pos))
        self._moved, self._last_pos = moved, pos
        self._still = self._still + 1 if moved < STALL_DIST else 0
        if self._phase is Phase.REACH:
            return self._reach(task, pos, rot)
        if self._phase is Phase.CLOSE:
            return self._close(task, pos, rot)
        if self._phase is Phase.CARRY:
            return self._carry(task, pos, rot)
        if self._phase is Phase.RELEASE:
            return self._release(pos, rot)
        # DONE: hold, open, above where it let go (or where it gave up)
        if self._hold_at is None:
            self._hold_at, self._hold_yaw = pos + np.array([0.0, 0.0, BACK_OFF]), _gripper_yaw(rot)
        return self._command(pos, rot, self._hold_at, self._hold_yaw, OPEN)

    def _command(self, pos: Vec, rot: Vec, goal: Vec, yaw: float, gripper: float) -> Vec:
        action = np.zeros(7)
        action[:3] = _saturate(goal - pos, POS_GAIN, POS_SCALE)
        current = _gripper_yaw(rot)
        aim = current + float(np.clip(_middle(yaw) - current, -MAX_TURN, MAX_TURN))
        action[3:6] = _saturate(_axis_angle(_rot_z(aim) @ DOWN @ rot.T), ROT_GAIN, ROT_SCALE)
        action[6] = gripper
        return action

    def _reach(self, task: _Task, pos: Vec, rot: Vec) -> Vec:
        grasp = task.grasp()
        yaw_error = abs(_wrap(_gripper_yaw(rot) - grasp.yaw, 2.0 * math.pi))
        if self._stage == 0:  # line up over the grasp point, the fingers turned to straddle it
            above = grasp.point + np.array([0.0, 0.0, HOVER])
            error = above - pos
            aligned = float(np.linalg.norm(error[:2])) < ALIGN_XY and abs(error[2]) < ALIGN_Z and yaw_error < ALIGN_YAW
            if aligned and self._moved < SETTLED:
                self._stage = 1
            return self._command(pos, rot, above, grasp.yaw, OPEN)
        error = grasp.point - pos
        # Down a cone over the grasp point: the farther off sideways, the higher (as LIBERO's expert reaches).
        aim = grasp.point + np.array([0.0, 0.0, REACH_SLOPE * float(np.linalg.norm(error[:2]))])
        if float(np.linalg.norm(error)) < GRASP_TOL or (self._still >= 2 and abs(error[2]) < 0.015):
            self._grasp = grasp
            self._enter(Phase.CLOSE)
            self._last_opening = -1.0
        return self._command(pos, rot, aim, grasp.yaw, OPEN)

    def _close(self, task: _Task, pos: Vec, rot: Vec) -> Vec:
        opening = task.scene.opening()
        still = abs(opening - self._last_opening) < 2e-4
        self._last_opening = opening
        if self._phase_steps >= CLOSE_MAX_STEPS or (self._phase_steps >= CLOSE_MIN_STEPS and still):
            self._enter(Phase.CARRY)
            self._lift_from = (pos.copy(), task.reference().copy())
            self._held = rot.T @ (task.reference() - pos)  # where the object is in the hand (the hand's axes)
        return self._command(pos, rot, self._grasp.point, self._grasp.yaw, CLOSE)

    def _carry(self, task: _Task, pos: Vec, rot: Vec) -> Vec:
        ref = task.reference()
        start_pos, start_ref = self._lift_from
        if pos[2] - start_pos[2] > LIFT_CHECK and ref[2] - start_ref[2] < LIFTED:  # nothing came up: grasp again
            return self._let_go(pos, rot)
        if float(np.linalg.norm(rot.T @ (ref - pos) - self._held)) > SLIP:  # it slipped out on the way
            return self._let_go(pos, rot)
        place = task.place()
        if place is None:  # lifting is the task: straight up
            return self._command(pos, rot, start_pos + np.array([0.0, 0.0, LIFT_HEIGHT]), self._grasp.yaw, CLOSE)
        if place.yaw is None:
            yaw, yaw_ok = self._grasp.yaw, True
        else:  # the hand's yaw that turns the object, as it is held, to the target's
            held = task.object_yaw() - _gripper_yaw(rot)
            yaw, yaw_ok = place.yaw - held, abs(_wrap(place.yaw - task.object_yaw(), 2.0 * math.pi)) < ALIGN_YAW / 2
        shift = pos - ref  # from the object's reference point to the gripper site
        side = float(np.linalg.norm(place.xy - ref[:2]))
        if self._stage == 0:  # straight up, to the carry height
            goal = np.array([start_pos[0], start_pos[1], place.carry_z + shift[2]])
            if ref[2] > place.carry_z - 0.01:
                self._stage = 1
            return self._command(pos, rot, goal, yaw, CLOSE)
        goal_ref = np.array([place.xy[0], place.xy[1], place.carry_z])
        if self._stage == 1 and side < place.tolerance and yaw_ok:  # over the target, turned: descend
            self._stage = 2
        if self._stage == 2:  # down, still centring it
            goal_ref[2] = place.release_z
            if ref[2] < place.release_z + 0.005 or (self._still >= 3 and side < 2 * place.tolerance):
                self._enter(Phase.RELEASE)
        return self._command(pos, rot, goal_ref + shift, yaw, CLOSE)

    def _let_go(self, pos: Vec, rot: Vec) -> Vec:
        """Open where it is, rise, and reach again."""
        self._begin_reach()
        up = pos + np.array([0.0, 0.0, 0.03])
        return self._command(pos, rot, up, _gripper_yaw(rot), OPEN)

    def _release(self, pos: Vec, rot: Vec) -> Vec:
        if self._phase_steps == 1:
            self._release_at = pos.copy()
        yaw = _gripper_yaw(rot)
        if self._phase_steps <= RELEASE_STEPS:
            return self._command(pos, rot, self._release_at, yaw, OPEN)
        above = self._release_at + np.array([0.0, 0.0, BACK_OFF])
        if pos[2] > above[2] - 0.01:
            self._hold_at, self._hold_yaw = above, yaw
            self._enter(Phase.DONE)
        return self._command(pos, rot, above, yaw, OPEN)
