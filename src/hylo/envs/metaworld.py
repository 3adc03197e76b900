"""Meta-World v3: 50 Sawyer manipulation tasks in MuJoCo, with the scripted experts and the MT10 / MT50 splits.

One simulator per task is built on first use and kept. An episode's goal and object positions are drawn from
`task.seed` alone, so a seed always places the same episode. The state is Meta-World's 39-d goal-observable vector;
camera frames are rendered (offscreen, EGL) only when asked for.
"""

from __future__ import annotations

import contextlib
import os
import string
import warnings
from collections.abc import Iterator
from typing import Any

import gymnasium.spaces as spaces
import metaworld.env_dict as env_dict
import mujoco
import numpy as np
from metaworld.policies import ENV_POLICY_MAP
from pydantic import Field

from hylo.core.agent import MAX_CHUNK, AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.conventions import ActionConvention
from hylo.core.environment import Environment, VideoCamera
from hylo.core.errors import UnknownChoice
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs.actions import finite_vector
from hylo.envs.benchmark import Benchmark
from hylo.envs.mujoco_watch import DivergenceWatch, route_mujoco_warnings

MAX_EPISODE_STEPS = 500
"""Meta-World's `max_path_length`: its envs never terminate, they are truncated here."""
CONTROL_RATE_HZ = 80.0
"""1 / dt, with dt = frame_skip (5) x timestep (2.5 ms)."""
CAMERAS = ("corner", "corner2", "corner3", "corner4", "topview", "behindGripper", "gripperPOV")
"""The cameras every Meta-World scene has."""
STATE_SIZE = 39

FEATURE_NAMES = (
    ("images/*", "observation.image"),
    ("state[0:4]", "observation.state"),
    ("instruction", "task"),
)
"""LeRobot's Meta-World names (`lerobot.envs.metaworld`): its camera is `observation.image`, its `agent_pos` the
first four floats of the state (hand xyz, gripper opening)."""

ACTION_CONVENTION = ActionConvention(
    control="ee_delta",
    rotation="none",
    gripper="close_positive",
    frame="world",
    units="normalized",
    labels=("dx", "dy", "dz", "gripper"),
    low=(-1.0,) * 4,
    high=(1.0,) * 4,
)
"""Meta-World's `SawyerXYZEnv`: a displacement of the hand's mocap body (the action x 1/100 m, `set_xyz_action`) and
the gripper's effort, applied to the fingers as (a, -a): a larger value closes."""

SPLITS: dict[str, list[str]] = {"mt10": list(env_dict.MT10_V3), "mt50": list(env_dict.MT50_V3)}
TASKS: list[str] = list(env_dict.ALL_V3_ENVIRONMENTS)

INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "pick up the nut and place it onto the peg",
    "basketball-v3": "pick up the basketball and dunk it into the hoop",
    "bin-picking-v3": "pick up the cube from one bin and place it into the other bin",
    "box-close-v3": "pick up the lid and close the box with it",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "reach over the wall and press the button from the top",
    "button-press-v3": "press the button in from the front",
    "button-press-wall-v3": "reach around the wall and press the button",
    "coffee-button-v3": "press the button on the coffee machine",
    "coffee-pull-v3": "pull the mug out from under the coffee machine to the goal",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "turn the dial to the goal angle",
    "disassemble-v3": "pick the nut up off the peg",
    "door-close-v3": "close the door",
    "door-lock-v3": "lock the door by turning the lock down",
    "door-open-v3": "open the door",
    "door-unlock-v3": "unlock the door by turning the lock up",
    "hand-insert-v3": "insert the gripper into the hole",
    "drawer-close-v3": "push the drawer closed",
    "drawer-open-v3": "pull the drawer open",
    "faucet-open-v3": "turn the faucet handle to open the faucet",
    "faucet-close-v3": "turn the faucet handle to close the faucet",
    "hammer-v3": "pick up the hammer and hammer the nail into the wall",
    "handle-press-side-v3": "press the handle down from the side",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up from the side",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever up",
    "peg-insert-side-v3": "pick up the peg and insert it sideways into the hole",
    "pick-place-wall-v3": "pick up the puck, lift it over the wall and place it at the goal",
    "pick-out-of-hole-v3": "pick the puck up out of the hole and lift it to the goal",
    "reach-v3": "reach the red goal position",
    "push-back-v3": "pull the puck back to the goal",
    "push-v3": "push the puck to the green goal",
    "pick-place-v3": "pick up the puck and place it at the blue goal",
    "plate-slide-v3": "slide the plate into the goal",
    "plate-slide-side-v3": "slide the plate sideways into the goal",
    "plate-slide-back-v3": "slide the plate back out of the goal",
    "plate-slide-back-side-v3": "slide the plate back out of the goal sideways",
    "peg-unplug-side-v3": "pull the peg out of the hole sideways",
    "soccer-v3": "push the soccer ball into the goal",
    "stick-push-v3": "pick up the stick and push the thermos to the goal with it",
    "stick-pull-v3": "pick up the stick and pull the thermos to the goal with it",
    "push-wall-v3": "push the puck around the wall to the goal",
    "reach-wall-v3": "reach over the wall to the goal position",
    "shelf-place-v3": "pick up the puck and place it on the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the edge of the table",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}

