"""What an agent that gets no camera images is shown: its observations and its env's spec without `images`.

An env may render frames for someone other than the agent (a video recorder, a live view, another node of a graph);
an agent that declares `needs_images=False`, or a run that withholds images, must see the same observation keys in
every episode whatever else renders, and a spec that declares what it is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import gymnasium.spaces as spaces

from hylo.core.types import EnvSpec, Observation

IMAGES = "images"
"""The observation key of camera frames (camera name -> HxWx3 uint8)."""


def declares_images(spec: EnvSpec) -> bool:
    """Whether the env's observation space declares camera images."""
    space = spec.observation_space
    return isinstance(space, spaces.Dict) and IMAGES in space.spaces


def without_images(obs: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obs` without its `images` (the same object when it has none)."""
    if not isinstance(obs, Mapping) or IMAGES not in obs:
        return obs
    return Observation((key, value) for key, value in obs.items() if key != IMAGES)


def spec_without_images(spec: EnvSpec) -> EnvSpec:
    """`spec` with no `images` in its observation space (the same object when it declares none)."""
    if not declares_images(spec):
        return spec
    space = spec.observation_space
    assert isinstance(space, spaces.Dict)
    rest = spaces.Dict({key: sub for key, sub in space.spaces.items() if key != IMAGES})
    return dataclasses.replace(spec, observation_space=rest)
