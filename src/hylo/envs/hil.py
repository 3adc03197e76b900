"""gym-hil (`pip install 'hylo[hil]'`): LeRobot's human-in-the-loop Franka Panda tasks in MuJoCo, as `gym:` benchmarks:
`gym:gym_hil/PandaPickCubeBase-v0` and `gym:gym_hil/PandaArrangeBoxesBase-v0` (7-D actions: `[dx, dy, dz]` in metres,
three rotations the env ignores, a gripper step), `gym:gym_hil/PandaPickCube-v0` and `gym:gym_hil/PandaArrangeBoxes-v0`
(LeRobot's 4-D end-effector actions). The gym adapter reads them as any gym env (`agent_pos` is `state`, `-E
image_obs=true` gives the cameras `images/front` and `images/wrist`, success is `info["succeed"]`); this module adds:

- `cheap_render`, the `-E cheap_render=true` option: the cameras render without shadow maps (4096x4096, one per light,
  by default) or 8x multisampling, about 14 times faster on a CPU renderer; the images differ (no shadows, aliased
  edges), so a policy trained on the default images sees other ones;
- `seeded_reset`: the envs place their blocks with numpy's global generator, which `reset(seed=...)` does not seed;
  the episode's seed seeds it for the reset, and the generator's state is put back after;
- the simulator state a scripted controller reads (`read_privileged`): `tcp_pos` (the pinch point between the
  fingers), `block_pos`;
- a scripted pick controller as PickCube's `expert` (`PandaPickExpert`; the package ships none).

The ids with a viewer or a teleoperation device (`*Viewer-v0`, `*Gamepad-v0`, `*Keyboard-v0`) need a display and a
person: `HEADLESS_IDS` lists the others. The wrapped ids wait `reset_delay_seconds` (1 s) at every reset unless told 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.conventions import ActionConvention
from hylo.core.types import Observation

HEADLESS_IDS = (
    "gym_hil/PandaPickCubeBase-v0",
    "gym_hil/PandaArrangeBoxesBase-v0",
    "gym_hil/PandaPickCube-v0",
    "gym_hil/PandaArrangeBoxes-v0",
)
PRIVILEGED = ("tcp_pos", "block_pos")
STEP = 0.025
"""Metres per unit of the wrapped ids' xyz action (`gym_hil.wrappers.hil_wrappers.DEFAULT_EE_STEP_SIZE`)."""

ACTION_CONVENTION = ActionConvention(
    control="ee_delta", rotation="none", gripper="close_positive", frame="world", units="0.025 metres",
    labels=("dx", "dy", "dz", "grasp"), low=(-1.0, -1.0, -1.0, 0.0), high=(1.0, 1.0, 1.0, 2.0),
)  # fmt: skip
"""The wrapped ids' `[dx, dy, dz, grasp]`: the pinch point's target moved by 2.5 cm per unit, and the gripper
closed (2), kept (1) or opened (0) by a full stroke (`EEActionWrapper`, `FrankaGymEnv.apply_action`)."""


def cheap_render(env: Any) -> None:
    """Make the gym-hil env `env` (its wrappers are looked through) render without shadows or multisampling. Its
    renderer was made with the model's quality settings when the env was built: it is made again."""
    import mujoco  # optional: the hil extra

    sim = env.unwrapped
    quality = sim.model.vis.quality
    quality.shadowsize = 0  # no shadow maps: most of a frame's cost on a CPU renderer
    quality.offsamples = 0  # no multisampled offscreen buffer
    old = sim._viewer
    sim._viewer = mujoco.Renderer(sim.model, height=old.height, width=old.width)
    old.close()


def seeded_reset(env: Any, seed: int | None) -> Any:
    """`env.reset(seed=seed)` with numpy's global generator seeded by `seed` for it (gym-hil samples its blocks
    there), and left as it was after."""
    saved = np.random.get_state()
    try:
        np.random.seed(seed)
        return env.reset(seed=seed)
    finally:
        np.random.set_state(saved)


def read_privileged(env: Any, name: str) -> Any:
    """`name` (one of `PRIVILEGED`) read from the gym-hil env `env` (its wrappers are looked through)."""
    data = env.unwrapped.data
    if name == "tcp_pos":
        return np.array(data.sensor("2f85/pinch_pos").data, dtype=np.float64)
    if name == "block_pos":
        return np.array(data.sensor("block_pos").data, dtype=np.float64)
    raise KeyError(f"gym-hil exposes no privileged state {name!r}; it exposes {', '.join(PRIVILEGED)}")


class PandaPickExpert(AgentBase):
    """Hover 8 cm above the block, descend to it, close the gripper, lift: on `PandaPickCube-v0`'s 4-D actions
    (`[dx, dy, dz]` in units of 2.5 cm, the gripper 0 open, 1 kept, 2 closed), reading the pinch point and the block
    through the privileged channel."""

    name = "expert"
    requirements = AgentRequirements(needs_images=False, privileged_state=True)

    def __init__(self) -> None:
        self._ctx: EpisodeContext | None = None
        self._phase = "hover"
        self._closing = 0

    def reset(self, ctx: EpisodeContext) -> None:
        self._ctx, self._phase, self._closing = ctx, "hover", 0

    def act(self, obs: Observation) -> ActionChunk:
        if self._ctx is None:
            raise RuntimeError("PandaPickExpert.act before reset")
        tcp, block = self._ctx.privileged("tcp_pos"), self._ctx.privileged("block_pos")
        grip = 0.0
        if self._phase == "hover":
            target = block + np.array([0.0, 0.0, 0.08])
            if np.linalg.norm(target - tcp) < 0.01:
                self._phase = "descend"
        elif self._phase == "descend":
            target = block
            if np.linalg.norm(target - tcp) < 0.008:
                self._phase = "close"
        elif self._phase == "close":
            target, grip, self._closing = tcp, 2.0, self._closing + 1
            if self._closing >= 3:
                self._phase = "lift"
        else:
            target, grip = np.array([tcp[0], tcp[1], 0.3]), 2.0
        move = np.clip((target - tcp) / STEP, -1.0, 1.0)
        return ActionChunk.single(np.array([*move, grip], dtype=np.float32))
