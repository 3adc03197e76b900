"""mani-skill's motion-planning solutions as hylo's `expert` for the ManiSkill3 benchmark.

Each solution (`mani_skill.examples.motionplanning.panda.solutions`) drives an env itself: it reads the scene
(object poses, the gripper's frame), plans with mplib and calls `env.step` until done. Here it runs unchanged on a
thread of its own against `_EpisodeEnv`, which stands in for the env: its `unwrapped` is the task's ManiSkill env,
read through the episode's privileged channel (`ctx.privileged("env")`, traced as such); its `step(action)` hands
the action to `act` and waits until the Kernel has stepped the real env with it and asks for the next one; its
`reset` does nothing (the Kernel reset the env with the episode's seed). The thread and the Kernel take turns, never
both running. When the solution returns, or fails to plan, the expert holds still (the last joint targets) until
the episode ends.

mplib runs in a planner process of its own (`hylo.envs.maniskill_planner`): mani-skill's solver finds `mplib` as a
module-level name, which is pointed at `PlannerModule` once in the process that runs the expert.

The solutions act in `pd_joint_pos` (absolute joint targets, then the gripper): run the expert with
`-E control_mode=pd_joint_pos`; another control mode is refused before any episode by the action conventions.
"""

from __future__ import annotations

import importlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.errors import UnknownChoice
from hylo.core.types import Observation
from hylo.envs.maniskill_planner import PlannerModule, PlannerProcess
from hylo.envs.maniskill_robots import ACTION_CONVENTIONS
from hylo.envs.maniskill_setup import PLANNER_DIR

SOLUTIONS = {
    "PickCube-v1": "pick_cube",
    "PushCube-v1": "push_cube",
    "PullCube-v1": "pull_cube",
    "StackCube-v1": "stack_cube",
    "LiftPegUpright-v1": "lift_peg_upright",
    "PegInsertionSide-v1": "peg_insertion_side",
    "PlugCharger-v1": "plug_charger",
    "PlaceSphere-v1": "place_sphere",
    "PullCubeTool-v1": "pull_cube_tool",
    "StackPyramid-v1": "stack_pyramid",
}
"""The tasks with a Panda motion-planning solution in mani-skill 3.0.1 → its module."""

_PACKAGE = "mani_skill.examples.motionplanning"
PLAN_TIMEOUT_S = 120.0
"""The longest a solution may take between two actions (planning included) before `act` fails."""


class _Stop(BaseException):
    """Ends a solution's thread from inside its `env.step` (the episode ended first)."""


class _EpisodeEnv:
    """The env a solution drives: the task's env for reading, the Kernel's loop for stepping."""

    def __init__(self, env: Any, actions: queue.Queue[Any], stepped: queue.Queue[bool]) -> None:
        self._env = env
        self._actions = actions
        self._stepped = stepped
        self.unwrapped = env.unwrapped

    def reset(self, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        return None, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._actions.put(np.asarray(action, np.float32))
        if not self._stepped.get():
            raise _Stop
        return None, 0.0, False, False, {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class ManiSkillExpert(AgentBase):
    """Runs mani-skill's motion-planning solution for the episode's task (`SOLUTIONS`), one action per act."""

    name = "expert"
    requirements = AgentRequirements(
        observation_keys=(), needs_images=False, privileged_state=True,
        action_convention=ACTION_CONVENTIONS["pd_joint_pos"],
    )  # fmt: skip

    def __init__(self) -> None:
        self._process = PlannerProcess(PLANNER_DIR)
        self._thread: threading.Thread | None = None
        self._actions: queue.Queue[Any] = queue.Queue()
        self._stepped: queue.Queue[bool] = queue.Queue()
        self._asked = False
        self._last: np.ndarray[Any, Any] | None = None
        self._hold: Callable[[], np.ndarray[Any, Any]] | None = None
        self.error: str | None = None  # why the last episode's solution stopped early

    def reset(self, ctx: EpisodeContext) -> None:
        self._stop()
        module = SOLUTIONS.get(ctx.task.task)
        if module is None:
            raise UnknownChoice("ManiSkill task with a motion-planning solution", ctx.task.task, sorted(SOLUTIONS))
        solve = _solution(module, PlannerModule(self._process, seed=ctx.seed))
        env = ctx.privileged("env")
        self._actions, self._stepped = queue.Queue(), queue.Queue()
        self._asked, self._last, self.error = False, None, None
        robot = env.unwrapped.agent.robot
        self._hold = lambda: np.asarray(robot.get_qpos().cpu().numpy()[0][:7], np.float32)
        episode_env = _EpisodeEnv(env, self._actions, self._stepped)
        self._thread = threading.Thread(target=self._run, args=(solve, episode_env), daemon=True,
                                        name=f"maniskill-solution-{ctx.task.task}")  # fmt: skip
        self._thread.start()

    def _run(self, solve: Callable[..., Any], env: _EpisodeEnv) -> None:
        try:
            result = solve(env, seed=None, debug=False, vis=False)
            if isinstance(result, int) and result == -1:
                self.error = "the planner found no path"
        except _Stop:
            return
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        self._actions.put(None)

    def act(self, obs: Observation) -> ActionChunk:
        if self._thread is None:
            raise RuntimeError("ManiSkillExpert.act before reset")
        if self._asked:
            self._stepped.put(True)  # the previous action was applied: the solution goes on
        self._asked = True
        try:
            action = (
                self._actions.get(timeout=PLAN_TIMEOUT_S)
                if self._thread.is_alive() or not self._actions.empty()
                else None
            )
        except queue.Empty:
            raise RuntimeError(f"the motion-planning solution gave no action in {PLAN_TIMEOUT_S:.0f} s") from None
        if action is None:
            self._asked = False  # the solution ended: nothing waits for a step any more
            return ActionChunk.single(self._held())
        self._last = action
        return ActionChunk.single(action)

    def _held(self) -> np.ndarray[Any, Any]:
        if self._last is not None:
            return self._last
        assert self._hold is not None
        return np.concatenate([self._hold(), [1.0]]).astype(np.float32)

    def _stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._stepped.put(False)
            thread.join(timeout=10)

    def close(self) -> None:
        self._stop()
        self._process.close()


_log = logging.getLogger("hylo.maniskill")


def _logged(*args: Any, **_: Any) -> None:
    _log.debug("motion planning: %s", " ".join(map(str, args)))


def _solution(module: str, planner: PlannerModule) -> Callable[..., Any]:
    """The solution's `solve`, its solver pointed at the planner process (mani-skill's `mplib` name); what the
    solver and the solution print (a failed plan's status) goes to the `hylo.maniskill` logger instead."""
    solver: Any = importlib.import_module(f"{_PACKAGE}.base_motionplanner.motionplanner")
    solution: Any = importlib.import_module(f"{_PACKAGE}.panda.solutions.{module}")
    solver.mplib = planner
    solver.print = solution.print = _logged
    solve: Callable[..., Any] = solution.solve
    return solve