_SIM_CLASSES: dict[str, Any] = {
    name: env_dict.ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[f"{name}-goal-observable"] for name in TASKS
}


def _state_space() -> spaces.Box:
    """Hand xyz (bounded) and gripper opening (in [-1, 1]) at this step and the last; objects and goal unbounded."""
    low = np.full(STATE_SIZE, -np.inf)
    high = np.full(STATE_SIZE, np.inf)
    for start in (0, 18):
        low[start : start + 3], high[start : start + 3] = (-0.525, 0.348, -0.0525), (0.525, 1.025, 0.7)
        low[start + 3], high[start + 3] = -1.0, 1.0
    return spaces.Box(low, high, (STATE_SIZE,), np.float64)


class MetaWorldEnvironment(Environment):
    """Any Meta-World v3 task, chosen by `task.task` (e.g. "pick-place-v3") on reset.

    Observation: `state` (39 float64: hand xyz, gripper opening, objects' pose, the same for the previous step, goal
    xyz), `instruction`, and — only with `render_images=True` — `images[camera]` (height x width x 3 uint8).
    Action: 4 floats in [-1, 1]: hand displacement xyz and gripper effort (+1 closes). Success is Meta-World's
    `info["success"]`; episodes are truncated at 500 steps. `mjdata()` is the current task's `mujoco.MjData`.
    """

    render_images: bool = False  # `Environment.render_images`, as a plain attribute

    def __init__(
        self, render_images: bool = False, camera: str = "corner", width: int = 128, height: int = 128
    ) -> None:
        if camera not in CAMERAS:
            raise UnknownChoice("Meta-World camera", camera, CAMERAS)
        if width < 1 or height < 1:
            raise ValueError(f"image size must be positive, got {width}x{height}")
        self.render_images = render_images
        self.camera = camera
        self.width = width
        self.height = height
        obs_spaces: dict[str, spaces.Space[Any]] = {
            "state": _state_space(),
            "instruction": spaces.Text(120, charset=string.printable),
        }
        if render_images:
            obs_spaces["images"] = spaces.Dict({camera: spaces.Box(0, 255, (height, width, 3), np.uint8)})
        self._spec = EnvSpec(
            observation_space=spaces.Dict(obs_spaces),
            action_space=spaces.Box(-1.0, 1.0, (4,), np.float32),
            control_rate_hz=CONTROL_RATE_HZ,
            max_episode_steps=MAX_EPISODE_STEPS,
            name="metaworld",
            feature_names=FEATURE_NAMES,
            action_convention=ACTION_CONVENTION,
        )
        self._sims: dict[str, Any] = {}
        self._renderers: dict[tuple[str, int, int], Any] = {}  # by task, height and width
        self._sim: Any = None
        self._task: TaskInstance | None = None
        self._obs: Observation | None = None
        self._steps = 0
        self._gripper = 0.0
        route_mujoco_warnings()
        self._watch = DivergenceWatch(self.mjdata)

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def reset(self, task: TaskInstance) -> Observation:
        if task.task not in _SIM_CLASSES:
            raise UnknownChoice("Meta-World task", task.task, TASKS)
        sim = self._sims.get(task.task)
        if sim is None:
            sim = self._sims[task.task] = self._build(task.task)
        # Meta-World draws the goal and object positions from `np_random` at every reset (rejecting overlaps), so
        # seeding it with the episode's seed places the same episode every time, whatever ran before.
        sim.np_random = np.random.default_rng(task.seed)
        state, _ = sim.reset()
        self._sim, self._task = sim, task
        self._steps = 0
        self._gripper = 0.0
        self._obs = self._observation(state)
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._sim is None or self._obs is None:
            raise RuntimeError("step before the first reset")
        if self._steps >= MAX_EPISODE_STEPS:
            raise RuntimeError(f"step after the episode was truncated at {MAX_EPISODE_STEPS} steps; reset first")
        array = _checked_action(action)
        before = self._watch.counts()
        state, reward, _, _, info = self._sim.step(array)
        self._watch.check(before)
        self._steps += 1
        self._gripper = min(1.0, max(-1.0, float(array[3])))
        self._obs = self._observation(state)
        small = {key: float(value) for key, value in info.items() if isinstance(value, (bool, int, float, np.number))}
        truncated = self._steps >= MAX_EPISODE_STEPS
        return StepResult(self._obs, float(reward), False, truncated, bool(info["success"]), small)

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def hold_action(self) -> Any:
        """Keep the hand where it is (no displacement) and the gripper at the effort last commanded."""
        return np.array([0.0, 0.0, 0.0, self._gripper], np.float32)

    def mjdata(self) -> Any:
        """The current task's `mujoco.MjData` (for inspection, or to inject faults in tests)."""
        if self._sim is None:
            raise RuntimeError("no simulator before the first reset")
        return self._sim.data

    @property
    def video_camera(self) -> VideoCamera:
        return self

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
        """The current scene from the observation's camera at `size` (width, height; None: the observation's), for a
        video alone: it renders whether or not the observations carry frames."""
        if self._sim is None:
            raise RuntimeError("video_frame before the first reset")
        width, height = size if size is not None else (self.width, self.height)
        return self._render(height, width)

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        for sim in self._sims.values():
            sim.close()
        self._renderers.clear()
        self._sims.clear()
        self._sim = self._task = self._obs = None

    def _build(self, name: str) -> Any:
        sim = _SIM_CLASSES[name](seed=0)  # seed=0: construction leaves numpy's global generator as it was
        sim.max_path_length = MAX_EPISODE_STEPS
        sim._freeze_rand_vec = False  # draw the task variation at each reset ...
        sim.seeded_rand_vec = True  # ... from `sim.np_random`, which reset() seeds
        return sim

    def _observation(self, state: np.ndarray[Any, Any]) -> Observation:
        assert self._task is not None
        obs = Observation(state=state, instruction=INSTRUCTIONS[self._task.task])
        if self.render_images:
            obs["images"] = {self.camera: self._render(self.height, self.width)}
        return obs

    def _render(self, height: int, width: int) -> np.ndarray[Any, Any]:
        assert self._task is not None
        key = (self._task.task, height, width)
        renderer = self._renderers.get(key)
        if renderer is None:
            model = self._sim.model
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
            model.vis.global_.offheight = max(model.vis.global_.offheight, height)
            with _gl_context_as_configured():
                renderer = self._renderers[key] = mujoco.Renderer(model, height, width)
            renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        data = self._sim.data
        renderer.update_scene(data, camera=self.camera)
        frame: np.ndarray[Any, Any] = renderer.render()
        if data.camera(self.camera).xmat[7] < 0:  # the camera's up axis points down (Meta-World's corner cameras)
            frame = np.ascontiguousarray(frame[::-1, ::-1])  # rotate, not mirror: left stays left
        return frame


