"""`gym:<id>`: any Gymnasium environment as a hylo Environment, and as a benchmark of one task (the id itself).

`<id>` is `Env-vN`, `<namespace>/Env-vN` (the namespace's module is imported when the id is not registered yet:
`gym_pusht/PushT-v0`) or `<module>:<id>` (gymnasium imports the module). An RGB image observation becomes
`images/pixels`, any other non-Dict observation `state`; a Dict observation keeps its keys, with LeRobot's names
mapped to hylo's (`pixels` → `images/pixels`, a `pixels` dict → `images/<camera>`, `agent_pos` → `state`; a `mission`
string is also the `instruction`); `render_images=True` adds `images/render` to an env whose observation has no
camera of its own (one that has gives its own, as LeRobot's policies take them, and renders nothing more). Success
comes from `info["is_success"]`, `info["success"]` or `info["succeed"]` (SO-101, gym-hil); an env whose steps carry
neither has no success signal (its report shows the return). MuJoCo-based envs are watched for divergence on every
step (see `mujoco_watch`).

One module past the usual size on purpose: the observation-key mapping, the action conformance and the env are one
contract with gymnasium's spaces, read and changed together (the id rules live in `gym_ids`, what a request may set
in `gym_options`).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import keyword
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import gymnasium
import gymnasium.spaces as spaces
import numpy as np
from gymnasium.envs.registration import EnvSpec as GymSpec
from gymnasium.envs.registration import load_env_creator, parse_env_id

from hylo.core.conventions import ActionConvention
from hylo.core.environment import Environment
from hylo.core.errors import HyloError, InvalidAction, UnknownChoice
from hylo.core.types import Action, EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs import hil, so101
from hylo.envs.benchmark import Benchmark, BenchmarkOption, BenchmarkOptionError, check_request_options
from hylo.envs.gym_ids import short_env_name
from hylo.envs.gym_options import MAKE_OPTIONS, constructor_keywords, is_compat_id, request_options
from hylo.envs.mujoco_watch import DivergenceWatch, find_mjdata
from hylo.envs.so101 import ACTION_CONVENTION as SO101_ACTIONS

DEFAULT_STEP_BUDGET = 1000
"""Step budget of an env registered without `max_episode_steps`."""
DEFAULT_CONTROL_RATE_HZ = 10.0

FEATURE_NAMES = (
    ("images/pixels", "observation.image"),
    ("images/*", "observation.images.*"),
    ("state", "observation.state"),
    ("environment_state", "observation.environment_state"),
    ("instruction", "task"),
)
"""LeRobot's names for a gym env's observation (`lerobot.envs.utils.preprocess_observation`): `pixels` is
`observation.image`, each camera of a `pixels` dict `observation.images.<camera>`, `agent_pos` (hylo's `state`)
`observation.state`."""

T = TypeVar("T")

ACTION_CONVENTIONS: dict[str, ActionConvention] = {
    "gym_pusht/": ActionConvention(
        control="planar_position", rotation="none", gripper="none", frame="world", units="pixels",
        labels=("x", "y"), low=(0.0, 0.0), high=(512.0, 512.0),
    ),
    "gym_aloha/": ActionConvention(
        control="joint_position", rotation="none", gripper="open_positive", frame="base", units="radians",
        labels=tuple(
            f"{arm}_{joint}"
            for arm in ("left", "right")
            for joint in ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper")
        ),
    ),
    "lerobot_env_so101/": SO101_ACTIONS,
    "gym_hil/PandaPickCube-": hil.ACTION_CONVENTION,
    "gym_hil/PandaArrangeBoxes-": hil.ACTION_CONVENTION,
}  # fmt: skip
"""The action conventions of the gym envs hylo knows, by id prefix: gym-pusht moves its agent to a target point (pixels,
0-512); gym-aloha takes each arm's six joint positions and a gripper position normalised to 0 (closed) - 1 (open)
(`gym_aloha.tasks.sim`, `unnormalize_puppet_gripper_position`); SO-101 (`hylo.envs.so101`) moves its grasp point."""

PRIVILEGED_READERS: dict[str, Callable[[Any, str], Any]] = {
    "lerobot_env_so101/": so101.read_privileged,
    "gym_hil/": hil.read_privileged,
}
"""The gym envs whose simulator state a benchmark's own expert may read (`privileged_state`), by id prefix."""

EXPERTS: dict[str, Callable[[], Any]] = {
    "lerobot_env_so101/SO101PickPlace-": so101.SO101PickPlaceExpert,
    "gym_hil/PandaPickCube-": hil.PandaPickExpert,
}
"""The gym envs with a scripted expert (`--agent expert`), by id prefix."""

CHEAP_RENDER: dict[str, Callable[[Any], None]] = {"gym_hil/": hil.cheap_render}
"""The gym envs the `cheap_render` option applies to (cameras without shadows or anti-aliasing), by id prefix."""
CHEAP_RENDER_OPTION = BenchmarkOption.flag(
    "cheap_render", "render the cameras without shadows or anti-aliasing: faster, and other images"
)

LISTS_ITS_CAMERAS = ("gym_hil/",)
"""The gym envs whose `render()` is a list of camera frames, not one frame: built without rendering (gym-hil gives its
cameras as observations with `image_obs=True`)."""

SEEDED_RESETS: dict[str, Callable[[Any, int | None], Any]] = {"gym_hil/": hil.seeded_reset}
"""The gym envs that sample their episode outside the generator `reset(seed=...)` seeds, and how to reset them."""

MAKE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gym_hil/PandaPickCube-": {"reset_delay_seconds": 0.0},
    "gym_hil/PandaArrangeBoxes-": {"reset_delay_seconds": 0.0},
}
"""`gymnasium.make` options hylo sets unless the run sets them: gym-hil's wrapped ids sleep a second at each reset."""


