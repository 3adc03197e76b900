"""Recorded rollouts (`hylo.evallog.rollouts`): every step kept exactly, the recording never changing the episode nor
what the agent sees, a failed recording never ending the episode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hylo
from hylo.core.types import TaskInstance
from hylo.envs.gym_adapter import GymEnvironment
from hylo.eval import EvalLog
from hylo.evallog.rollouts import Rollout, RolloutTap, rollout_path
from hylo.evallog.video import VideoWriter

PUSHT = "gym_pusht/PushT-v0"
TASK = TaskInstance("gym:gym_pusht/PushT-v0", "pusht-v0", 0, base_seed=3)


def _pusht() -> GymEnvironment:
    return GymEnvironment(PUSHT, render_images=True, make_kwargs={"obs_type": "pixels_agent_pos"})


def _play(env: Any, steps: int) -> tuple[list[Any], list[np.ndarray[Any, Any]], list[Any]]:
    """Reset and take `steps` fixed actions: the observations each step acted on, the actions, the results."""
    observations, actions, results = [env.reset(TASK)], [], []
    for i in range(steps):
        action = np.array([200.0 + 10 * i, 300.0 - 7 * i])
        actions.append(action)
        results.append(env.step(action))
        observations.append(results[-1].obs)
    return observations[:-1], actions, results


def test_a_rollout_keeps_every_frame_of_every_camera_and_vector_exactly(tmp_path: Path):
    tap = RolloutTap(_pusht())
    where = tmp_path / "rollouts" / "one"
    tap.start(where)
    observations, actions, results = _play(tap, 6)
    assert tap.finish(1, "failure") == where
    assert not list(where.parent.glob(".*"))  # the hidden directory it was written in is gone
    rollout = Rollout.open(where)
    assert (rollout.length, rollout.fps, rollout.task) == (6, 10.0, "pusht-v0")
    names = {f.name: (f.kind, f.shape, f.dtype) for f in rollout.features}
    assert names == {  # gym-pusht's declared LeRobot names: pixels is `observation.image` (only)
        "observation.image": ("image", (96, 96, 3), "uint8"),
        "observation.state": ("vector", (2,), "float32"),
        "action": ("action", (2,), "float32"),
    }
    frames = list(rollout.frames())
    assert len(frames) == 6
    for frame, obs, action, result in zip(frames, observations, actions, results, strict=True):
        assert np.array_equal(frame["observation.image"], obs["images"]["pixels"])  # lossless: every pixel
        assert np.array_equal(frame["observation.state"], np.float32(obs["state"]))
        assert np.array_equal(frame["action"], np.float32(action))
        assert frame["next.reward"] == np.float32(result.reward)
        assert frame["next.success"] == result.success
    assert [bool(f["next.done"]) for f in frames] == [False] * 5 + [True]  # the episode ended after its last frame


def test_a_frame_that_cannot_be_recorded_ends_the_recording_not_the_episode(tmp_path: Path, monkeypatch):
    def broken(self: VideoWriter, frame: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(VideoWriter, "add", broken)
    tap = RolloutTap(_pusht())
    tap.start(tmp_path / "one")
    _, _, results = _play(tap, 3)
    assert len(results) == 3  # the episode went on
    assert tap.error == "OSError: disk full"
    assert tap.finish(1, "failure") is None
    assert list(tmp_path.iterdir()) == []  # nothing half written is left


def test_an_episode_without_a_step_keeps_no_rollout(tmp_path: Path):
    tap = RolloutTap(_pusht())
    tap.start(tmp_path / "one")
    tap.reset(TASK)
    assert tap.finish(1, "error") is None
    assert list(tmp_path.iterdir()) == []


def _traces(result: Any) -> tuple[list[Any], list[Any]]:
    """Each episode's status and steps; every trace event but the wall clock's readings (its time, an act's latency)."""
    with EvalLog.open(Path(result.log_dir)) as log:
        rows = [(row.episode_id, row.status.value, row.steps) for row in result.episodes]
        events = [
            {k: v for k, v in event.items() if k not in ("wall_time", "latency_s", "run_id")}
            for row in result.episodes
            for event in log.trace(row.episode_id)
        ]
    return rows, events


@pytest.mark.parametrize("workers", [1, 2])
def test_recording_changes_nothing_the_agent_sees_or_does(tmp_path: Path, workers: int):
    """A random agent takes no images: recording renders Meta-World's camera for the rollout alone. The agent's
    observations (as traced), its actions and the run's identity are those of a run that records nothing."""
    common = dict(agent="random", tasks=["reach-v3"], episodes=2, max_steps=12, workers=workers)
    plain = hylo.evaluate("metaworld", log_dir=str(tmp_path / "plain"), **common)
    recorded = hylo.evaluate("metaworld", log_dir=str(tmp_path / "recorded"), record_rollouts=True, **common)
    assert recorded.run_id == plain.run_id
    assert _traces(recorded) == _traces(plain)
    for row in recorded.episodes:
        kept = rollout_path(Path(recorded.log_dir), row.episode_id, row.attempt)
        meta = json.loads((kept / "rollout.json").read_text())
        assert (meta["frames"], meta["episode_id"]) == (row.steps, row.episode_id)
        assert "observation.image" in {f["name"] for f in meta["features"]}
        assert "rollout_error" not in row.metrics
    assert not (Path(plain.log_dir) / "rollouts").exists()  # frames are kept only when asked


def test_a_run_whose_recording_fails_keeps_its_episodes_and_says_why(tmp_path: Path, monkeypatch):
    def broken(self: VideoWriter, frame: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(VideoWriter, "add", broken)
    result = hylo.evaluate("metaworld", agent="random", tasks=["reach-v3"], episodes=1, max_steps=5,
                           log_dir=str(tmp_path), record_rollouts=True)  # fmt: skip
    (row,) = result.episodes
    assert row.steps == 5
    assert row.metrics["rollout_error"] == "OSError: disk full"
    assert not rollout_path(Path(result.log_dir), row.episode_id, row.attempt).exists()
