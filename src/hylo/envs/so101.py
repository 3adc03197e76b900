"""SO-101 (`lerobot-env-so101`, `pip install 'hylo[so101]'`): LeRobot's low-cost arm in MuJoCo, as `gym:` benchmarks
(`gym:lerobot_env_so101/SO101PickPlace-v0`, `gym:lerobot_env_so101/SO101PickCube-v0`). The gym adapter reads them
as any gym env (`agent_pos` is `state`, `environment_state` stays, success is `info["succeed"]`); this module adds
what the package knows that its observations do not say:

- the simulator state a scripted controller reads (`read_privileged`, traced as privileged reads): `grasp_pos`, the
  world point the action moves (`ik_point_pos`: the grasp point between the jaws), `block_pos`, `goal_pos` and
  `action_scale` (metres per unit of position action);
- the package's own pick-and-place controller as the benchmark's `expert` (`SO101PickPlaceExpert`). PickCube has
  none: its shipped controller reaches and closes on the block without lifting it (the package says so), and the
  env's success is a lift.

The env's defaults are LeRobot's (`lerobot_env_so101.configuration_so101`): the block and goal at fixed places (every
seed is the same episode: `-E random_block_position=true` samples them from the seed) and one metre per unit of
position action (`-E action_scale=0.025` is the package's controller's scale; the expert reads the env's own).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.conventions import ActionConvention
from hylo.core.types import Observation

PRIVILEGED = ("grasp_pos", "block_pos", "goal_pos", "action_scale")
"""What `read_privileged` reads, by name."""

ACTION_CONVENTION = ActionConvention(
    control="ee_delta", rotation="none", gripper="open_positive", frame="world", units="action_scale metres",
    labels=("dx", "dy", "dz", "grasp"), low=(-1.0, -1.0, -1.0, 0.0), high=(1.0, 1.0, 1.0, 1.0),
)  # fmt: skip
"""`[dx, dy, dz, grasp]`: the grasp point moved by `action_scale` metres per unit (position-only IK, no rotation), and
the jaw's absolute target, 0 closed to 1 open (`SO101GymEnv.apply_action`)."""


def read_privileged(env: Any, name: str) -> Any:
    """`name` (one of `PRIVILEGED`) read from the SO-101 gym env `env` (its wrappers are looked through)."""
    sim = env.unwrapped
    if name == "grasp_pos":
        return np.array(sim.ik_point_pos, dtype=np.float64)
    if name == "block_pos":
        return np.array(sim._data.sensor("block_pos").data, dtype=np.float64)
    if name == "goal_pos":
        goal = getattr(sim, "goal_pos", None)
        if goal is None:
            raise KeyError(f"{type(sim).__name__} has no goal: privileged state 'goal_pos' is PickPlace's")
        return np.array(goal, dtype=np.float64)
    if name == "action_scale":
        return float(sim._action_scale)
    raise KeyError(f"SO-101 exposes no privileged state {name!r}; it exposes {', '.join(PRIVILEGED)}")


class SO101PickPlaceExpert(AgentBase):
    """The package's scripted pick-and-place controller (`lerobot_env_so101.scripted.PickPlaceController`: hover,
    descend, close, lift, traverse, lower, open, retreat), reading the grasp point, the block, the goal and the env's
    action scale through the privileged channel: it needs no observation key, so it acts with state or pixels."""

    name = "expert"
    requirements = AgentRequirements(needs_images=False, privileged_state=True)

    def __init__(self) -> None:
        self._controller: Any = None
        self._ctx: EpisodeContext | None = None

    def reset(self, ctx: EpisodeContext) -> None:
        from lerobot_env_so101.scripted import PickPlaceController  # optional: the so101 extra

        self._ctx = ctx
        self._controller = PickPlaceController(action_scale=float(ctx.privileged("action_scale")))

    def act(self, obs: Observation) -> ActionChunk:
        ctx, controller = self._ctx, self._controller
        if ctx is None or controller is None:
            raise RuntimeError("SO101PickPlaceExpert.act before reset")
        action = controller.act(ctx.privileged("grasp_pos"), ctx.privileged("block_pos"), ctx.privileged("goal_pos"))
        return ActionChunk.single(np.asarray(action, dtype=np.float32))