def _by_prefix(table: Mapping[str, T], env_id: str) -> T | None:
    return next((each for prefix, each in table.items() if env_id.startswith(prefix)), None)


def action_convention(env_id: str) -> ActionConvention | None:
    """The declared action convention of the gym env `env_id` (None: unknown)."""
    return _by_prefix(ACTION_CONVENTIONS, env_id)


SUCCESS_KEYS = ("is_success", "success", "succeed")
MAX_INFO_ARRAY = 4
"""Info arrays with more elements than this are dropped from `StepResult.info`."""
MAX_INFO_STR = 200

_NOT_TEXT = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict, spaces.Tuple)


EXTRAS = {"gym_pusht": "pusht", "gym_aloha": "aloha", "lerobot_env_so101": "so101", "gym_hil": "hil"}
"""The Gymnasium namespaces whose packages hylo declares as extras (`pip install 'hylo[pusht]'`). Their modules are
imported for an unregistered id even where imports are refused (an HTTP request): they are known packages."""


def install_hint(module: str) -> str:
    """`; install it with: pip install 'hylo[<extra>]'` for a module of one of hylo's extras, else empty."""
    extra = EXTRAS.get(module.partition(".")[0])
    return f"; install it with: pip install 'hylo[{extra}]'" if extra else ""


class NamespaceRefused(HyloError):
    """A Gymnasium id whose namespace module would be imported where imports are refused (an HTTP request)."""


class CompatIdRefused(UnknownChoice):
    """A request naming one of gymnasium's old-gym compatibility ids (`GymV21Environment-v0`,
    `GymV26Environment-v0`): they build whatever env an `env_id` names, importing its module."""

    def __init__(self, env_id: str) -> None:
        HyloError.__init__(  # UnknownChoice's fields, its own words: the id is registered, not unknown
            self,
            f"benchmark 'gym:{env_id}' is refused over HTTP: it builds another library's env from the id it is "
            "given, importing that id's module; only the command line may name it",
        )
        self.what, self.value, self.choices = "benchmark", f"gym:{env_id}", ["gym:<id>"]


