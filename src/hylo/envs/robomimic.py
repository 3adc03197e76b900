"""robomimic: the simulated tasks of robomimic's study (Lift, Can, Square) with a Franka Panda in robosuite 1.4.

The simulator is robosuite, which comes with `hylo[libero]` (robosuite 1.4.0 on MuJoCo 3); nothing of it is imported
until a split is listed or an env is built. The tasks are robosuite's own envs, built with the settings of robomimic's
datasets (their `env_meta`): a Panda with its default gripper, the OSC_POSE controller in delta mode (robosuite's
default gains, output scaled to 0.05 m and 0.5 rad), 20 Hz control, sparse reward, a hard reset (the model rebuilt)
at every episode. The step budget is the rollout horizon robomimic evaluates its proficient-human ("ph") datasets
with: 400 steps for each of the three.

An episode is placed by robosuite's own samplers (object position and yaw, the arm's joint noise, Lift's cube size),
which draw from numpy's global generator: it is seeded with the episode's seed for the reset and put back as it was
afterwards, so the same episode starts bit-identically in any process, after any other episode. Camera frames are
rendered (offscreen, EGL) only when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hylo.core.environment import Environment, VideoCamera
from hylo.core.errors import HyloError, SimulationDiverged, UnknownChoice
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs.benchmark import Benchmark, BenchmarkOption
from hylo.envs.libero import (
    ACTION_CONVENTION,
    CAMERAS,
    CONTROL_RATE_HZ,
    _import,
    checked_osc_action,
    offscreen_frame,
    osc_pose_spec,
    state_vector,
)
from hylo.envs.mujoco_watch import DivergenceWatch, route_mujoco_warnings
from hylo.envs.quiet import stdout_to_stderr
from hylo.envs.robomimic_expert import RobomimicExpert

INSTALL_HINT = "pip install 'hylo[libero]'"
ROBOSUITE_SERIES = "1.4."
"""The robosuite releases whose envs and controller configuration this module builds (1.5 changed both)."""

DEFAULT_IMAGE_SIZE = 84
"""robomimic's image datasets render both cameras at 84x84."""
SPLIT = "ph"


@dataclass(frozen=True, slots=True)
class RobomimicTask:
    """One task: robosuite's env name, the step budget, the instruction, and the object robosuite moves in it."""

    env_name: str
    budget: int
    instruction: str
    obj: str


TASKS: dict[str, RobomimicTask] = {
    "lift": RobomimicTask("Lift", 400, "lift the red cube off the table", "cube"),
    "can": RobomimicTask(
        "PickPlaceCan", 400, "pick up the can and place it in the bin compartment marked with a can", "Can"
    ),
    "square": RobomimicTask(
        "NutAssemblySquare", 400, "pick up the square nut and fit it onto the square peg", "SquareNut"
    ),
}
"""robomimic's task names → robosuite's env and the rollout horizon of robomimic's "ph" datasets."""

FEATURE_NAMES = (
    ("images/agentview", "observation.images.agentview"),
    ("images/wrist", "observation.images.wrist"),
    ("state", "observation.state"),
    ("instruction", "task"),
)
"""LeRobot has no robomimic env: each key gets the name LeRobot gives a key it does not know."""
PRIVILEGED_STATE = ("simulator", "object_poses", "object")
"""What `RobomimicEnvironment.privileged_state` answers."""


def robosuite_problem() -> str:
    """Why robosuite cannot serve here ('' when it can): missing, or not a 1.4 release."""
    try:
        robosuite = _import("robosuite")
    except ImportError as exc:
        return f"{INSTALL_HINT} ({exc})"
    version = str(getattr(robosuite, "__version__", "?"))
    if not version.startswith(ROBOSUITE_SERIES):
        return f"robosuite {ROBOSUITE_SERIES}x is needed, {version} is installed ({INSTALL_HINT} installs 1.4.0)"
    return ""


def checked_task(split: str, task: str) -> RobomimicTask:
    """The task `task` of `split`, or UnknownChoice naming what there is."""
    if split != SPLIT:
        raise UnknownChoice("robomimic split", split, [SPLIT])
    entry = TASKS.get(task)
    if entry is None:
        raise UnknownChoice(f"task of robomimic split {SPLIT!r}:", task, list(TASKS))
    return entry


