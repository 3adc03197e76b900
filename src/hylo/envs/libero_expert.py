"""A privileged scripted expert for LIBERO's pick-and-place tasks.

It reads the episode's goal from the parsed BDDL problem (`In` / `On` an object and its target region or object)
and, every step, the simulator's state: the gripper's site pose and finger opening, the object's and the target's
collision-geometry bounding boxes. It acts with saturated proportional OSC_POSE deltas along straight lines:
reach (descending inside a cone over the grasp point), close (a bounded number of steps), carry (lift only as high
as the target's rim needs, moving sideways as soon as the object clears it), release over the target, then hold.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation

Vec = np.ndarray[Any, np.dtype[np.float64]]

POS_SCALE = 0.05
"""Metres of OSC position delta at action 1.0."""
ROT_SCALE = 0.5
"""Radians of OSC rotation delta at action 1.0."""
OPEN, CLOSE = -1.0, 1.0

POS_GAIN = 2.0
"""Action per (position error / POS_SCALE): errors above half a step's reach saturate the action."""
ROT_GAIN = 1.0
"""Action per (orientation error / ROT_SCALE): the gripper holds the orientation it had when the episode began."""
REACH_SLOPE = 1.0
"""While reaching, the gripper stays above the grasp point by this many metres per metre still to go sideways."""
MAX_SPAN = 0.07
"""Objects wider than this (metres, along the fingers' closing axis, world y) are pinched by a wall, not spanned."""
WALL_INSET = 0.012
"""Metres inside the wide object's outer edge at which the gripper site pinches its wall."""
FINGER_REACH = 0.045
"""Metres from the gripper site to the outside of an open finger."""
FINGERTIP_DEPTH = 0.012
"""Metres the fingertips reach below the gripper site: it closes no lower than this above the object's bottom."""
ALIGN_TOL = 0.012
"""Metres (sideways) from the grasp point within which the open fingers may go lower than the object's top."""
TOP_CLEARANCE = 0.025
"""Metres the gripper site stays above the object's top until it is aligned over the grasp point."""
REACH_TOL = 0.008
"""Metres from the grasp point at which the gripper closes."""
STALL_DIST, STALL_Z = 0.001, 0.01
"""Aligned sideways but blocked on the way down (moving less than STALL_DIST metres a step, at most STALL_Z above
the grasp point): the gripper closes where it is."""
CLOSE_MIN_STEPS, CLOSE_MAX_STEPS = 4, 12
"""Closing lasts at least / at most this many steps; in between it ends when the fingers stop moving."""
LIFT_OFF = 0.02
"""Metres the object rises straight up before it moves sideways (sideways no faster than up until it is within a
centimetre of its cruise height)."""
RIM_CLEARANCE = 0.02
"""Metres the object's bottom clears the target's top by while it is carried over it."""
CARRY_SLOPE = 1.0
"""Over the last stretch the carried object descends to its release height by this many metres per metre closer."""
PLACE_TOL = 0.012
"""Metres (sideways) from the place point at which the gripper opens."""
STALL_PLACE_TOL = 0.022
"""Metres (sideways) from the place point within which a carry blocked on its way there releases the object."""
DROP_TOL = 0.025
"""For `In`, the gripper opens this many metres (sideways) from the container's centre, still moving towards it."""
TALL, TALL_RELEASE, TALL_SLOPE = 0.1, 0.03, 4.0
"""An object taller than TALL metres going `In` a region is lowered to TALL_RELEASE metres above the region's floor
before release, descending TALL_SLOPE metres per metre closer to its centre (so only once over the container)."""
DROP_HEIGHT = 0.01
"""For `On`, the object's bottom is lowered to this height above the target's top before it is released (for `In`
it is dropped from `RIM_CLEARANCE` above the container's top)."""


class Phase(enum.Enum):
    """The controller's phases, in order."""

    REACH = "reach"
    CLOSE = "close"
    CARRY = "carry"
    RELEASE = "release"
    DONE = "done"
    IDLE = "idle"


@dataclass(frozen=True, slots=True)
class Goal:
    """One pick-and-place goal: `obj` goes `In` or `On` `target` (an object, fixture or region site)."""

    relation: str
    obj: str
    target: str


