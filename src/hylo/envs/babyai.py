"""BabyAI: minigrid's language-conditioned grid-world levels as a hylo benchmark, with BabyAIBot as its expert.

One `BabyAIEnvironment` serves every curated level: the task name picks the level (`GoToLocal` is gymnasium's
`BabyAI-GoToLocal-v0`) and the task's seed picks the episode. The agent sees minigrid's symbolic egocentric 7x7 view,
its direction and the mission string; with `render_images` also a top-down RGB frame of the whole grid.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import gymnasium.spaces as spaces
import minigrid  # noqa: F401  (registers the BabyAI-* gymnasium ids)
import numpy as np
from minigrid.utils.baby_ai_bot import BabyAIBot

from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment, VideoCamera
from hylo.core.errors import InvalidAction, UnknownChoice
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs.benchmark import Benchmark

LEVELS: dict[str, int] = {
    "GoToRedBallGrey": 64,
    "GoToRedBall": 64,
    "GoToObj": 64,
    "GoToLocal": 64,
    "PickupDist": 49,
    "PickupLoc": 64,
    "PutNextLocal": 128,
    "GoToDoor": 441,
    "GoToObjDoor": 576,
    "OpenDoor": 576,
    "OpenDoorLoc": 576,
    "Open": 576,
    "GoTo": 576,
    "Pickup": 576,
    "UnlockLocal": 576,
    "Unlock": 576,
}
"""The curated levels and each one's own step limit (minigrid sets it on reset; for these levels it never varies).
Levels whose limit depends on the sampled mission (GoToSeq, BossLevel, Synth...) are left out."""

NUM_ACTIONS = 7  # left, right, forward, pickup, drop, toggle, done
VIEW_SIZE = 7
MAX_GRID = 22  # cells on the longest side of the largest curated level (3x3 rooms of 8)
MAX_MISSION = 512

_make_bot: Callable[[Any], Any] = BabyAIBot  # minigrid ships py.typed but leaves the bot unannotated


def _level(task: str) -> str:
    if task not in LEVELS:
        raise UnknownChoice("BabyAI level", task, list(LEVELS))
    return task


class BabyAIEnvironment(Environment):
    """The curated BabyAI levels; one minigrid env per level, built on first use and kept until `close()`.

    `images["view"]` (only with `render_images`) is the whole grid drawn with the agent's field of view highlighted,
    scaled by an integer factor to fit a square canvas of `22 * tile_size` pixels and centred on black, so that every
    level gives frames of one shape.
    """

    render_images: bool = False  # `Environment.render_images`, as a plain attribute

    def __init__(self, render_images: bool = False, tile_size: int = 8) -> None:
        if tile_size < 1:
            raise ValueError(f"tile_size must be >= 1, got {tile_size}")
        self.render_images = render_images
        self.canvas = MAX_GRID * tile_size
        obs_spaces: dict[str, spaces.Space[Any]] = {
            "grid": spaces.Box(0, 255, (VIEW_SIZE, VIEW_SIZE, 3), np.uint8),
            "direction": spaces.Discrete(4),
            "instruction": spaces.Text(MAX_MISSION, charset=string.printable),
        }
        if render_images:
            obs_spaces["images"] = spaces.Dict({"view": spaces.Box(0, 255, (self.canvas, self.canvas, 3), np.uint8)})
        self._spec = EnvSpec(
            observation_space=spaces.Dict(obs_spaces),
            action_space=spaces.Discrete(NUM_ACTIONS),
            control_rate_hz=10.0,
            max_episode_steps=None,  # per level: see BabyAIBenchmark.default_step_budget
            name="babyai",
        )
        self._envs: dict[str, gym.Env[Any, Any]] = {}
        self._env: gym.Env[Any, Any] | None = None
        self._obs: Observation | None = None
        self._done = False

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(privileged_state=True)

    def reset(self, task: TaskInstance) -> Observation:
        level = _level(task.task)
        env = self._envs.get(level)
        if env is None:
            env = self._envs[level] = gym.make(f"BabyAI-{level}-v0")
        raw, _ = env.reset(seed=task.seed)
        self._env = env
        self._done = False
        self._obs = self._observation(raw)
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._env is None or self._obs is None:
            raise RuntimeError("step before the first reset")
        if self._done:
            raise RuntimeError("step after the episode ended; reset first")
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            raise InvalidAction(f"BabyAI action must be an int in 0..{NUM_ACTIONS - 1}, got {action!r}")
        if not 0 <= action < NUM_ACTIONS:
            raise InvalidAction(f"BabyAI action must be in 0..{NUM_ACTIONS - 1}, got {action}")
        raw, reward, terminated, truncated, _ = self._env.step(int(action))
        success = bool(terminated) and float(reward) > 0
        self._done = bool(terminated or truncated)
        self._obs = self._observation(raw)
        return StepResult(self._obs, float(reward), bool(terminated), bool(truncated), success)

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def privileged_state(self, name: str) -> Any:
        if name != "simulator":
            raise KeyError(f"babyai exposes privileged state 'simulator' (the unwrapped MiniGridEnv), not {name!r}")
        if self._env is None:
            raise RuntimeError("privileged_state before the first reset")
        return self._env.unwrapped

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._env = None
        self._obs = None

    @property
    def video_camera(self) -> VideoCamera:
        return self

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
        """The grid as `images["view"]` draws it, on a canvas of `size` (width, height; None: the observation's), for
        a video alone: it renders whether or not the observations carry frames."""
        if self._env is None:
            raise RuntimeError("video_frame before the first reset")
        width, height = size if size is not None else (self.canvas, self.canvas)
        return self._frame(height, width)

    def _observation(self, raw: dict[str, Any]) -> Observation:
        obs = Observation(grid=raw["image"], direction=int(raw["direction"]), instruction=str(raw["mission"]))
        if self.render_images:
            obs["images"] = {"view": self._frame(self.canvas, self.canvas)}
        return obs

    def _frame(self, canvas_height: int, canvas_width: int) -> np.ndarray[Any, Any]:
        """The grid drawn with the largest whole tile that fits the canvas, centred on black."""
        assert self._env is not None
        sim: Any = self._env.unwrapped
        tile = max(1, min(canvas_height // sim.height, canvas_width // sim.width))
        frame: np.ndarray[Any, Any] = sim.get_frame(highlight=True, tile_size=tile)
        height, width = frame.shape[:2]
        if (height, width) == (canvas_height, canvas_width):
            return frame
        canvas = np.zeros((canvas_height, canvas_width, 3), np.uint8)
        height, width = min(height, canvas_height), min(width, canvas_width)
        top, left = (canvas_height - height) // 2, (canvas_width - width) // 2
        canvas[top : top + height, left : left + width] = frame[:height, :width]
        return canvas


class BabyAIExpert(AgentBase):
    """minigrid's BabyAIBot, planning on the simulator it reads once per episode through `ctx.privileged`."""

    name = "expert"
    requirements = AgentRequirements(
        action_space=spaces.Discrete(NUM_ACTIONS), needs_images=False, privileged_state=True
    )

    class Args(AgentArgs):
        pass

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self._bot = _make_bot(ctx.privileged("simulator"))
        self._last: int | None = None

    def act(self, obs: Observation) -> ActionChunk:
        # The bot replans from what the last action did to the world; None on the first call of an episode.
        action = int(self._bot.replan(self._last))
        self._last = action
        return ActionChunk.single(action)


class BabyAIBenchmark(Benchmark):
    name = "babyai"
    display_name = "BabyAI"
    default_split = "default"
    default_per_step_budget_sec = 0.2
    typical_reset_sec = 0.08  # medians with frames rendered (14 ms and 0.25 ms without), on a 2-core machine
    typical_step_sec = 0.012
    typical_build_sec = 0.3  # a first reset's extra: 0.1 s quiet, up to 0.25 s beside two CPU-bound processes
    observation_keys = {
        "grid": "minigrid's symbolic egocentric view: 7x7 cells x (object, colour, state) indices, uint8",
        "direction": "the agent's heading: 0 east, 1 south, 2 west, 3 north",
        "instruction": "the episode's mission, e.g. 'go to the red ball' (it varies per episode)",
        "images/view": "RGB frame of the whole grid, 22*tile_size pixels square (only when rendering)",
    }

    def splits(self) -> list[str]:
        return ["default"]

    def tasks(self, split: str) -> list[str]:
        self.check_split(split)
        return list(LEVELS)

    def make_env(self, *, render_images: bool = False) -> BabyAIEnvironment:
        return BabyAIEnvironment(render_images=render_images)

    def default_step_budget(self, task: str) -> int:
        return LEVELS[_level(task)]

    def expert(self) -> BabyAIExpert:
        return BabyAIExpert()

    def instruction(self, task: str) -> str | None:
        return None