def registered_spec(env_id: str, *, allow_import: bool = True) -> GymSpec:
    """Gymnasium's registration of `env_id`, importing the `module:` part first, or else the id's namespace when it
    is not registered yet and names a module (`gym_pusht/PushT-v0` imports `gym_pusht`); UnknownChoice when there is
    none. Without `allow_import` only the namespaces of hylo's extras (`EXTRAS`) are imported (`NamespaceRefused`)."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise HyloError(
                f"gymnasium environment {env_id!r}: cannot import module {module!r}: {exc}{install_hint(module)}"
            ) from exc
    elif name not in gymnasium.registry:
        _import_namespace(env_id, name, allow_import)
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error:
        known = sorted(gymnasium.registry)
        close = difflib.get_close_matches(name, known, n=8, cutoff=0.5) or known
        # another package's env is registered when its module is imported: `minigrid:MiniGrid-Empty-5x5-v0`
        raise UnknownChoice("gymnasium environment", env_id, [*close, "<namespace>/<id>", "<module>:<id>"]) from None


def _import_namespace(env_id: str, name: str, allow_import: bool) -> None:
    """Import the namespace of `name` when it is a module name: its import registers the id (as LeRobot's packages
    do). A namespace that is no installed module is left to the unknown-id error, unless it is one of hylo's extras
    (then the error says what to install)."""
    try:
        namespace = parse_env_id(name)[0]
    except gymnasium.error.Error:
        return  # malformed: the unknown-id error names it
    if namespace is None or not namespace.isidentifier() or keyword.iskeyword(namespace):
        return
    if not allow_import and namespace not in EXTRAS:
        raise NamespaceRefused(
            f"gymnasium environment {env_id!r} is not registered here, and its namespace module {namespace!r} is "
            f"imported only from the command line (here only ids already registered, or of the namespaces "
            f"{', '.join(sorted(EXTRAS))}, are accepted)"
        )
    try:
        importlib.import_module(namespace)
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == namespace and namespace not in EXTRAS:
            return  # a namespace that is not a module (`ALE`): the unknown-id error lists the ids
        raise HyloError(
            f"gymnasium environment {env_id!r}: cannot import its namespace module {namespace!r}: "
            f"{exc}{install_hint(namespace)}"
        ) from exc


def _creator(registered: GymSpec) -> Any | None:
    """The env's class or factory; None when it cannot be loaded (`available()` says why)."""
    creator: Any = registered.entry_point
    if isinstance(creator, str):
        try:
            creator = load_env_creator(creator)
        except (ImportError, gymnasium.error.Error):
            return None
    return creator


def renders_frames(registered: GymSpec) -> bool:
    """Whether the env can render RGB frames: its class lists `rgb_array` among its `render_modes` (a factory that
    declares none is tried). An env that cannot is built without rendering: an agent that merely takes camera frames
    where there are some still runs on it, one that requires them is refused at bind time."""
    if registered.id.startswith(LISTS_ITS_CAMERAS):
        return False
    creator = _creator(registered)
    if creator is None:
        return True  # unavailable: `available()` says why
    metadata = getattr(creator, "metadata", None)
    modes = metadata.get("render_modes") if isinstance(metadata, Mapping) else None
    return modes is None or "rgb_array" in modes


def check_make_kwargs(env_id: str, registered: GymSpec, kwargs: Mapping[str, Any]) -> None:
    """Refuse a `gymnasium.make` keyword argument the env cannot take, naming it and those it accepts (when its
    constructor lists them); `render_mode` is hylo's to set."""
    if "render_mode" in kwargs:
        raise BenchmarkOptionError(
            f"gymnasium environment {env_id!r}: hylo sets render_mode itself (rgb_array when frames are rendered); "
            "drop the render_mode option"
        )
    creator = _creator(registered)
    if creator is None:
        return  # unavailable: `available()` says why
    accepted = _keywords(creator)
    if accepted is None:
        return
    unknown = sorted(set(kwargs) - set(accepted) - set(MAKE_OPTIONS))
    if unknown:
        raise BenchmarkOptionError(
            f"gymnasium environment {env_id!r} takes no option {unknown[0]!r}; its options: "
            f"{', '.join([*(a for a in accepted if a != 'render_mode'), *MAKE_OPTIONS])}"
        )


def _keywords(creator: Any) -> list[str] | None:
    """The keyword arguments `creator` accepts; None when it takes any (`**kwargs`) or cannot be inspected."""
    if not callable(creator):
        return None
    try:
        parameters = list(inspect.signature(creator).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in parameters if p.kind in kinds]


def gym_request_options(registered: GymSpec) -> tuple[BenchmarkOption, ...]:
    """The options a request may set on the env `registered` (`gym_options.request_options`): looked up from its
    constructor's keywords and its entry point's module, nothing built."""
    creator = _creator(registered)
    entry_point = registered.entry_point
    module = entry_point.partition(":")[0] if isinstance(entry_point, str) else getattr(creator, "__module__", "")
    return request_options(module, constructor_keywords(creator) if creator is not None else None)