def parse_goals(problem: Any) -> list[Goal]:
    """The goals of a parsed BDDL problem (`goal_state` as `[["in", obj, target], ...]`), or none if any of them is
    not an `In` / `On` of two named things."""
    predicates = problem.get("goal_state", []) if isinstance(problem, dict) else []
    goals: list[Goal] = []
    for predicate in predicates:
        if not (
            isinstance(predicate, (list, tuple)) and len(predicate) == 3 and str(predicate[0]).lower() in ("in", "on")
        ):
            return []
        goals.append(Goal(str(predicate[0]).lower(), str(predicate[1]), str(predicate[2])))
    return goals


def _axis_angle(rot: Vec) -> Vec:
    """The axis-angle vector of a rotation matrix."""
    cos = np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.arccos(cos))
    if angle < 1e-6:
        return np.zeros(3)
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    norm = float(np.linalg.norm(axis))
    if norm < 1e-9:  # a half turn: the axis is the column of rot + I with the largest norm
        sym = rot + np.eye(3)
        axis = sym[:, int(np.argmax(np.linalg.norm(sym, axis=0)))]
        norm = float(np.linalg.norm(axis))
    return np.asarray(axis / norm * angle, dtype=np.float64)


def _saturate(vector: Vec, gain: float, scale: float) -> Vec:
    """`vector * gain / scale`, scaled down as a whole (so its direction holds) to fit in [-1, 1]."""
    command = vector * gain / scale
    peak = float(np.max(np.abs(command))) if command.size else 0.0
    return command / peak if peak > 1.0 else command


class _Scene:
    """Reads the robosuite env behind a LIBERO env: gripper pose and opening, bodies' and sites' boxes."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.inner: Any = getattr(env, "env", env)
        self.sim: Any = self.inner.sim
        robot = self.inner.robots[0]
        self.eef_site: str = robot.controller.eef_name
        self.finger_qpos: list[int] = list(robot._ref_gripper_joint_pos_indexes)
        self._geoms: dict[str, np.ndarray[Any, np.dtype[np.int64]]] = {}

    def eef(self) -> tuple[Vec, Vec]:
        """The gripper site's position and rotation matrix."""
        data = self.sim.data
        return np.array(data.get_site_xpos(self.eef_site)), np.array(data.get_site_xmat(self.eef_site)).reshape(3, 3)

    def opening(self) -> float:
        """The fingers' total opening, in metres."""
        qpos = self.sim.data.qpos[self.finger_qpos]
        return float(np.sum(np.abs(qpos)))

    def has_object(self, name: str) -> bool:
        return name in self.inner.objects_dict or name in getattr(self.inner, "fixtures_dict", {})

    def has_site(self, name: str) -> bool:
        return name in getattr(self.inner, "object_sites_dict", {})

    def _geom_ids(self, name: str) -> np.ndarray[Any, np.dtype[np.int64]]:
        if name not in self._geoms:
            model = self.sim.model
            obj = self.inner.objects_dict.get(name) or self.inner.fixtures_dict.get(name)
            root = model.body_name2id(obj.root_body)
            parents = np.asarray(model.body_parentid)
            inside = np.zeros(model.nbody, dtype=bool)
            inside[root] = True
            for body in range(model.nbody):  # parents come before their children in MuJoCo's body order
                if body != root and inside[parents[body]] and parents[body] != body:
                    inside[body] = True
            geom_body = np.asarray(model.geom_bodyid)
            collides = (np.asarray(model.geom_contype) != 0) | (np.asarray(model.geom_conaffinity) != 0)
            ids = np.flatnonzero(inside[geom_body] & collides)
            if ids.size == 0:
                ids = np.flatnonzero(inside[geom_body])
            self._geoms[name] = ids
        return self._geoms[name]

    def geom_boxes(self, name: str) -> tuple[Vec, Vec]:
        """The world-axis-aligned bounding boxes (rows of low and high corners) of an object's collision geoms."""
        ids = self._geom_ids(name)
        model, data = self.sim.model, self.sim.data
        aabb = np.asarray(getattr(model, "_model", model).geom_aabb)[ids]
        rot = np.asarray(data.geom_xmat)[ids].reshape(-1, 3, 3)
        centre = np.asarray(data.geom_xpos)[ids] + np.einsum("nij,nj->ni", rot, aabb[:, :3])
        half = np.einsum("nij,nj->ni", np.abs(rot), aabb[:, 3:])
        return centre - half, centre + half

    def box(self, name: str) -> tuple[Vec, Vec]:
        """The world-axis-aligned bounding box (low, high corners) of an object's collision geoms."""
        low, high = self.geom_boxes(name)
        return np.min(low, axis=0), np.max(high, axis=0)

    def obstacles(self) -> list[str]:
        """The names of every object and fixture."""
        return [*self.inner.objects_dict, *getattr(self.inner, "fixtures_dict", {})]

    def body_pos(self, name: str) -> Vec:
        return np.array(self.sim.data.body_xpos[self.inner.obj_body_id[name]])

    def site(self, name: str) -> tuple[Vec, Vec]:
        """A region site's centre and its half extents along the world axes."""
        data = self.sim.data
        pos = np.array(data.get_site_xpos(name))
        mat = np.array(data.get_site_xmat(name)).reshape(3, 3)
        size = np.asarray(getattr(self.inner.object_sites_dict[name], "size", [0.0, 0.0, 0.0]), dtype=np.float64)
        return pos, np.abs(mat @ size)

    def site_parent(self, name: str) -> str | None:
        parent = getattr(self.inner.object_sites_dict[name], "parent_name", None)
        return parent if isinstance(parent, str) and self.has_object(parent) else None