@contextlib.contextmanager
def _gl_context_as_configured() -> Iterator[None]:
    """Make `mujoco.Renderer` use EGL when MUJOCO_GL says so, even if mujoco was imported before it was set (and so
    chose GLFW, which needs a display). Only the renderer made inside is affected: it keeps its context."""
    from mujoco import gl_context  # optional: the metaworld extra

    chosen = getattr(gl_context, "GLContext", None)
    if os.environ.get("MUJOCO_GL") != "egl" or getattr(chosen, "__module__", "") == "mujoco.egl":
        yield
        return
    from mujoco.egl import GLContext  # optional: the metaworld extra

    gl_context.GLContext = GLContext
    try:
        yield
    finally:
        gl_context.GLContext = chosen


def _checked_action(action: Any) -> np.ndarray[Any, Any]:
    """The action as 4 finite floats, or InvalidAction (a NaN would otherwise reach the mocap and blow up the sim)."""
    return finite_vector(action, 4, "Meta-World takes (4,): dx, dy, dz, gripper")


class MetaWorldExpert(AgentBase):
    """Meta-World's own scripted policy for the episode's task (reads only the state).

    `chunk_size` > 1 makes it a chunked policy: each act returns the current action held for `chunk_size` steps
    (open loop), of which the first `execution_steps` (default: all) run before it is asked again.
    """

    name = "expert"
    requirements = AgentRequirements(
        observation_keys=("state",), action_space=spaces.Box(-1.0, 1.0, (4,)), needs_images=False
    )

    class Args(AgentArgs):
        chunk_size: int = Field(default=1, ge=1, le=MAX_CHUNK, description="actions per act (held open loop)")
        execution_steps: int | None = Field(default=None, ge=1, le=MAX_CHUNK, description="of which run (default all)")

    def __init__(self, chunk_size: int = 1, execution_steps: int | None = None) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        if execution_steps is not None and not (
            isinstance(execution_steps, int)
            and not isinstance(execution_steps, bool)
            and 1 <= execution_steps <= chunk_size
        ):
            raise ValueError(f"execution_steps must be an int in 1..chunk_size={chunk_size}, got {execution_steps!r}")
        self.chunk_size = chunk_size
        self.execution_steps = execution_steps
        self._policy: Any = None

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        policy_class: Any = ENV_POLICY_MAP.get(ctx.task.task)
        if policy_class is None:
            raise UnknownChoice("task with a Meta-World scripted policy", ctx.task.task, sorted(ENV_POLICY_MAP))
        self._policy = policy_class()
        # The policies warn whenever their gain saturates (nearly every step); the action is clipped anyway.
        warnings.filterwarnings("ignore", r"Constant\(s\) may be too high", UserWarning, r"metaworld\.policies")

    def act(self, obs: Observation) -> ActionChunk:
        if self._policy is None:
            raise RuntimeError("MetaWorldExpert.act before reset")
        action = np.clip(self._policy.get_action(obs["state"]), -1.0, 1.0).astype(np.float32)
        if self.chunk_size == 1:
            return ActionChunk.single(action)
        return ActionChunk(np.repeat(action[None], self.chunk_size, axis=0), self.execution_steps)


