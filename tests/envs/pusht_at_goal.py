"""`pusht_at_goal/PushT-v0`: gym-pusht's PushT with the T already on its goal at every reset (the pusher in a corner,
away from it), so that the first step succeeds. Importing this module registers it, and its namespace is this module:
`gym:pusht_at_goal/PushT-v0` is found by importing the namespace."""

from __future__ import annotations

from typing import Any

import gymnasium
from gym_pusht.envs import PushTEnv

PUSHER_XY = [40.0, 40.0]
GOAL_POSE = [256.0, 256.0, 0.7853981633974483]
"""gym-pusht's goal pose of the T: xy and angle (pi / 4)."""


class PushTAtGoal(PushTEnv):
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed, options={"reset_to_state": [*PUSHER_XY, *GOAL_POSE]})
        self.block.angle = self.goal_pose[2]  # the angle first: it turns the T about its centre of mass
        self.block.position = list(self.goal_pose[:2])
        self.space.step(self.dt)
        return self.get_obs(), {**self._get_info(), "is_success": False}


gymnasium.register(
    "pusht_at_goal/PushT-v0", entry_point=f"{__name__}:PushTAtGoal", max_episode_steps=300, kwargs={"obs_type": "state"}
)