class LiberoExpert(AgentBase):
    """A scripted expert for LIBERO's pick-and-place goals, reading the simulator through `ctx.privileged`.

    Solves libero_object (an object into the basket: every task) and libero_spatial (the black bowl onto the plate:
    all but the bowl in the top drawer, whose walls leave the fingers no room, and a few layouts where the hand
    meets the cabinet). It attempts any goal made only of `In` / `On` predicates whose first argument is a movable
    object, one after another (so also libero_goal's and libero_10's pick-and-place goals, untested: a goal that
    needs a drawer opened first fails). For a goal with any other predicate (`Open`, `Close`, `Turnon`, ...), or
    one naming something the scene lacks, `act` holds still with the gripper open.
    """

    name = "expert"
    requirements = AgentRequirements(
        action_space=spaces.Box(-1.0, 1.0, (7,)), needs_images=False, privileged_state=True
    )

    class Args(AgentArgs):
        pass

    def __init__(self) -> None:
        self._scene: _Scene | None = None
        self._goals: list[Goal] = []
        self._phase = Phase.IDLE
        self._last_acting = Phase.IDLE
        self.steps = 0
        self.phase_starts: list[tuple[str, int]] = []
        """(phase, step it began at) for the episode so far: where the steps went."""

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self._scene = None
        self._goals = []
        self._phase = Phase.IDLE
        self.steps = 0
        self.phase_starts = []
        env = ctx.privileged("simulator")
        goals = parse_goals(getattr(getattr(env, "env", env), "parsed_problem", None))
        if not goals:
            return
        scene = _Scene(env)
        if not all(scene.has_object(g.obj) and (scene.has_object(g.target) or scene.has_site(g.target)) for g in goals):
            return
        self._scene = scene
        self._goals = goals
        self._rot_goal = scene.eef()[1]
        self._start_goal(0)

    @property
    def phase(self) -> Phase:
        return self._phase

    def _start_goal(self, index: int) -> None:
        self._goal_index = index
        self._phase = Phase.REACH
        self._phase_steps = 0
        self._last_opening = -1.0
        self._lift_bottom = 0.0
        self._wall_side = 0.0
        self._last_pos: Vec | None = None

    # The geometry of the current goal.

    def _grasp_point(self, scene: _Scene, goal: Goal) -> Vec:
        """Where the gripper site closes: over the object's middle, low on it (or on the rim of a wide one)."""
        low, high = scene.box(goal.obj)
        centre = (low + high) / 2.0
        height = high[2] - low[2]
        width = high[:2] - low[:2]
        if width[1] > MAX_SPAN:  # too wide to span (a bowl): pinch its wall, on the side with room for a finger
            if self._wall_side == 0.0:
                self._wall_side = self._roomier_side(scene, goal, low, high)
            wall = low[1] + WALL_INSET if self._wall_side < 0 else high[1] - WALL_INSET
            return np.array([centre[0], wall, high[2] - 0.02])
        # Low on the object (less to lift) but not so low that the hand above the fingers meets its top.
        grasp_z = low[2] + min(max(height / 2.0, FINGERTIP_DEPTH), 0.04)
        return np.array([centre[0], centre[1], max(grasp_z, high[2] - 0.03)])

    def _roomier_side(self, scene: _Scene, goal: Goal, low: Vec, high: Vec) -> float:
        """-1 to pinch the wall on the object's low y side, +1 on its high side: where the fingers have more room
        from other things' geoms at the fingers' height."""
        x = (low[0] + high[0]) / 2.0
        grasp_z = high[2] - 0.02
        fingers = {
            side: np.array([[x, wall - FINGER_REACH], [x, wall + FINGER_REACH]])
            for side, wall in ((-1.0, low[1] + WALL_INSET), (1.0, high[1] - WALL_INSET))
        }
        room = dict.fromkeys(fingers, np.inf)
        for name in scene.obstacles():
            if name == goal.obj:
                continue
            o_low, o_high = scene.geom_boxes(name)
            level = (o_high[:, 2] > grasp_z - FINGERTIP_DEPTH) & (o_low[:, 2] < grasp_z + FINGER_REACH)
            if not np.any(level):
                continue
            o_low, o_high = o_low[level, :2], o_high[level, :2]
            for side, points in fingers.items():
                for point in points:
                    gap = np.maximum(np.maximum(o_low - point, point - o_high), 0.0)
                    room[side] = min(room[side], float(np.min(np.linalg.norm(gap, axis=1))))
        return -1.0 if room[-1.0] >= room[1.0] - 0.005 else 1.0

    def _target(self, scene: _Scene, goal: Goal) -> tuple[Vec, float]:
        """Where the object's box centre goes sideways (z unused) and the height its bottom must clear."""
        if scene.has_site(goal.target):
            pos, half = scene.site(goal.target)
            parent = scene.site_parent(goal.target)
            top = scene.box(parent)[1][2] if parent is not None else pos[2] + half[2]
            if goal.relation == "on" and parent is None:
                top = pos[2]
            return pos, float(top)
        high = scene.box(goal.target)[1]
        return np.asarray(scene.body_pos(goal.target), dtype=np.float64), float(high[2])

    def _cruise_height(self, scene: _Scene, goal: Goal, low: Vec, high: Vec) -> float:
        """The height the object's bottom is carried at: clear of the target and whatever lies on the way."""
        target, top = self._target(scene, goal)
        start = (low[:2] + high[:2]) / 2.0
        reach = (high[:2] - low[:2]) / 2.0 + 0.01
        path = start + np.linspace(0.0, 1.0, 25)[:, None] * (target[:2] - start)
        tallest = top
        skip = {goal.obj, goal.target}
        if scene.has_site(goal.target):
            skip.add(scene.site_parent(goal.target) or goal.target)
        for name in scene.obstacles():
            if name in skip:
                continue
            o_low, o_high = scene.box(name)
            if o_high[2] <= self._lift_bottom + LIFT_OFF:
                continue
            near = np.all((path > o_low[:2] - reach) & (path < o_high[:2] + reach), axis=1)
            if bool(np.any(near[1:])):
                tallest = max(tallest, float(o_high[2]))
        return max(tallest + RIM_CLEARANCE, self._lift_bottom + LIFT_OFF)

    def act(self, obs: Observation) -> ActionChunk:
        action = self._act()
        if not self.phase_starts or self.phase_starts[-1][0] != self._last_acting.value:
            self.phase_starts.append((self._last_acting.value, self.steps + 1))
        self.steps += 1
        return ActionChunk.single(np.clip(action, -1.0, 1.0).astype(np.float32))

    def _hold(self) -> Vec:
        action = np.zeros(7)
        action[6] = OPEN
        return action

    def _act(self) -> Vec:
        scene = self._scene
        self._last_acting = self._phase
        if scene is None or self._phase in (Phase.IDLE, Phase.DONE):
            return self._hold()
        goal = self._goals[self._goal_index]
        pos, rot = scene.eef()
        action = np.zeros(7)
        action[3:6] = _saturate(_axis_angle(self._rot_goal @ rot.T), ROT_GAIN, ROT_SCALE)
        self._phase_steps += 1
        if self._phase is Phase.REACH:
            grasp = self._grasp_point(scene, goal)
            error = grasp - pos
            side = float(np.linalg.norm(error[:2]))
            aim = grasp + np.array([0.0, 0.0, REACH_SLOPE * side])
            aim[2] = min(aim[2], max(pos[2], grasp[2]))  # never climb on the way down
            if side > ALIGN_TOL:  # the fingers go below the object's top only once they straddle it
                aim[2] = max(aim[2], scene.box(goal.obj)[1][2] + TOP_CLEARANCE)
            move = aim - pos
            if move[2] > 0.01:  # climbing over the object first: sideways no faster than up
                move[:2] *= min(1.0, move[2] / max(float(np.linalg.norm(move[:2])), 1e-9))
            action[:3] = _saturate(move, POS_GAIN, POS_SCALE)
            action[6] = OPEN
            stalled = self._last_pos is not None and float(np.linalg.norm(pos - self._last_pos)) < STALL_DIST
            self._last_pos = pos
            if float(np.linalg.norm(error)) < REACH_TOL or (stalled and side < ALIGN_TOL and error[2] > -STALL_Z):
                self._grasp = grasp
                self._phase, self._phase_steps = Phase.CLOSE, 0
            return action
        if self._phase is Phase.CLOSE:
            action[:3] = _saturate(self._grasp - pos, POS_GAIN, POS_SCALE)
            action[6] = CLOSE
            opening = scene.opening()
            still = abs(opening - self._last_opening) < 2e-4
            self._last_opening = opening
            if self._phase_steps >= CLOSE_MAX_STEPS or (self._phase_steps >= CLOSE_MIN_STEPS and still):
                low, high = scene.box(goal.obj)
                self._lift_bottom = float(low[2])
                self._cruise = self._cruise_height(scene, goal, low, high)
                self._phase, self._phase_steps = Phase.CARRY, 0
            return action
        low, high = scene.box(goal.obj)
        centre = (low + high) / 2.0
        target, top = self._target(scene, goal)
        slope = CARRY_SLOPE
        if goal.relation == "on":
            final = top + DROP_HEIGHT
        elif high[2] - low[2] > TALL and scene.has_site(goal.target):
            # A tall object dropped from above the rim may tip and lean on it: lower it in, steeply once inside.
            pos_t, half_t = scene.site(goal.target)
            final, slope = pos_t[2] - half_t[2] + TALL_RELEASE, TALL_SLOPE
        else:
            final = top + RIM_CLEARANCE
        side_error = target[:2] - centre[:2]
        side = float(np.linalg.norm(side_error))
        action[6] = CLOSE
        if self._phase is Phase.CARRY:
            # The bottom's height: the cruise height, sloping down to the final height over the last stretch.
            aim = min(self._cruise, final + slope * side)
            move = np.zeros(3)
            move[2] = aim - low[2]
            if low[2] >= self._lift_bottom + LIFT_OFF or low[2] >= aim - 0.01:
                # Sideways no faster than up while the object is still below the height it should be at.
                cap = max(move[2], 0.0) if move[2] > 0.01 else np.inf
                move[:2] = side_error * min(1.0, cap / max(side, 1e-9))
            action[:3] = _saturate(move, POS_GAIN, POS_SCALE)
            tolerance = PLACE_TOL if goal.relation == "on" else DROP_TOL
            stalled = self._last_pos is not None and float(np.linalg.norm(pos - self._last_pos)) < STALL_DIST
            self._last_pos = pos
            if stalled and self._phase_steps > 3:  # blocked short of the place point: let go if near enough
                tolerance, height_tol = STALL_PLACE_TOL, 0.02
            else:
                height_tol = 0.01
            if side < tolerance and abs(low[2] - final) < height_tol:
                self._phase, self._phase_steps = Phase.RELEASE, 0
            return action
        # RELEASE: open, holding still, then the next goal or done.
        action[6] = OPEN
        if self._phase_steps >= 4:
            action[2] = 0.5
        if self._phase_steps >= 8:
            if self._goal_index + 1 < len(self._goals):
                self._start_goal(self._goal_index + 1)
            else:
                self._phase = Phase.DONE
        return action
