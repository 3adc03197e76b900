"""`gym:<id>`: any Gymnasium environment as a hylo Environment, and as a benchmark of one task (the id itself).

A non-Dict observation becomes `state`; a Dict observation keeps its keys (a `mission` string is also the
`instruction`); `render_images=True` adds `images/render`. Success comes from `info["is_success"]` or
`info["success"]`. MuJoCo-based envs are watched for divergence on every step (see `mujoco_watch`).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any, cast

import gymnasium
import gymnasium.spaces as spaces
import numpy as np
from gymnasium.envs.registration import EnvSpec as GymSpec
from gymnasium.envs.registration import load_env_creator

from hylo.core.environment import Environment
from hylo.core.errors import HyloError, InvalidAction, UnknownChoice
from hylo.core.types import Action, EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.envs.mujoco_watch import DivergenceWatch, find_mjdata

DEFAULT_STEP_BUDGET = 1000
"""Step budget of an env registered without `max_episode_steps`."""
DEFAULT_CONTROL_RATE_HZ = 10.0
SUCCESS_KEYS = ("is_success", "success")
MAX_INFO_ARRAY = 4
"""Info arrays with more elements than this are dropped from `StepResult.info`."""
MAX_INFO_STR = 200

_NOT_TEXT = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict, spaces.Tuple)


def registered_spec(env_id: str) -> GymSpec:
    """Gymnasium's registration of `env_id`, importing the `module:` part first; UnknownChoice when there is none."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise HyloError(f"gymnasium environment {env_id!r}: cannot import module {module!r}: {exc}") from exc
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error:
        known = sorted(gymnasium.registry)
        close = difflib.get_close_matches(name, known, n=8, cutoff=0.5) or known
        # another package's env is registered when its module is imported: `minigrid:MiniGrid-Empty-5x5-v0`
        raise UnknownChoice("gymnasium environment", env_id, [*close, "<module>:<id>"]) from None


