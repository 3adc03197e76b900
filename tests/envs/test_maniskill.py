"""ManiSkill3 (`hylo[maniskill]`): the offline tasks of each family, seeds, images, the spec that follows the task,
the motion-planning expert in its planner process, and what is refused or reported when something is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mani_skill")

from hylo.core.errors import HyloError, InvalidAction
from hylo.core.status import EpisodeStatus
from hylo.envs.maniskill import (
    TASKS,
    UNAVAILABLE,
    ManiSkillBenchmark,
    ManiSkillEnvironment,
)
from hylo.envs.maniskill_planner import PlannerError, PlannerProcess
from hylo.envs.maniskill_setup import PLANNER_DIR, planner_installed, vulkan_installed
from hylo.eval import EvalSpec, evaluate

BENCH = ManiSkillBenchmark()
if not BENCH.available()[0]:
    pytest.skip(f"ManiSkill3 cannot run here: {BENCH.available()[1]}", allow_module_level=True)


@pytest.fixture(scope="module")
def env() -> Any:
    with ManiSkillEnvironment() as built:
        yield built


def _run_states(env: ManiSkillEnvironment, task: str, index: int, steps: int = 5) -> np.ndarray[Any, Any]:
    obs = env.reset(BENCH.task_instance(TASKS[task].split, task, index))
    states = [obs["state"]]
    rng = np.random.default_rng(index)
    size = int(env.spec.action_space.shape[0])
    for _ in range(steps):
        states.append(env.step(rng.uniform(-1, 1, size).astype(np.float32)).obs["state"])
    return np.stack(states)


def test_the_setup_installed_the_vulkan_driver_and_the_planners_numpy_into_the_environment() -> None:
    assert vulkan_installed() and planner_installed()
    assert Path(sys.prefix) in PLANNER_DIR.parents  # beside the environment's packages, not in them
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_splits_group_the_offline_tasks_and_the_others_are_named_with_the_command_that_fetches_them() -> None:
    assert BENCH.splits() == ["tabletop", "dexterous", "control", "humanoid"]
    assert {"PickCube-v1", "StackCube-v1", "LiftPegUpright-v1", "PushT-v1"} <= set(BENCH.tasks("tabletop"))
    assert len(TASKS) == 44 and not set(TASKS) & set(UNAVAILABLE)
    assert "python -m mani_skill.utils.download_asset PickSingleYCB-v1" in BENCH.unavailable_tasks()["PickSingleYCB-v1"]
    with pytest.raises(HyloError, match="PickSingleYCB-v1 cannot run here: needs the YCB objects"):
        BENCH.check_tasks("tabletop", ["PickSingleYCB-v1"])
    assert BENCH.default_step_budget("PickCube-v1") == 50  # the task's registered budget
    assert BENCH.instruction("StackCube-v1") == "stack the red cube on top of the green cube"


def test_every_tasks_budget_is_its_registered_max_episode_steps_known_without_the_package() -> None:
    import mani_skill.envs  # noqa: F401  (registers the tasks)
    from mani_skill.utils.registration import REGISTERED_ENVS

    assert {task: BENCH.default_step_budget(task) for task in TASKS} == {
        task: REGISTERED_ENVS[task].max_episode_steps for task in TASKS
    }
    code = "import sys; from hylo.envs.maniskill import ManiSkillBenchmark\n"
    code += "ManiSkillBenchmark().default_step_budget('PickCube-v1')\n"
    code += "print(sorted(m for m in ('torch', 'sapien', 'mani_skill') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("task", "state", "action"),
    [
        ("PickCube-v1", 42, 8),  # tabletop: the Panda
        ("RotateValveLevel0-v1", 51, 9),  # dexterous: D'Claw
        ("MS-CartpoleBalance-v1", 10, 1),  # control
        ("UnitreeG1Stand-v1", 74, 37),  # humanoid
    ],
)
def test_one_short_episode_of_each_family_runs_state_only(
    env: ManiSkillEnvironment, task: str, state: int, action: int
) -> None:
    states = _run_states(env, task, 0, steps=3)
    assert states.shape == (4, state) and states.dtype == np.float32 and np.isfinite(states).all()
    assert env.spec.action_space.shape == (action,) and env.spec.name == f"maniskill/{task}"
    assert env.spec.max_episode_steps == BENCH.default_step_budget(task)
    assert env.observe()["instruction"] == TASKS[task].instruction


def test_a_seed_is_one_episode_whatever_ran_before_and_another_seed_another(env: ManiSkillEnvironment) -> None:
    first = _run_states(env, "PickCube-v1", 3)
    _run_states(env, "PushCube-v1", 1)
    _run_states(env, "PickCube-v1", 5)
    again = _run_states(env, "PickCube-v1", 3)
    np.testing.assert_array_equal(again, first)
    other = _run_states(env, "PickCube-v1", 4)
    assert np.abs(other[0] - first[0]).max() > 1e-3  # the cube and the goal are placed elsewhere


def test_a_bad_action_is_refused_naming_the_size_the_task_takes(env: ManiSkillEnvironment) -> None:
    env.reset(BENCH.task_instance("tabletop", "PickCube-v1", 0))
    with pytest.raises(InvalidAction, match=r"shape \(3,\), ManiSkill PickCube-v1 in pd_joint_delta_pos takes \(8,\)"):
        env.step(np.zeros(3, np.float32))
    with pytest.raises(InvalidAction, match="non-finite"):
        env.step(np.full(8, np.nan, np.float32))


def test_images_are_the_tasks_cameras_at_the_size_asked_and_leave_the_state_unchanged(
    env: ManiSkillEnvironment,
) -> None:
    state = env.reset(BENCH.task_instance("tabletop", "PickCube-v1", 2))["state"]
    with ManiSkillEnvironment(render_images=True, image_size=64) as rendered:
        obs = rendered.reset(BENCH.task_instance("tabletop", "PickCube-v1", 2))
        assert set(obs["images"]) == {"base_camera"}
        frame = obs["images"]["base_camera"]
        assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8 and frame.std() > 5  # a scene, not a blank
        assert rendered.spec.observation_space["images"]["base_camera"].shape == (64, 64, 3)
        np.testing.assert_array_equal(obs["state"], state)


def test_evaluations_with_one_and_two_workers_agree_and_the_kernel_follows_each_tasks_spaces(tmp_path: Path) -> None:
    outs = [tmp_path / "one", tmp_path / "two"]
    results = []
    for workers, out in zip((1, 2), outs, strict=True):
        out.mkdir()
        results.append(evaluate(EvalSpec(
            benchmark="maniskill", split="tabletop", tasks=["PickCube-v1", "PushCube-v1"], episodes=2, max_steps=6,
            seed=7, agent="maniskill_agents:SeededStateLog", agent_args={"out": str(out)},
            workers=workers, log_dir=str(tmp_path / f"runs{workers}"),
        )))  # fmt: skip
    keys = [[(r.episode_id, r.status, r.steps, r.metrics.get("return")) for r in result.episodes] for result in results]
    assert keys[0] == keys[1] and len(keys[0]) == 4
    assert {r.status for r in results[0].episodes} == {EpisodeStatus.FAILURE}
    names = sorted(p.name for p in outs[0].iterdir())
    assert len(names) == 4
    for name in names:  # PickCube's state has 42 numbers, PushCube's 35: each episode saw its task's
        states = np.load(outs[0] / name)
        assert states.shape == (6, 42 if name.startswith("PickCube") else 35)
        np.testing.assert_array_equal(np.load(outs[1] / name), states)


@pytest.mark.timeout(300)
def test_the_motion_planning_expert_solves_pick_cube_through_the_privileged_channel(tmp_path: Path) -> None:
    result = evaluate(EvalSpec(
        benchmark="maniskill", split="tabletop", tasks=["PickCube-v1"], episodes=3, max_steps=150,
        agent="expert", env_args={"control_mode": "pd_joint_pos"}, log_dir=str(tmp_path),
    ))  # fmt: skip
    assert [r.status for r in result.episodes] == [EpisodeStatus.SUCCESS] * 3
    assert all(40 < r.steps < 120 for r in result.episodes)
    from hylo.evallog.store import EvalLog

    with EvalLog.open(result.log_dir) as log:
        reads = [e for e in log.trace(result.episodes[0].episode_id) if e["event"] == "privileged.state"]
    assert [read["name"] for read in reads] == ["env"]


def test_the_expert_is_refused_in_a_control_mode_other_than_joint_positions(tmp_path: Path) -> None:
    with pytest.raises(HyloError, match="joint_position"):
        evaluate(EvalSpec(benchmark="maniskill", split="tabletop", tasks=["PickCube-v1"], episodes=1,
                          agent="expert", log_dir=str(tmp_path)))  # fmt: skip


def test_a_missing_planner_numpy_names_the_setup_command(tmp_path: Path) -> None:
    process = PlannerProcess(tmp_path / "nowhere")
    with pytest.raises(PlannerError, match=r"-m hylo\.envs\.maniskill_setup"):
        process.call(0, "create", 0, urdf="x")


def test_without_a_vulkan_device_the_error_says_what_to_install() -> None:
    code = (
        "from hylo.envs.maniskill import ManiSkillEnvironment\n"
        "from hylo.core.errors import HyloError\n"
        "try:\n"
        "    ManiSkillEnvironment().spec\n"
        "except HyloError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = dict(os.environ, VK_ICD_FILENAMES="/nonexistent/icd.json")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.startswith("VulkanMissing ManiSkill needs a Vulkan device"), done.stdout + done.stderr
    assert "-m hylo.envs.maniskill_setup" in done.stdout