class RobomimicEnvironment(Environment):
    """Any robomimic task, chosen by `task.task` (`lift`, `can`, `square`) on reset.

    Observation: `state` (8 float64: end-effector position, its orientation as axis-angle, the two finger joints, as
    LIBERO's), `instruction`, and — only while `render_images` is on — `images/agentview` and `images/wrist`
    (image_size x image_size x 3 uint8, upright). Action: 7 floats in [-1, 1], OSC_POSE end-effector deltas (position,
    axis-angle rotation) and the gripper (-1 open, +1 close), at 20 Hz. Success is robosuite's `_check_success()`,
    checked after every step. Each task's simulator is built on first use and kept. `mjdata()` is the current
    `mujoco.MjData`.
    """

    render_images: bool = False  # `Environment.render_images`, as a plain attribute

    def __init__(self, render_images: bool = False, image_size: int = DEFAULT_IMAGE_SIZE) -> None:
        # per task: see RobomimicBenchmark.default_step_budget
        self._spec = osc_pose_spec("robomimic", render_images=render_images, image_size=image_size,
                                   feature_names=FEATURE_NAMES)  # fmt: skip
        self.render_images = render_images
        self.image_size = image_size
        self._sims: dict[str, Any] = {}  # robosuite env by task name
        self._sim: Any = None
        self._task: RobomimicTask | None = None
        self._obs: Observation | None = None
        self._gripper = 0.0
        self._object: np.ndarray[Any, Any] = np.zeros(0)
        route_mujoco_warnings()
        self._watch = DivergenceWatch(self.mjdata)

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True, privileged_state=True)

    def reset(self, task: TaskInstance) -> Observation:
        entry = checked_task(task.split, task.task)
        sim = self._sims.get(task.task)
        if sim is None:
            sim = self._sims[task.task] = self._build(entry)
        self._sim, self._task, self._obs = sim, entry, None
        outside = np.random.get_state()
        try:
            # robosuite draws the placements, the arm's joint noise and (Lift) the cube's size from numpy's global
            # generator at every hard reset: seeded here, the episode starts the same whatever ran before.
            np.random.seed(task.seed)
            with stdout_to_stderr():
                raw = sim.reset()
        finally:
            np.random.set_state(outside)  # whatever else draws from it is left as it was
        self._gripper = 0.0  # robosuite's gripper moves by the command's sign: 0 leaves it as the reset did
        self._obs = self._observation(raw)
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._sim is None or self._obs is None:
            raise RuntimeError("step before the first reset")
        array = checked_osc_action(action, "robomimic")
        before = self._watch.counts()
        raw, _, _, _ = self._sim.step(array)
        self._watch.check(before)
        success = bool(self._sim._check_success())
        self._gripper = min(1.0, max(-1.0, float(array[6])))
        self._obs = self._observation(raw)
        return StepResult(self._obs, float(success), success, False, success)

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def hold_action(self) -> Any:
        """Keep the arm where it is and the gripper as last commanded (robosuite moves the fingers by the command's
        sign: the last command's sign keeps them at the end they went to; before any, 0 leaves them half open)."""
        return np.array([0.0] * 6 + [self._gripper], np.float32)

    def privileged_state(self, name: str) -> Any:
        """What a scripted expert of the current task may read (each read is traced):

        - `simulator`: the task's robosuite env itself (`sim` is the MuJoCo binding), which the benchmark's `expert`
          plans on
        - `object_poses`: the task's object by robosuite's name (`cube`, `Can`, `SquareNut`) → 7 floats, world
          position xyz and orientation quaternion (w, x, y, z), from `sim.data.body_xpos` / `body_xquat`
        - `object`: robomimic's low-dimensional `object` observation of the task (robosuite's `object-state`: Lift
          10 floats, Can and Square 14)
        """
        if self._sim is None or self._task is None:
            raise RuntimeError("privileged_state before the first reset")
        if name == "simulator":
            return self._sim
        if name == "object_poses":
            body = _object_body(self._sim, self._task.obj)
            data = self._sim.sim.data
            return {self._task.obj: np.concatenate([data.body_xpos[body], data.body_xquat[body]]).astype(np.float64)}
        if name == "object":
            return self._object.copy()
        raise KeyError(f"robomimic exposes no privileged state {name!r}; it has {list(PRIVILEGED_STATE)}")

    def mjdata(self) -> Any:
        """The current task's `mujoco.MjData` (for inspection, or to inject faults in tests)."""
        if self._sim is None:
            raise RuntimeError("no simulator before the first reset")
        return self._sim.sim.data._data

    @property
    def video_camera(self) -> VideoCamera:
        return self

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
        """The current scene from the front camera (`images/agentview`) at `size` (width, height; None: the
        observation's), upright, for a video alone: it renders whether or not the observations carry frames."""
        if self._sim is None:
            raise RuntimeError("video_frame before the first reset")
        width, height = size if size is not None else (self.image_size, self.image_size)
        return self._render(next(iter(CAMERAS.values())), width, height)

    def close(self) -> None:
        sims, self._sims = list(self._sims.values()), {}
        for sim in sims:
            sim.close()
        self._sim = self._task = self._obs = None

    def _build(self, entry: RobomimicTask) -> Any:
        robosuite = _import("robosuite")
        controllers = _import("robosuite.controllers")
        with stdout_to_stderr():
            return robosuite.make(
                entry.env_name,
                robots="Panda",
                controller_configs=controllers.load_controller_config(default_controller="OSC_POSE"),
                control_freq=int(CONTROL_RATE_HZ),
                reward_shaping=False,
                use_object_obs=True,
                use_camera_obs=False,  # frames are rendered here, only when asked for
                has_renderer=False,
                has_offscreen_renderer=False,
                ignore_done=True,  # the step budget ends an episode, not robosuite's horizon
                hard_reset=True,
                camera_heights=self.image_size,
                camera_widths=self.image_size,
            )

    def _observation(self, raw: dict[str, Any]) -> Observation:
        assert self._task is not None
        state = state_vector(raw)
        if not np.isfinite(state).all():
            raise SimulationDiverged("non-finite state", "MuJoCo")
        self._object = np.asarray(raw["object-state"], np.float64)
        obs = Observation(state=state, instruction=self._task.instruction)
        if self.render_images:
            obs["images"] = {
                key: self._render(camera, self.image_size, self.image_size) for key, camera in CAMERAS.items()
            }
        return obs

    def _render(self, camera: str, width: int, height: int) -> np.ndarray[Any, Any]:
        frame = offscreen_frame(self._sim.sim, camera, width, height)
        return np.ascontiguousarray(frame[::-1])  # OpenGL's rows run bottom-up: flipped upright, as robomimic does


