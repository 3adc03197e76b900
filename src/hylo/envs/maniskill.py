"""ManiSkill3 (`pip install 'hylo[maniskill]'`, mani-skill 3.0.1 on SAPIEN 3): its tasks that run offline, simulated
on the CPU (`sim_backend="physx_cpu"`), one env per worker.

- **Tasks** by their ManiSkill id, in splits by family (`SPLITS`): `tabletop` (Panda and SO-100 arms), `dexterous`
  (hands and TriFinger), `control` (the DeepMind-control ports), `humanoid`. A task whose assets are fetched at run
  time (YCB objects, PartNet, scene datasets, robots not shipped in the package) is in no split: `hylo list tasks
  maniskill` names it with the command that fetches its assets (`UNAVAILABLE`), and hylo never downloads anything
  or reads stdin (ManiSkill would prompt for the download).
- **Episodes**: the episode's seed is `reset(seed=)`'s, which seeds ManiSkill's episode generators and torch's
  inside its `_initialize_episode`: the same seed is the same episode, bit for bit, whatever ran before in the env
  and however many workers run. One ManiSkill env per task is built on first use and kept.
- **Observations**: `state`, ManiSkill's flat state vector (`obs_mode="state"`: the robot's proprioception, then
  the task's extras: the end-effector pose, object poses, goals; its size is the task's), `instruction` (one
  English sentence per task), and with `render_images` each of the task's cameras as `images/<camera>` (HWC uint8,
  `image_size` square; `obs_mode="state+rgb"`, the state unchanged). Rendering and even building a scene need a
  Vulkan device (`hylo.envs.maniskill_setup` provides one on Debian 12); without one the benchmark says so.
- **Actions** in the control mode chosen with `-E control_mode=` (the task's own default when not given: joint
  deltas for the Panda tasks). `ACTION_CONVENTIONS` declares the Panda's: normalised to [-1, 1] as ManiSkill does,
  the gripper's last number opens it as it grows (-1: closed, +1: open).
- **Success** is the task's own `info["success"]`; a task's `info["fail"]` ends the episode as a failure; its
  registered `max_episode_steps` is the step budget. A PhysX error or a non-finite state is `SimulationDiverged`
  (infra_invalid).
- **Expert**: mani-skill's motion-planning solutions (`hylo.envs.maniskill_expert`), in `pd_joint_pos`.

An env's spaces are its current task's (state sizes differ between tasks): before its first reset, the spec is that
of `DEFAULT_TASK`.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import string
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.environment import Environment
from hylo.core.errors import HyloError, SimulationDiverged, UnknownChoice
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs.actions import finite_vector
from hylo.envs.benchmark import Benchmark, BenchmarkOption
from hylo.envs.maniskill_expert import ManiSkillExpert
from hylo.envs.maniskill_robots import ACTION_CONVENTIONS, PANDAS
from hylo.envs.maniskill_setup import COMMAND as SETUP_COMMAND
from hylo.envs.maniskill_setup import ICD_FILE

INSTALL_HINT = "pip install 'hylo[maniskill]'"
DEFAULT_TASK = "PickCube-v1"
SIM_BACKEND = "physx_cpu"


@dataclass(frozen=True, slots=True)
class Task:
    split: str
    instruction: str
    budget: int
    """The task's registered `max_episode_steps` (ManiSkill's RL horizon): known without importing the package, so
    listing the benchmark stays instant; a test checks it against the registry."""


TASKS: dict[str, Task] = {
    # tabletop: the Panda (and SO-100) manipulation tasks whose assets ship in the package
    "PickCube-v1": Task("tabletop", "pick up the red cube and move it to the green goal", 50),
    "PushCube-v1": Task("tabletop", "push the cube to the red and white target on the table", 50),
    "PullCube-v1": Task("tabletop", "pull the cube back to the red and white target on the table", 50),
    "PokeCube-v1": Task("tabletop", "use the peg to push the cube to the goal", 50),
    "StackCube-v1": Task("tabletop", "stack the red cube on top of the green cube", 50),
    "StackPyramid-v1": Task("tabletop", "stack the three cubes into a pyramid", 250),
    "LiftPegUpright-v1": Task("tabletop", "lift the peg lying on the table and stand it upright", 50),
    "PegInsertionSide-v1": Task("tabletop", "pick up the peg and insert it sideways into the hole of the box", 100),
    "PlugCharger-v1": Task("tabletop", "pick up the charger and plug it into the receptacle", 200),
    "PlaceSphere-v1": Task("tabletop", "pick up the ball and place it in the bin", 50),
    "PullCubeTool-v1": Task("tabletop", "use the tool to pull the cube within reach", 100),
    "RollBall-v1": Task("tabletop", "push the ball so that it rolls to the goal region", 80),
    "PushT-v1": Task("tabletop", "push the T-shaped block onto the T-shaped target", 100),
    "TwoRobotPickCube-v1": Task("tabletop", "with two arms, pass the cube over and lift it to the goal", 100),
    "TwoRobotStackCube-v1": Task("tabletop", "with two arms, stack one cube on the other", 100),
    "DrawTriangle-v1": Task("tabletop", "draw the triangle on the canvas with the stick", 300),
    "TableTopFreeDraw-v1": Task("tabletop", "draw freely on the table with the stick", 1000),
    "SO100GraspCube-v1": Task("tabletop", "grasp the cube with the SO-100 arm and lift it", 64),
    "PickCubeSO100-v1": Task("tabletop", "pick up the cube with the SO-100 arm and move it to the goal", 50),
    "FMBAssembly1Easy-v1": Task("tabletop", "insert the peg into the assembly board", 500),
    # dexterous: hands and TriFinger
    "RotateValveLevel0-v1": Task("dexterous", "turn the valve with the three-fingered hand", 80),
    "RotateValveLevel1-v1": Task("dexterous", "turn the valve with the three-fingered hand", 150),
    "RotateValveLevel2-v1": Task("dexterous", "turn the valve with the three-fingered hand", 150),
    "RotateValveLevel3-v1": Task("dexterous", "turn the valve with the three-fingered hand", 150),
    "RotateValveLevel4-v1": Task("dexterous", "turn the valve with the three-fingered hand", 300),
    "RotateSingleObjectInHandLevel0-v1": Task("dexterous", "rotate the object in the hand", 300),
    "RotateSingleObjectInHandLevel1-v1": Task("dexterous", "rotate the object in the hand", 300),
    "TriFingerRotateCubeLevel0-v1": Task("dexterous", "rotate the cube to the goal pose with the three fingers", 250),
    "TriFingerRotateCubeLevel1-v1": Task("dexterous", "rotate the cube to the goal pose with the three fingers", 250),
    "TriFingerRotateCubeLevel2-v1": Task("dexterous", "rotate the cube to the goal pose with the three fingers", 250),
    "TriFingerRotateCubeLevel3-v1": Task("dexterous", "rotate the cube to the goal pose with the three fingers", 250),
    "TriFingerRotateCubeLevel4-v1": Task("dexterous", "rotate the cube to the goal pose with the three fingers", 250),
    # control: the DeepMind-control ports
    "MS-CartpoleBalance-v1": Task("control", "keep the pole balanced upright", 1000),
    "MS-CartpoleSwingUp-v1": Task("control", "swing the pole up and balance it", 1000),
    "MS-HopperStand-v1": Task("control", "stand the hopper upright", 600),
    "MS-HopperHop-v1": Task("control", "make the hopper hop forward", 600),
    "MS-AntWalk-v1": Task("control", "make the ant walk forward", 1000),
    "MS-AntRun-v1": Task("control", "make the ant run forward", 1000),
    # humanoid
    "MS-HumanoidStand-v1": Task("humanoid", "stand the humanoid upright", 1000),
    "MS-HumanoidWalk-v1": Task("humanoid", "make the humanoid walk forward", 1000),
    "MS-HumanoidRun-v1": Task("humanoid", "make the humanoid run forward", 1000),
    "UnitreeG1Stand-v1": Task("humanoid", "keep the Unitree G1 standing", 1000),
    "UnitreeG1PlaceAppleInBowl-v1": Task("humanoid", "pick up the apple and place it in the bowl", 100),
    "UnitreeG1TransportBox-v1": Task("humanoid", "carry the box from one table to the other", 100),
}
"""The tasks that build and step offline (measured on mani-skill 3.0.1), with their split and instruction: 44 of
the 45 that do (`Empty-v1`, a scene with nothing to do, is left out)."""

SPLITS: dict[str, list[str]] = {}
for _name, _task in TASKS.items():
    SPLITS.setdefault(_task.split, []).append(_name)

_FETCH = "python -m mani_skill.utils.download_asset {}"
UNAVAILABLE: dict[str, str] = {
    uid: f"{why}; fetch them with `{_FETCH.format(uid)}`"
    for uid, why in {
        "PickSingleYCB-v1": "needs the YCB objects",
        "PickClutterYCB-v1": "needs the YCB objects",
        "RotateSingleObjectInHandLevel2-v1": "needs the YCB objects",
        "RotateSingleObjectInHandLevel3-v1": "needs the YCB objects",
        "InsertFlower-v1": "needs its flower and vase models",
        "AssemblingKits-v1": "needs the assembling-kits models",
        "TurnFaucet-v1": "needs PartNet-Mobility's faucets",
        "OpenCabinetDoor-v1": "needs PartNet-Mobility's cabinets",
        "OpenCabinetDrawer-v1": "needs PartNet-Mobility's cabinets",
        "PutCarrotOnPlateInScene-v1": "needs the Bridge (SimplerEnv) scene",
        "PutEggplantInBasketScene-v1": "needs the Bridge (SimplerEnv) scene",
        "StackGreenCubeOnYellowCubeBakedTexInScene-v1": "needs the Bridge (SimplerEnv) scene",
        "PutSpoonOnTableClothInScene-v1": "needs the Bridge (SimplerEnv) scene",
        "RoboCasaKitchen-v1": "needs the RoboCasa kitchens",
        "SceneManipulation-v1": "needs the ReplicaCAD scenes",
        "ReplicaCAD_SceneManipulation-v1": "needs the ReplicaCAD scenes",
        "ReplicaCADTidyHouseTrain_SceneManipulation-v1": "needs the ReplicaCAD rearrangement scenes",
        "ReplicaCADTidyHouseVal_SceneManipulation-v1": "needs the ReplicaCAD rearrangement scenes",
        "ReplicaCADPrepareGroceriesTrain_SceneManipulation-v1": "needs the ReplicaCAD rearrangement scenes",
        "ReplicaCADPrepareGroceriesVal_SceneManipulation-v1": "needs the ReplicaCAD rearrangement scenes",
        "ReplicaCADSetTableTrain_SceneManipulation-v1": "needs the ReplicaCAD rearrangement scenes",
        "ReplicaCADSetTableVal_SceneManipulation-v1": "needs the ReplicaCAD rearrangement scenes",
        "ArchitecTHOR_SceneManipulation-v1": "needs the AI2-THOR scenes",
        "UnitreeH1Stand-v1": "needs the Unitree H1 robot",
        "UnitreeGo2-Reach-v1": "needs the Unitree Go2 robot",
        "AnymalC-Reach-v1": "needs the ANYmal C robot",
        "AnymalC-Spin-v1": "needs the ANYmal C robot",
        "PickCubeWidowXAI-v1": "needs the WidowX AI robot",
    }.items()
}
UNAVAILABLE["DrawSVG-v1"] = "needs svgpathtools (`pip install svgpathtools`)"
"""Registered tasks that cannot run offline from the package alone → why, and the command that fetches what they
need (hylo never fetches it: a run does not download). Running them is not supported here even once fetched."""

FEATURE_NAMES = (("images/*", "observation.images.*"), ("state", "observation.state"), ("instruction", "task"))


def use_private_vulkan() -> None:
    """Point the Vulkan loader at the driver `hylo.envs.maniskill_setup` installed, unless `VK_ICD_FILENAMES` (or
    its newer name) is already set. Before SAPIEN creates its first Vulkan instance."""
    if os.environ.get("VK_ICD_FILENAMES") or os.environ.get("VK_DRIVER_FILES"):
        return
    if ICD_FILE.is_file():
        os.environ["VK_ICD_FILENAMES"] = str(ICD_FILE)


def _mani_skill() -> Any:
    """`gymnasium` with ManiSkill's envs registered (ImportError when mani-skill is not installed)."""
    use_private_vulkan()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Failed to find system libvulkan", UserWarning)
        importlib.import_module("mani_skill.envs")
    for name in ("mani_skill", "mani_skill "):  # its logger is named with a space
        logging.getLogger(name).setLevel(logging.ERROR)  # the CUDA-render fallback warns at every env
    return importlib.import_module("mani_skill.utils.registration").REGISTERED_ENVS