class ObservationKeys:
    """How a gymnasium observation becomes a hylo one, decided once from the observation space:

    - a non-Dict observation is `state`, or `images/pixels` when it is an RGB image (H×W×3 uint8);
    - a Dict observation of images only (cameras: gym-aloha's `{"top": ...}`) is `images/<camera>`;
    - any other Dict observation keeps its keys, but LeRobot's (gym-pusht, gym-aloha) become hylo's: an image
      `pixels` is `images/pixels`, a `pixels` dict of images is `images/<camera>`, `agent_pos` is `state` (unless the
      env has a `state` too); `environment_state` stays as it is. A `mission` string is also the `instruction`.
    """

    def __init__(self, space: spaces.Space[Any]) -> None:
        self.dict_obs = isinstance(space, spaces.Dict)
        raw: dict[str, spaces.Space[Any]] = dict(space.spaces) if isinstance(space, spaces.Dict) else {"": space}
        self.images: dict[str, tuple[str, ...]] = {}  # image name → where it is in the raw observation
        self.image_space: dict[str, spaces.Space[Any]] = {}
        self.renamed: dict[str, str] = {}  # raw key → hylo key
        if not self.dict_obs:
            if _is_image(space):
                self._image("pixels", (), space)
            else:
                self.renamed[""] = "state"
        else:
            consumed: set[str] = set()  # raw keys that became images
            pixels = raw.get("pixels")
            if "images" in raw:
                pass  # the env's own `images`: kept as they are
            elif _all_images(raw):  # a dict of cameras (gym-aloha's obs_type "pixels": {"top": ...})
                for camera, sub in raw.items():
                    self._image(str(camera), (camera,), sub)
                consumed = set(raw)
            elif _is_image(pixels):
                self._image("pixels", ("pixels",), raw["pixels"])
                consumed = {"pixels"}
            elif isinstance(pixels, spaces.Dict) and _all_images(pixels.spaces):
                for camera, sub in pixels.spaces.items():
                    self._image(str(camera), ("pixels", camera), sub)
                consumed = {"pixels"}
            for key in raw:
                if key not in consumed:
                    self.renamed[key] = "state" if key == "agent_pos" and "state" not in raw else key
        mission = raw.get("mission")
        self.mission = (
            self.dict_obs and mission is not None and "instruction" not in raw and not isinstance(mission, _NOT_TEXT)
        )
        self._raw = raw

    def _image(self, name: str, path: tuple[str, ...], space: spaces.Space[Any]) -> None:
        self.images[name] = path
        self.image_space[name] = space

    def image_spaces(self) -> dict[str, spaces.Space[Any]]:
        return dict(self.image_space)

    def spaces(self) -> dict[str, spaces.Space[Any]]:
        """The hylo observation's spaces, by key."""
        out = {self.renamed[key]: self._raw[key] for key in self.renamed}
        if self.mission:
            out["instruction"] = self._raw["mission"]
        if self.images:
            out["images"] = spaces.Dict(self.image_spaces())
        return out

    def observation(self, raw: Any) -> Observation:
        """The hylo observation of a raw one (its arrays copied: an env may overwrite the buffers it returned)."""
        if not self.dict_obs:
            raw = {"": raw}
        obs = Observation((hylo_key, _fresh(raw[key])) for key, hylo_key in self.renamed.items())
        if self.mission:
            obs["instruction"] = obs["mission"]
        if self.images:
            images = {}
            for name, path in self.images.items():
                value = raw[""] if not path else raw
                for part in path:
                    value = value[part]
                images[name] = _fresh(value)
            obs["images"] = images
        return obs


def _is_image(space: spaces.Space[Any] | None) -> bool:
    return isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3 and space.shape[-1] == 3


def _all_images(named: Mapping[str, spaces.Space[Any]]) -> bool:
    return bool(named) and all(_is_image(sub) for sub in named.values())