def _object_body(sim: Any, obj: str) -> int:
    """The MuJoCo body id of the task's object (robosuite names it by the object: `cube_main`, `Can_main`, ...)."""
    body: int = sim.sim.model.body_name2id(f"{obj}_main")
    return body


class RobomimicBenchmark(Benchmark):
    """robomimic's three single-arm simulated tasks (Lift, Can, Square) with robomimic's settings, one split `ph`."""

    name = "robomimic"
    display_name = "robomimic"
    default_split = SPLIT
    default_per_step_budget_sec = 0.5
    typical_reset_sec = 4.0  # hard reset + both 84x84 frames (a new render context per model): 1.2-1.4 s on two
    # cores beside other work, 0.45 s state-only (three times that with two CPU-bound processes beside it)
    typical_step_sec = 0.4  # both cameras rendered on the CPU: 0.11-0.16 s at 84x84, 0.17-0.2 s at 256x256 (6.5-9 ms
    # state-only)
    typical_build_sec = 5.0  # a first reset's extra (robosuite imported, the task's env built): 0.4-1.4 s
    env_ram_gb = 1.6  # one env, its three tasks' simulators built: 0.83 GB resident state-only, 1.52 GB rendering
    result_packages = ("robosuite", "mujoco")  # a run on other versions is another run
    feature_names = FEATURE_NAMES
    action_convention = ACTION_CONVENTION
    observation_keys = {
        "state": "8 floats: end-effector position xyz, end-effector orientation as axis-angle (3), gripper finger "
        "positions (2), as LIBERO's",
        "instruction": "one fixed English sentence per task",
        "images/agentview": "84x84 RGB frame of the front camera (robomimic's agentview), upright (only when "
        "rendering)",
        "images/wrist": "84x84 RGB frame of the wrist camera (robot0_eye_in_hand), upright (only when rendering)",
    }
    request_options = (BenchmarkOption.integer("image_size", 16, 1024, "the cameras' square frame side in pixels"),)

    def __init__(self, image_size: int = DEFAULT_IMAGE_SIZE) -> None:
        self.image_size = image_size

    def available(self) -> tuple[bool, str]:
        problem = robosuite_problem()
        return not problem, problem

    def splits(self) -> list[str]:
        self._require()
        return [SPLIT]

    def tasks(self, split: str) -> list[str]:
        self.check_split(split)
        return list(TASKS)

    def make_env(self, *, render_images: bool = False) -> RobomimicEnvironment:
        self._require()
        return RobomimicEnvironment(render_images=render_images, image_size=self.image_size)

    def expert(self) -> Any:
        """A scripted controller that reads the simulator (privileged): grasp, carry, place."""
        return RobomimicExpert()

    def default_step_budget(self, task: str) -> int:
        return checked_task(SPLIT, task).budget

    def instruction(self, task: str) -> str | None:
        entry = TASKS.get(task)
        return entry.instruction if entry is not None else None

    def _require(self) -> None:
        problem = robosuite_problem()
        if problem:
            raise HyloError(f"robomimic cannot run: {problem}")