class VulkanMissing(HyloError):
    """SAPIEN found no Vulkan device: ManiSkill cannot build a scene."""


def _build(uid: str, *, images: bool, control_mode: str | None, image_size: int) -> Any:
    registered = _mani_skill()
    spec = registered[uid]
    kwargs: dict[str, Any] = {
        "obs_mode": "state+rgb" if images else "state",
        "sim_backend": SIM_BACKEND,
        "render_backend": "cpu",
        "num_envs": 1,
    }
    if control_mode is not None:
        kwargs["control_mode"] = control_mode
    if images:
        kwargs["sensor_configs"] = {"width": image_size, "height": image_size}
    try:
        return spec.make(**kwargs)
    except EOFError as exc:  # ManiSkill asked on stdin whether to download assets
        raise HyloError(f"ManiSkill task {uid} needs assets it would download: hylo does not; "
                        f"{_FETCH.format(uid)} fetches them") from exc  # fmt: skip
    except RuntimeError as exc:
        if "rendering device" in str(exc) or "ErrorIncompatibleDriver" in str(exc) or "physical device" in str(exc):
            raise VulkanMissing(
                f"ManiSkill needs a Vulkan device, even for state observations, and SAPIEN found none ({exc}): "
                f"run `{SETUP_COMMAND}` (Debian 12: Mesa 25's lavapipe, into this environment), install a GPU "
                "driver or Mesa >= 23's mesa-vulkan-drivers, or set VK_ICD_FILENAMES"
            ) from exc
        raise