class GymEnvironment(Environment):
    """One gymnasium env (built once, with `gymnasium.make`), reset to `task.seed` for each episode.

    `step` accepts an action of the action space's structure (shape, type, keys) and refuses any other with
    `InvalidAction`; a Box action out of bounds is passed on (the shield clips it). For a MuJoCo env, a divergence
    raises `SimulationDiverged` and a bad control `InvalidAction`.
    """

    def __init__(
        self, env_id: str, *, render_images: bool = False, make_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        self._can_render = renders_frames(registered_spec(env_id))
        render_images = render_images and self._can_render
        self.env_id = env_id
        self._make_kwargs = {**(_by_prefix(MAKE_DEFAULTS, env_id) or {}), **(make_kwargs or {})}
        self._cheap_render = bool(self._make_kwargs.pop(CHEAP_RENDER_OPTION.name, False))
        self._reset = _by_prefix(SEEDED_RESETS, env_id) or (lambda env, seed: env.reset(seed=seed))
        self._renders = render_images  # whether the env was made with render_mode="rgb_array"
        self._env = env = self._make(render_images)
        self._render_images = render_images
        self._obs: Observation | None = None
        self._ended = False
        self._closed = False
        self._signalled: bool | None = None  # whether a step's info has carried a success key (None: no step yet)

        self._keys = keys = ObservationKeys(env.observation_space)
        if keys.images:  # cameras of its own: an agent is given those, and nothing more is rendered for it
            self._can_render = self._render_images = render_images = False
        obs_spaces = keys.spaces()
        if render_images:
            images = obs_spaces.get("images")
            if images is not None:
                raise HyloError(f"{env_id!r} has an observation key 'images' already; cannot add its rendering")
            env.reset(seed=0)  # a first frame, for its size (every episode reseeds)
            frame = self._render()
            render_space = spaces.Box(0, 255, frame.shape, np.uint8)
            obs_spaces["images"] = spaces.Dict({**keys.image_spaces(), "render": render_space})

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
            feature_names=FEATURE_NAMES,
            action_convention=action_convention(env_id),
        )
        self._mjdata = find_mjdata(env)
        self._watch = DivergenceWatch(lambda: self._mjdata) if self._mjdata is not None else None
        self._privileged = _by_prefix(PRIVILEGED_READERS, env_id)

    def _make(self, render: bool) -> gymnasium.Env[Any, Any]:
        kwargs = dict(self._make_kwargs)
        if render:  # only then: an env without a render_mode parameter still builds
            kwargs["render_mode"] = "rgb_array"
        try:
            env = gymnasium.make(self.env_id, **kwargs)
        except (ImportError, gymnasium.error.Error) as exc:
            raise HyloError(f"gymnasium could not make {self.env_id!r}: {exc}") from exc
        cheapen = _by_prefix(CHEAP_RENDER, self.env_id)
        if self._cheap_render and cheapen is not None:
            cheapen(env)
        return env

    @property
    def render_images(self) -> bool:
        """Whether observations carry `images["render"]`. Switching it on for an env made without rendering (for
        a recorded episode) remakes the env with `render_mode="rgb_array"`; takes effect at the next reset. An env
        that cannot render (`renders_frames`), or whose observation has cameras of its own, stays without."""
        return self._render_images

    @render_images.setter
    def render_images(self, on: bool) -> None:
        on = on and self._can_render
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
        """A hold action for a Box action space; a success signal unless the steps so far carried no success key in
        their info (a reward-only env, like CartPole)."""
        return EnvCapabilities(
            hold_action=isinstance(self._spec.action_space, spaces.Box),
            success_signal=self._signalled is not False,
            privileged_state=self._privileged is not None,
        )

    def privileged_state(self, name: str) -> Any:
        """The simulator state a benchmark's own expert reads (`PRIVILEGED_READERS`: SO-101's, `hylo.envs.so101`)."""
        if self._privileged is None:
            return super().privileged_state(name)
        return self._privileged(self._env, name)

    def __enter__(self) -> GymEnvironment:
        return self

    @property
    def gym_env(self) -> gymnasium.Env[Any, Any]:
        """The gymnasium env itself, wrappers included."""
        return self._env

    def reset(self, task: TaskInstance) -> Observation:
        raw, _ = self._reset(self._env, task.seed)
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
        keys = [key for key in SUCCESS_KEYS if key in info]
        self._signalled = self._signalled or bool(keys)
        success = any(_truthy(info[key]) for key in keys)
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
        obs = self._keys.observation(raw)
        if self._render_images:
            obs["images"] = {**obs.get("images", {}), "render": self._render()}
        return obs

    def _render(self) -> np.ndarray[Any, Any]:
        frame = self._env.render()
        if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[-1] != 3:
            shown = frame.shape if isinstance(frame, np.ndarray) else type(frame).__name__
            raise HyloError(f"{self.env_id}: render() returned {shown}, not an HxWx3 image")
        return np.array(frame, dtype=np.uint8)


