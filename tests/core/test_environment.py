"""The Environment contract's optional members: their defaults, and an EnvWrapper that forwards them."""

from __future__ import annotations

from typing import Any

import numpy as np

from hylo.core.environment import EnvWrapper, VideoCamera
from hylo.envs.null import NullEnv


class Rendering(NullEnv):
    """A null env that can render: frames on request, and a camera of its own for a video."""

    render_images: bool = False

    @property
    def video_camera(self) -> VideoCamera:
        return self

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
        width, height = size or (4, 3)
        return np.zeros((height, width, 3), np.uint8)


def test_an_env_that_cannot_render_ignores_a_request_to_and_has_no_camera() -> None:
    env = NullEnv()
    assert env.render_images is False and env.video_camera is None
    env.render_images = True
    assert env.render_images is False
    env.render_images = False
    assert env.render_images is False


def test_an_env_that_renders_switches_on_and_off() -> None:
    env = Rendering()
    env.render_images = True
    assert env.render_images is True
    env.render_images = False
    assert env.render_images is False


def test_a_wrapper_forwards_the_camera_members_through_each_layer() -> None:
    env = Rendering()
    wrapped = EnvWrapper(EnvWrapper(env))
    wrapped.render_images = True
    assert env.render_images is True and wrapped.render_images is True
    wrapped.render_images = False
    assert env.render_images is False and wrapped.render_images is False
    assert wrapped.video_camera is env
    assert wrapped.video_camera.video_frame((8, 6)).shape == (6, 8, 3)

    plain = EnvWrapper(NullEnv())
    plain.render_images = True
    assert plain.render_images is False and plain.video_camera is None