class MetaWorldBenchmark(Benchmark):
    """Meta-World v3 multi-task splits: MT10 (10 tasks) and MT50 (all 50), goal observable, 500 steps each."""

    name = "metaworld"
    display_name = "Meta-World"
    default_split = "mt10"
    default_per_step_budget_sec = 0.2
    typical_reset_sec = 2.5  # MT10 medians with frames rendered on the CPU (0.45 s and 1.4 ms without), 2 cores
    typical_step_sec = 0.16
    typical_build_sec = 3.0  # a first reset's extra (the task's env built): 1.3 s quiet, up to 2.8 s under load
    feature_names = FEATURE_NAMES
    action_convention = ACTION_CONVENTION
    observation_keys = {
        "state": "39 floats: hand xyz, gripper opening, objects' position and quaternion, the previous step's "
        "copy of those 18, goal xyz",
        "instruction": "what to do, one fixed English sentence per task",
        "images/corner": "128x128 RGB frame of the 'corner' camera (only when rendering)",
    }

    def splits(self) -> list[str]:
        return list(SPLITS)

    def tasks(self, split: str) -> list[str]:
        return list(SPLITS[self.check_split(split)])

    def make_env(self, *, render_images: bool = False) -> MetaWorldEnvironment:
        return MetaWorldEnvironment(render_images=render_images)

    def default_step_budget(self, task: str) -> int:
        return MAX_EPISODE_STEPS

    def expert(self) -> MetaWorldExpert:
        return MetaWorldExpert()

    def instruction(self, task: str) -> str | None:
        return INSTRUCTIONS.get(task)
