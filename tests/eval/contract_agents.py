"""Agents the observation-contract tests name as `contract_agents:Class`: each writes what it was given at every act
(episode, observation keys, camera shapes, the keys its spec declares) as a JSON line to `out`, and holds still."""

from __future__ import annotations

import json
from typing import Any

from hylo.agents.basic import neutral_action
from hylo.core import ActionChunk, AgentRequirements


class Undeclared:
    """Declares nothing: it gets the benchmark's whole observation."""

    def __init__(self, out: str) -> None:
        self.out = out

    def reset(self, ctx: Any) -> None:
        self.ctx = ctx
        self.action = neutral_action(ctx.env_spec.action_space)

    def act(self, obs: Any) -> ActionChunk:
        images = obs.get("images") or {}
        seen = {
            "episode": self.ctx.task.episode_id,
            "keys": sorted(obs),
            "cameras": {name: list(frame.shape) for name, frame in images.items()},
            "declared": sorted(self.ctx.env_spec.observation_space.spaces),
        }
        with open(self.out, "a") as out:
            out.write(json.dumps(seen) + "\n")
        return ActionChunk.single(self.action)


class StateOnly(Undeclared):
    """Declares that it needs no images."""

    requirements = AgentRequirements(needs_images=False)


class NeedsImages(Undeclared):
    """Declares that it needs images."""

    requirements = AgentRequirements(needs_images=True)