class GymEnvironment(Environment):
    """One gymnasium env (built once, with `gymnasium.make`), reset to `task.seed` for each episode.

    `step` accepts an action of the action space's structure (shape, type, keys) and refuses any other with
    `InvalidAction`; a Box action out of bounds is passed on (the shield clips it). For a MuJoCo env, a divergence
    raises `SimulationDiverged` and a bad control `InvalidAction`.
    """

    def __init__(
        self, env_id: str, *, render_images: bool = False, make_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        registered_spec(env_id)
        self.env_id = env_id
        self._make_kwargs = dict(make_kwargs or {})
        self._renders = render_images  # whether the env was made with render_mode="rgb_array"
        self._env = env = self._make(render_images)
        self._render_images = render_images
        self._obs: Observation | None = None
        self._ended = False
        self._closed = False

        raw = env.observation_space
        self._dict_obs = isinstance(raw, spaces.Dict)
        obs_spaces: dict[str, spaces.Space[Any]] = dict(raw.spaces) if isinstance(raw, spaces.Dict) else {"state": raw}
        mission = obs_spaces.get("mission")
        self._mission = mission is not None and "instruction" not in obs_spaces and not isinstance(mission, _NOT_TEXT)
        if self._mission:
            obs_spaces["instruction"] = obs_spaces["mission"]
        if render_images:
            if "images" in obs_spaces:
                raise HyloError(f"{env_id!r} has an observation key 'images' already; cannot add its rendering")
            env.reset(seed=0)  # a first frame, for its size (every episode reseeds)
            frame = self._render()
            obs_spaces["images"] = spaces.Dict({"render": spaces.Box(0, 255, frame.shape, np.uint8)})

        fps = env.metadata.get("render_fps")
        dt = getattr(env.unwrapped, "dt", None)
        if isinstance(fps, (int, float)) and fps > 0:
            rate = float(fps)
        elif isinstance(dt, (int, float)) and dt > 0:
            rate = 1.0 / dt
        else:
            rate = DEFAULT_CONTROL_RATE_HZ
        self._spec = EnvSpec(
            observation_space=spaces.Dict(obs_spaces),
            action_space=env.action_space,
            control_rate_hz=rate,
            max_episode_steps=env.spec.max_episode_steps if env.spec is not None else None,
            name=env_id,
        )
        self._mjdata = find_mjdata(env)
        self._watch = DivergenceWatch(lambda: self._mjdata) if self._mjdata is not None else None

    def _make(self, render: bool) -> gymnasium.Env[Any, Any]:
        kwargs = dict(self._make_kwargs)
        if render:  # only then: an env without a render_mode parameter still builds
            kwargs["render_mode"] = "rgb_array"
        try:
            return gymnasium.make(self.env_id, **kwargs)
        except (ImportError, gymnasium.error.Error) as exc:
            raise HyloError(f"gymnasium could not make {self.env_id!r}: {exc}") from exc

    @property
    def render_images(self) -> bool:
        """Whether observations carry `images["render"]`. Switching it on for an env made without rendering (for
        a recorded episode) remakes the env with `render_mode="rgb_array"`; takes effect at the next reset."""
        return self._render_images

    @render_images.setter
    def render_images(self, on: bool) -> None:
        if on and not self._renders:
            self._env.close()
            self._env = self._make(True)
            self._mjdata = find_mjdata(self._env)
            self._renders = True
            self._obs = None
        self._render_images = on

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=isinstance(self._spec.action_space, spaces.Box))

    def __enter__(self) -> GymEnvironment:
        return self

    @property
    def gym_env(self) -> gymnasium.Env[Any, Any]:
        """The gymnasium env itself, wrappers included."""
        return self._env

    def reset(self, task: TaskInstance) -> Observation:
        raw, _ = self._env.reset(seed=task.seed)
        self._ended = False
        self._obs = self._observation(raw)
        return self._obs

    def step(self, action: Action) -> StepResult:
        if self._obs is None:
            raise RuntimeError(f"{self.env_id}: step before the first reset")
        if self._ended:
            raise RuntimeError(f"{self.env_id}: step after the episode ended; reset first")
        space = self._spec.action_space
        try:
            sent = _conform(space, action)
        except (TypeError, ValueError) as exc:
            raise InvalidAction(f"action {_short(action)} does not fit the action space {space}: {exc}") from None
        self._ended = True  # until the step completes: a step that raised leaves the episode over
        if self._watch is None:
            raw, reward, terminated, truncated, info = self._env.step(sent)
        else:
            before = self._watch.counts()
            raw, reward, terminated, truncated, info = self._env.step(sent)
            self._watch.check(before)
        self._ended = bool(terminated or truncated)
        self._obs = self._observation(raw)
        success = any(_truthy(info[key]) for key in SUCCESS_KEYS if key in info)
        return StepResult(self._obs, float(reward), bool(terminated), bool(truncated), success, _small_info(info))

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError(f"{self.env_id}: observe before the first reset")
        return self._obs

    def hold_action(self) -> Action:
        space = self._spec.action_space
        if not isinstance(space, spaces.Box):
            return super().hold_action()
        return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()

    def _observation(self, raw: Any) -> Observation:
        if self._dict_obs:
            obs = Observation((key, _fresh(value)) for key, value in raw.items())
            if self._mission:
                obs["instruction"] = obs["mission"]
        else:
            obs = Observation(state=_fresh(raw))
        if self._render_images:
            obs["images"] = {"render": self._render()}
        return obs

    def _render(self) -> np.ndarray[Any, Any]:
        frame = self._env.render()
        if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[-1] != 3:
            shown = frame.shape if isinstance(frame, np.ndarray) else type(frame).__name__
            raise HyloError(f"{self.env_id}: render() returned {shown}, not an HxWx3 image")
        return np.array(frame, dtype=np.uint8)


