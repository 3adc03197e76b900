"""The recorder around an agent's env (`hylo.evallog.recording.FrameTap`): what it records, what it hands on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core.environment import Environment, VideoCamera
from hylo.core.types import EnvSpec, Observation, StepResult, TaskInstance
from hylo.evallog.recording import FrameSource, FrameTap
from hylo.evallog.rollouts import RolloutTap

TASK = TaskInstance("toy", "task", 0)


class Camera(Environment):
    """A state and, while `render_images`, a 24x32 frame whose brightness is the step count; `video_frame` draws the
    same scene at any size, and fails at step `broken_at`; without `own_camera` it has no `video_camera`."""

    render_images: bool = False

    def __init__(self, render_images: bool, own_camera: bool = True, broken_at: int | None = None) -> None:
        self.render_images = render_images
        self.own_camera = own_camera
        self.broken_at = broken_at
        self.steps = 0
        self.video_frames = 0
        cameras = {"images": spaces.Dict({"top": spaces.Box(0, 255, (24, 32, 3), np.uint8)})} if render_images else {}
        self._spec = EnvSpec(spaces.Dict({"state": spaces.Box(-1, 1, (1,)), **cameras}), spaces.Discrete(2),
                             control_rate_hz=25.0)  # fmt: skip

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def video_camera(self) -> VideoCamera | None:
        return self if self.own_camera else None

    def _obs(self) -> Observation:
        obs = Observation(state=np.array([self.steps / 10]))
        if self.render_images:
            obs["images"] = {"top": np.full((24, 32, 3), 10 * self.steps, np.uint8)}
        return obs

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
        if self.steps == self.broken_at:
            raise RuntimeError("the renderer is gone")
        self.video_frames += 1
        width, height = size or (32, 24)
        return np.full((height, width, 3), 10 * self.steps, np.uint8)

    def reset(self, task: TaskInstance) -> Observation:
        self.steps = 0
        return self._obs()

    def step(self, action: Any) -> StepResult:
        self.steps += 1
        return StepResult(self._obs(), 0.0, self.steps == 4)

    def observe(self) -> Observation:
        return self._obs()


def episode(tap: FrameTap, path: Path | None) -> tuple[list[Any], Path | None]:
    """Run 4 steps, recording into `path` when given: what the agent was handed, and the video."""
    if path is not None:
        tap.start(path)
    seen = [tap.reset(TASK), *(tap.step(1).obs for _ in range(4)), tap.observe()]
    return seen, tap.stop()


def read(path: Path) -> tuple[tuple[int, int], float, list[np.ndarray[Any, Any]]]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        return (stream.width, stream.height), float(stream.average_rate), frames


@pytest.mark.parametrize("own_camera", [True, False])
def test_an_agent_that_gets_no_images_is_handed_none_recorded_or_not(tmp_path: Path, own_camera: bool) -> None:
    env = Camera(render_images=False, own_camera=own_camera)
    tap = FrameTap(env, images=False)
    plain, _ = episode(tap, None)
    recorded, video = episode(tap, tmp_path / "v.mp4")
    assert [sorted(obs) for obs in recorded] == [sorted(obs) for obs in plain] == [["state"]] * 6
    assert sorted(tap.spec.observation_space.spaces) == ["state"]
    assert video is not None
    size, rate, frames = read(video)
    assert (size, rate, len(frames)) == ((32, 24), 25.0, 5)  # the env's camera and rate, a frame per step
    assert np.allclose([frame.mean() for frame in frames], [0, 10, 20, 30, 40], atol=3)  # each step's own frame
    if own_camera:  # rendered for the video alone
        assert env.video_frames == 5 and not env.render_images
    else:  # rendered into the observations while recording, and taken out of them
        assert not env.render_images


def test_a_size_is_rendered_by_the_env_or_else_scaled_and_the_agents_frames_keep_theirs(tmp_path: Path) -> None:
    for own_camera in (True, False):
        env = Camera(render_images=True, own_camera=own_camera)
        tap = FrameTap(env, images=True, size=(64, 48))
        seen, video = episode(tap, tmp_path / f"{own_camera}.mp4")
        assert all(obs["images"]["top"].shape == (24, 32, 3) for obs in seen)
        assert tap.spec is env.spec
        assert video is not None
        size, _, frames = read(video)
        assert size == (64, 48) and len(frames) == 5 and abs(frames[3].mean() - 30) < 3
        assert env.video_frames == (5 if own_camera else 0)


def test_the_agents_own_frames_are_recorded_when_they_have_the_size_asked(tmp_path: Path) -> None:
    env = Camera(render_images=True)
    tap = FrameTap(env, images=True, size=(32, 24))
    tap.start(tmp_path / "v.mp4")
    assert tap.source is FrameSource.CAMERA
    episode(tap, None)
    assert env.video_frames == 0


def test_a_frame_that_cannot_be_rendered_ends_the_recording_not_the_episode(tmp_path: Path) -> None:
    env = Camera(render_images=False, broken_at=2)
    tap = FrameTap(env, images=False)
    tap.start(tmp_path / "v.mp4")
    seen = [tap.reset(TASK), *(tap.step(1).obs for _ in range(4))]
    assert len(seen) == 5 and tap.error == "RuntimeError: the renderer is gone"
    video = tap.stop()
    assert video is not None and len(read(video)[2]) == 2  # the frames before it are kept


def test_a_video_tap_above_a_rollout_tap_still_finds_the_envs_own_camera(tmp_path: Path) -> None:
    env = Camera(render_images=True)
    tap = FrameTap(RolloutTap(env), images=False)
    tap.start(tmp_path / "v.mp4")
    assert tap.source is FrameSource.CAMERA
    tap.reset(TASK)
    tap.step(0)
    tap.stop()
    assert env.video_frames == 2