def _numpy(value: Any) -> np.ndarray[Any, Any]:
    array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    return array[0] if array.ndim >= 1 and array.shape[0] == 1 else array


class ManiSkillEnvironment(Environment):
    """Any offline ManiSkill3 task, chosen by `task.task` on reset; see the module's doc for the observation."""

    render_images: bool = False  # `Environment.render_images`, as a plain attribute

    def __init__(self, render_images: bool = False, control_mode: str | None = None, image_size: int = 128) -> None:
        if image_size < 16 or image_size > 1024:
            raise ValueError(f"image_size must be in 16..1024, got {image_size}")
        self.render_images = render_images
        self.control_mode = control_mode
        self.image_size = image_size
        self._envs: dict[tuple[str, bool], Any] = {}
        self._specs: dict[tuple[str, bool], EnvSpec] = {}
        self._env: Any = None
        self._key: tuple[str, bool] | None = None
        self._task: TaskInstance | None = None
        self._obs: Observation | None = None
        self._gripper = 1.0
        self._steps = 0

    # -- the spec of the current task ---------------------------------------------------------------------------

    @property
    def spec(self) -> EnvSpec:
        key = self._key if self._key is not None else (DEFAULT_TASK, self.render_images)
        if key not in self._specs:
            self._env_for(*key)
        return self._specs[key]

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True, privileged_state=True)

    def _env_for(self, uid: str, images: bool) -> Any:
        key = (uid, images)
        env = self._envs.get(key)
        if env is None:
            env = self._envs[key] = _build(uid, images=images, control_mode=self.control_mode,
                                           image_size=self.image_size)  # fmt: skip
            self._specs[key] = self._spec_of(uid, env, images)
        return env

    def _spec_of(self, uid: str, env: Any, images: bool) -> EnvSpec:
        base = env.unwrapped
        obs, _ = env.reset(seed=0)
        state = self._state(obs)
        obs_spaces: dict[str, spaces.Space[Any]] = {
            "state": spaces.Box(-np.inf, np.inf, state.shape, np.float32),
            "instruction": spaces.Text(200, charset=string.printable),
        }
        if images:
            obs_spaces["images"] = spaces.Dict(
                {name: spaces.Box(0, 255, (self.image_size, self.image_size, 3), np.uint8) for name in
                 obs["sensor_data"]}
            )  # fmt: skip
        action = env.action_space
        box = spaces.Box(_numpy(action.low).astype(np.float32), _numpy(action.high).astype(np.float32))
        robot = type(base.agent).__name__
        convention = ACTION_CONVENTIONS.get(base.control_mode) if robot in PANDAS else None
        return EnvSpec(
            observation_space=spaces.Dict(obs_spaces),
            action_space=box,
            control_rate_hz=float(base.control_freq),
            max_episode_steps=_mani_skill()[uid].max_episode_steps,
            name=f"maniskill/{uid}",
            feature_names=FEATURE_NAMES,
            action_convention=convention,
        )

    # -- the episode ----------------------------------------------------------------------------------------------

    def reset(self, task: TaskInstance) -> Observation:
        if task.task not in TASKS:
            raise UnknownChoice("ManiSkill task", task.task, sorted(TASKS))
        key = (task.task, self.render_images)
        env = self._env_for(*key)
        try:
            obs, _ = env.reset(seed=task.seed)
        except RuntimeError as exc:
            raise SimulationDiverged(f"ManiSkill reset failed: {exc}") from exc
        self._env, self._key, self._task = env, key, task
        self._steps = 0
        self._gripper = 1.0
        self._obs = self._observation(obs)
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._env is None or self._obs is None or self._key is None:
            raise RuntimeError("step before the first reset")
        space = self._specs[self._key].action_space
        size = int(space.shape[0]) if space.shape else 0
        array = finite_vector(action, size, f"ManiSkill {self._key[0]} in {self._env.unwrapped.control_mode} takes "
                                            f"({size},)")  # fmt: skip
        try:
            obs, reward, terminated, _, info = self._env.step(array[None].astype(np.float32))
        except RuntimeError as exc:
            raise SimulationDiverged(f"PhysX: {exc}") from exc
        self._steps += 1
        self._gripper = float(array[-1])
        self._obs = self._observation(obs)
        if not np.isfinite(self._obs["state"]).all():
            raise SimulationDiverged(f"non-finite state after step {self._steps} of {self._key[0]}")
        small = _scalars(info)
        success = bool(small.get("success", 0.0))
        failed = bool(small.get("fail", 0.0))
        return StepResult(self._obs, _scalar(reward), bool(_scalar(terminated)) or failed, False, success, small)

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def hold_action(self) -> Any:
        """Stay where the robot is: no displacement in the delta modes, the current joint positions in
        `pd_joint_pos`; the gripper as last commanded."""
        if self._env is None or self._key is None:
            raise RuntimeError("hold_action before the first reset")
        space = self._specs[self._key].action_space
        size = int(space.shape[0]) if space.shape else 0
        base = self._env.unwrapped
        if base.control_mode == "pd_joint_pos":
            qpos = _numpy(base.agent.robot.get_qpos())[: size - 1]
            return np.concatenate([qpos, [self._gripper]]).astype(np.float32)
        action = np.zeros(size, np.float32)
        if type(base.agent).__name__ in PANDAS:
            action[-1] = self._gripper
        return action

    def privileged_state(self, name: str) -> Any:
        """`env`: the task's ManiSkill env (gymnasium), which the motion planner reads."""
        if name != "env":
            raise KeyError(f"ManiSkill exposes privileged state 'env', not {name!r}")
        if self._env is None:
            raise RuntimeError("privileged_state before the first reset")
        return self._env

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._env = self._obs = self._task = None

    def _state(self, obs: Any) -> np.ndarray[Any, Any]:
        raw = obs["state"] if isinstance(obs, dict) else obs
        return _numpy(raw).astype(np.float32)

    def _observation(self, obs: Any) -> Observation:
        assert self._key is not None
        result = Observation(state=self._state(obs), instruction=TASKS[self._key[0]].instruction)
        if self.render_images:
            result["images"] = {name: np.ascontiguousarray(_numpy(data["rgb"]))
                                for name, data in obs["sensor_data"].items()}  # fmt: skip
        return result