class GymBenchmark(Benchmark):
    """`gym:<id>`: one split, one task (the env id itself), on a `GymEnvironment`."""

    default_split = "default"
    default_per_step_budget_sec = 0.5
    observation_keys = {
        "state": "the env's observation (a Dict observation keeps its own keys instead)",
        "images/render": "env.render() as an HxWx3 uint8 frame, when rendering",
    }

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self._registered = registered_spec(env_id)
        named = cast(Any, self)  # class-level on other benchmarks; here they depend on the id
        named.name = f"gym:{env_id}"
        named.display_name = env_id

    def splits(self) -> list[str]:
        return [self.default_split]

    def tasks(self, split: str) -> list[str]:
        self.check_split(split)
        return [self.env_id]

    def make_env(self, *, render_images: bool = False) -> GymEnvironment:
        return GymEnvironment(self.env_id, render_images=render_images)

    def default_step_budget(self, task: str) -> int:
        return self._registered.max_episode_steps or DEFAULT_STEP_BUDGET

    def instruction(self, task: str) -> str | None:
        return None

    def available(self) -> tuple[bool, str]:
        entry_point = self._registered.entry_point
        if isinstance(entry_point, str):
            try:
                load_env_creator(entry_point)
            except (ImportError, gymnasium.error.Error) as exc:
                return False, f"{self.env_id}: {exc}"
        return True, ""


def _conform(space: spaces.Space[Any], action: Any) -> Any:
    """`action` in the form `space` takes; ValueError saying what does not fit. A Box's bounds are not checked."""
    if isinstance(space, spaces.Dict):
        if not isinstance(action, Mapping) or set(action) != set(space.spaces):
            raise ValueError(f"expected a mapping with the keys {sorted(space.spaces)}")
        return {key: _conform(sub, action[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(action, (tuple, list)) or len(action) != len(space.spaces):
            raise ValueError(f"expected a sequence of {len(space.spaces)} actions")
        return tuple(_conform(sub, item) for sub, item in zip(space.spaces, action, strict=True))
    if isinstance(space, spaces.Discrete):
        if isinstance(action, (bool, np.bool_)) or np.ndim(action) != 0 or np.asarray(action).dtype.kind not in "iu":
            raise ValueError("expected one integer")
        value = int(action)
        if not space.start <= value < space.start + space.n:  # no nearest choice to clip to: malformed
            raise ValueError(f"{value} is not one of its choices")
        return value
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        array = np.asarray(action)
        kinds = "biuf" if isinstance(space, spaces.Box) and space.dtype.kind == "f" else "biu"
        if array.dtype.kind not in kinds:
            raise ValueError(f"dtype {array.dtype} is not a number type the space takes")
        if array.shape != space.shape:
            raise ValueError(f"shape {array.shape} is not {space.shape}")
        array = array.astype(space.dtype)
        if not isinstance(space, spaces.Box) and not space.contains(array):
            raise ValueError("values outside the space")
        return array
    if not space.contains(action):
        raise ValueError("not in the space")
    return action


def _fresh(value: Any) -> Any:
    """A copy of the arrays in `value`: an env may overwrite the buffers it returned."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, Mapping):
        return {key: _fresh(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_fresh(item) for item in value)
    return value


def _truthy(value: Any) -> bool:
    return bool(np.any(value)) if isinstance(value, np.ndarray) else bool(value)


def _small_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-friendly part of a gym info dict: scalars, short strings, arrays of up to MAX_INFO_ARRAY numbers."""
    small: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, str):
            small[str(key)] = value[:MAX_INFO_STR]
        elif isinstance(value, (bool, int, float, np.bool_, np.number)):
            small[str(key)] = value.item() if isinstance(value, np.generic) else value
        elif isinstance(value, (np.ndarray, list, tuple)):
            try:
                array = np.asarray(value)
            except ValueError:  # ragged
                continue
            if array.size <= MAX_INFO_ARRAY and array.dtype.kind in "biuf":
                small[str(key)] = array.tolist()
    return small


def _short(action: Any) -> str:
    text = np.array2string(action, precision=4, threshold=12) if isinstance(action, np.ndarray) else repr(action)
    return text if len(text) <= 120 else text[:117] + "..."