class GymBenchmark(Benchmark):
    """`gym:<id>`: one split, one task (the id itself), on a `GymEnvironment` made with `make_kwargs` (the run's
    `-E key=value` options: `gymnasium.make` keyword arguments, checked against the env's constructor). A request's
    options (`request`, by default where imports are refused) are only those `gym_options` declares for the env,
    within their bounds, and a request may not name the old-gym compatibility ids (`gym_options.COMPAT_NAMES`).

    Its episode ids are `gym/<split>/<short name>/<index>@s<seed>` (`short_env_name`: `gym/default/pusht-v0/0000@s0`);
    their seeds derive from the benchmark name and the full id, as they did when the ids were the long form
    `gym:<id>/<split>/<id>/<index>@s<seed>` (a run logged then keeps that form when it is resumed)."""

    default_split = "default"
    default_per_step_budget_sec = 0.5
    observation_keys = {
        "state": "a non-Dict observation that is not an image, or LeRobot's `agent_pos` (a Dict observation keeps "
        "its other keys)",
        "images/pixels": "an RGB image observation (HxWx3 uint8): the whole observation, or LeRobot's `pixels`",
        "images/<camera>": "each image of a LeRobot `pixels` dict, or of a Dict observation of images only "
        "(gym-aloha: `images/top`)",
        "environment_state": "LeRobot's environment state, as the env gives it (gym-pusht: the T's 16 keypoint "
        "coordinates)",
        "instruction": "a Dict observation's `mission` string",
        "images/render": "env.render() as an HxWx3 uint8 frame, when rendering",
    }

    def __init__(
        self,
        env_id: str,
        *,
        allow_import: bool = True,
        make_kwargs: Mapping[str, Any] | None = None,
        request: bool | None = None,
    ) -> None:
        request = not allow_import if request is None else request
        if request and is_compat_id(env_id):
            raise CompatIdRefused(env_id)
        self.env_id = env_id
        self.feature_names = FEATURE_NAMES
        self.action_convention = action_convention(env_id)
        self._registered = registered = registered_spec(env_id, allow_import=allow_import)
        if request and is_compat_id(env_id, registered.entry_point):
            raise CompatIdRefused(env_id)
        named = cast(Any, self)  # class-level on other benchmarks; here they depend on the id
        named.name = f"gym:{env_id}"
        named.display_name = env_id
        cheap = _by_prefix(CHEAP_RENDER, env_id) is not None
        named.request_options = (*gym_request_options(registered), *((CHEAP_RENDER_OPTION,) if cheap else ()))
        self.make_kwargs = dict(make_kwargs or {})
        if request:
            check_request_options(self.name, self.request_options, self.make_kwargs)
        if CHEAP_RENDER_OPTION.name in self.make_kwargs and not cheap:
            raise BenchmarkOptionError(f"gymnasium environment {env_id!r} has no cheap_render option")
        passed = {key: value for key, value in self.make_kwargs.items() if key != CHEAP_RENDER_OPTION.name}
        if passed:
            check_make_kwargs(env_id, registered, passed)

    def splits(self) -> list[str]:
        return [self.default_split]

    def tasks(self, split: str) -> list[str]:
        self.check_split(split)
        return [self.env_id]

    def episode_prefix(self, split: str, task: str) -> str:
        return f"gym/{split}/{short_env_name(task)}"

    def make_env(self, *, render_images: bool = False) -> GymEnvironment:
        return GymEnvironment(self.env_id, render_images=render_images, make_kwargs=self.make_kwargs)

    def default_step_budget(self, task: str) -> int:
        given = self.make_kwargs.get("max_episode_steps")
        if isinstance(given, int) and not isinstance(given, bool) and given > 0:
            return given
        return self._registered.max_episode_steps or DEFAULT_STEP_BUDGET

    def instruction(self, task: str) -> str | None:
        return None

    def expert(self) -> Any | None:
        make = _by_prefix(EXPERTS, self.env_id)
        return None if make is None else make()

    def available(self) -> tuple[bool, str]:
        entry_point = self._registered.entry_point
        if isinstance(entry_point, str):
            try:
                load_env_creator(entry_point)
            except (ImportError, gymnasium.error.Error) as exc:
                return False, f"{self.env_id}: {exc}{install_hint(entry_point.partition(':')[0])}"
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
        start = int(space.start)
        if not start <= value < start + int(space.n):  # no nearest choice to clip to: malformed
            raise ValueError(f"{value} is not one of its choices")
        return value
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        array = np.asarray(action)
        floats = isinstance(space, spaces.Box) and space.dtype is not None and space.dtype.kind == "f"
        kinds = "biuf" if floats else "biu"
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