def _scalar(value: Any) -> float:
    """A one-element tensor (or number) as a float."""
    return float(value.item() if hasattr(value, "item") else value)


def _scalars(info: dict[str, Any]) -> dict[str, float]:
    """The one-element entries of a step's info as floats (ManiSkill's are batched tensors of one env)."""
    out: dict[str, float] = {}
    for key, value in info.items():
        numel = getattr(value, "numel", None)
        if numel is not None:
            if numel() == 1:
                out[key] = float(value.item())
        elif isinstance(value, (bool, int, float, np.number)):
            out[key] = float(value)
    return out


class ManiSkillBenchmark(Benchmark):
    """ManiSkill3's offline tasks in four splits, CPU-simulated; see the module's doc."""

    name = "maniskill"
    display_name = "ManiSkill3"
    default_split = "tabletop"
    default_per_step_budget_sec = 0.2
    typical_reset_sec = 0.2  # PickCube with a 128x128 camera, lavapipe on 2 cores: 0.095 s quiet (9 ms state-only)
    typical_step_sec = 0.2  # 0.092 s quiet with the camera, 3.5 ms state-only
    typical_build_sec = 20.0  # the scene built and the renderer's shaders compiled: 14 s quiet (0.8 s state-only)
    result_packages = ("mani-skill", "sapien")
    feature_names = FEATURE_NAMES
    action_convention = ACTION_CONVENTIONS["pd_joint_delta_pos"]
    observation_keys = {
        "state": "ManiSkill's flat state (obs_mode 'state'): the robot's joint positions and velocities, then the "
        "task's extras (end-effector pose, object poses, goal); its size is the task's",
        "instruction": "what to do, one fixed English sentence per task",
        "images/<camera>": "each of the task's cameras (e.g. base_camera), RGB, image_size square (only when "
        "rendering)",
    }
    request_options = (
        BenchmarkOption.choice("control_mode", tuple(ACTION_CONVENTIONS), "the Panda's control mode"),
        BenchmarkOption.integer("image_size", 16, 1024, "the cameras' square frame side in pixels"),
    )

    def __init__(self, control_mode: str | None = None, image_size: int = 128) -> None:
        self.control_mode = control_mode
        self.image_size = image_size

    def available(self) -> tuple[bool, str]:
        """Whether mani-skill is installed, found without importing it (torch and SAPIEN take seconds to load)."""
        if importlib.util.find_spec("mani_skill") is None:
            return False, f"{INSTALL_HINT} (no module named 'mani_skill')"
        return True, ""

    def splits(self) -> list[str]:
        return list(SPLITS)

    def unavailable_tasks(self) -> dict[str, str]:
        return dict(UNAVAILABLE)

    def check_tasks(self, split: str, tasks: Sequence[str] | None) -> list[str]:
        for task in tasks or ():
            if task in UNAVAILABLE:
                raise HyloError(f"ManiSkill task {task} cannot run here: {UNAVAILABLE[task]}")
        return super().check_tasks(split, tasks)

    def tasks(self, split: str) -> list[str]:
        return list(SPLITS[self.check_split(split)])

    def make_env(self, *, render_images: bool = False) -> ManiSkillEnvironment:
        self._require()
        return ManiSkillEnvironment(render_images, self.control_mode, self.image_size)

    def default_step_budget(self, task: str) -> int:
        entry = TASKS.get(task)
        if entry is None:
            raise UnknownChoice("ManiSkill task", task, sorted(TASKS))
        return entry.budget

    def instruction(self, task: str) -> str | None:
        entry = TASKS.get(task)
        return entry.instruction if entry is not None else None

    def expert(self) -> Any:
        """mani-skill's motion-planning solutions, in `pd_joint_pos` (`-E control_mode=pd_joint_pos`)."""
        return ManiSkillExpert()

    def _require(self) -> None:
        available, why = self.available()
        if not available:
            raise HyloError(f"ManiSkill3 is not installed: {why}")
