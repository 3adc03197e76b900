"""Kinetix (`pip install 'hylo[kinetix]'`, kinetix-env 3.0.2 on JAX and Jax2D): 2D rigid-body levels in which motors
and thrusters must make a green shape touch a blue one without any green shape touching a red one. Real-time
chunking (Black et al. 2025, arXiv 2506.07339) reports its latency results on twelve of its `l` levels.

- **Tasks** are the levels shipped in the package, by its own names (`l/grasp_easy`, `m/h3_car_thrust`,
  `s/h8_unicycle_balance`), in splits `rtc` (the default: those of RTC's twelve levels that ship, in RTC's order),
  `l`, `m` and `s` (every level of the package's three size sets). `l/catapult`, `l/cartpole_thrust`,
  `l/catcher_v3` and `l/trampoline`, RTC's other four levels, come with RTC's code and not with the package: they
  are in no split (`unavailable_tasks()`).
- **Simulation**: every level runs with the `l` size's static parameters (12 polygons, 4 circles, 6 joints, 2
  thrusters, frame skip 2), the `m` and `s` levels padded to it with the package's `expand_env_state` as Kinetix
  does when it evaluates them in an `l` env, so that one compiled program serves every level. A step is 2 physics
  substeps of 1/60 s: 30 steps a second. An episode is the package's `max_timesteps`, 256 steps.
- **Episodes**: a level starts from its own saved state, the same for every seed. RTC's evaluation adds Gaussian
  noise of standard deviation 0.1 to every action number before the package clips it (RTC's `NoisyActionWrapper`):
  so does this benchmark (`-E action_noise_std=0.1`, the default; 0 gives the package's own deterministic dynamics).
  The noise is drawn from `jax.random.PRNGKey(seed)` (its two 32-bit words from the seed's 64 bits), split once a
  step, so the same seed gives the same episode whatever ran before it in the process.
- **Observations**: `state`, the package's `symbolic_flat` observation (679 float32, clipped by it to [-10, 10]),
  `instruction` (one English sentence per level), and with `render_images` `images/scene`, the package's pixel
  renderer at its pixel observation's size (125 x 125 RGB, uint8, upright).
- **Actions**: the package's continuous action type, 6 numbers: the target speed of the motors of each of the 4
  motor colours (joints bound to a colour share it), in [-1, 1], then the force of each of the 2 thruster colours,
  in [0, 1]. The package clips what lies outside. A non-finite action is refused (`InvalidAction`).
- **Success** is the package's own `info["GoalR"]`: a green shape touched a blue one. A green shape touching a red
  one ends the episode as a failure; a failure on the last step is reported as the episode's truncation.
- **Simulator failure**: a non-finite number anywhere in the simulator's state after a step raises
  `SimulationDiverged` (`infra_invalid`); the package would only end the episode.

**Compilation.** The reset, step and render programs are compiled once per process (`compilations()` counts them),
for JAX's CPU device whatever the default device is, at the first reset of the first env that needs them: every
later env and episode of the process reuses them. On 2 shared cores a worker's first reset took 19-35 s: 4.7 s to
import jax and the package, 2.5 s to load the first level, 11-25 s to trace and compile the step. JAX's persistent
compilation cache (which Kinetix itself recommends) keeps the compiled step across processes: hylo points it at
`~/.cache/hylo/jax-<cpu>` (`$XDG_CACHE_HOME` honoured; one directory per CPU model and feature set, since XLA's CPU
code is specific to them) unless the process already set a cache directory; tracing still takes about 5 s, and a
worker's first reset then took 12-17 s. `-E compilation_cache=false` leaves JAX's configuration alone. jaxlib 0.9
logs two error lines on every load from that cache (the tuning flags `+prefer-no-gather` / `+prefer-no-scatter`
compared as CPU features; jax issue 38445): the loads are correct, and those lines are dropped from what the
compile writes to stderr (logged at debug level). Each other level's first reset in a process loads it (0.7-1 s).

**A JAX policy** for `--agent module:Class`: a linear map of the state to a chunk of actions, motors through tanh
and thrusters through a sigmoid (as RTC's experts squash them), saved as `kinetix_policy.py` in the working
directory:

```python
import jax
import jax.numpy as jnp
import numpy as np

from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk


class LinearChunks(AgentBase):
    requirements = AgentRequirements(observation_keys=("state",), needs_images=False)

    def __init__(self, chunk_size: int = 8, seed: int = 0) -> None:
        self.chunk_size = chunk_size
        # Random weights, for the example: a trained policy loads its parameters here.
        self.weights = 0.05 * jax.random.normal(jax.random.PRNGKey(seed), (679, chunk_size * 6))
        self._chunk = jax.jit(self._forward)  # compiled once, at the first act

    def _forward(self, weights: jax.Array, state: jax.Array) -> jax.Array:
        out = (state @ weights).reshape(self.chunk_size, 6)
        return jnp.concatenate([jnp.tanh(out[:, :4]), jax.nn.sigmoid(out[:, 4:])], axis=1)

    def act(self, obs):
        return ActionChunk(np.asarray(self._chunk(self.weights, obs["state"])))
```

`hylo eval kinetix --agent kinetix_policy:LinearChunks -A chunk_size=8 --episodes 10`, or swept over latencies
with `hylo sweep kinetix --agent kinetix_policy:LinearChunks -A chunk_size=8 --latency-steps 0 1 2 4
--execution-steps 4`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import logging
import os
import platform
import string
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.conventions import ActionConvention
from hylo.core.environment import Environment, VideoCamera
from hylo.core.errors import HyloError, SimulationDiverged, UnknownChoice
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs.actions import finite_vector
from hylo.envs.benchmark import Benchmark, BenchmarkOption
from hylo.envs.images import resize_with_pad

log = logging.getLogger("hylo.kinetix")

INSTALL_HINT = "pip install 'hylo[kinetix]'"
MAX_EPISODE_STEPS = 256
"""The package's `EnvParams().max_timesteps`, every shipped level's."""
CONTROL_RATE_HZ = 30.0
"""1 / (dt x frame skip): 2 substeps of 1/60 s a step."""
STATE_SIZE = 679
"""The `symbolic_flat` observation's size with the `l` static parameters: 9 x 26 polygon features (the 2 walls and
the ceiling left out), 4 x 18 circle, 6 x 54 joint and 2 x 24 thruster features, and gravity."""
IMAGE_SIZE = 125
"""The package's pixel observation side: its 500-pixel screen downscaled 4 times."""
CAMERA = "scene"
ACTION_SIZE = 6
DEFAULT_NOISE_STD = 0.1
"""RTC's `ACTION_NOISE_STD`."""

RTC_LEVELS = (
    "l/grasp_easy",
    "l/catapult",
    "l/cartpole_thrust",
    "l/hard_lunar_lander",
    "l/mjc_half_cheetah",
    "l/mjc_swimmer",
    "l/mjc_walker",
    "l/h17_unicycle",
    "l/chain_lander",
    "l/catcher_v3",
    "l/trampoline",
    "l/car_launch",
)
"""The twelve levels real-time chunking evaluates on, in its order (its `worlds/l/*.json`)."""
SIZES = ("l", "m", "s")

ACTION_CONVENTION = ActionConvention(
    control="joint_velocity",
    rotation="none",
    gripper="none",
    units="normalized",
    labels=("motor_0", "motor_1", "motor_2", "motor_3", "thruster_0", "thruster_1"),
    low=(-1.0, -1.0, -1.0, -1.0, 0.0, 0.0),
    high=(1.0,) * ACTION_SIZE,
)
"""The package's `ContinuousActions`: motor i drives every revolute joint bound to colour i towards a relative angular
velocity of the action x the joint's speed (with bounded torque); thruster i pushes every thruster bound to colour i
with the action x its power. A joint the level marks automatic always runs at +1."""

FEATURE_NAMES = (("images/*", "observation.image"), ("state", "observation.state"), ("instruction", "task"))

GOAL = "make a green shape touch a blue shape without any green shape touching a red one"
"""The goal every Kinetix level shares: the instruction of a level that has no sentence of its own."""

INSTRUCTIONS: dict[str, str] = {
    "l/grasp_easy": "grasp the green block with the arm's gripper and carry it to the blue goal without letting it "
    "touch the red floor",
    "l/hard_lunar_lander": "fire the thrusters to land the green lander on the blue pad without touching the red "
    "ground",
    "l/mjc_half_cheetah": "make the half-cheetah run right until its green body touches the blue wall, without "
    "touching the red floor",
    "l/mjc_swimmer": "make the swimmer wriggle right along the floor until its green head touches the blue wall",
    "l/mjc_walker": "make the walker walk right until its green part touches the blue wall, without touching the red "
    "floor",
    "l/h17_unicycle": "balance the unicycle and ride it left until its green head touches the blue square, without "
    "touching the red floor",
    "l/chain_lander": "lower the green ball hanging on its chain onto the blue pad without letting it touch the red "
    "floor",
    "l/car_launch": "drive the car off its platform so that it flies over and its green pole touches the blue square",
}
"""RTC's shipped levels, each in one sentence read from its layout; every other level has `GOAL`."""


def _package_dir() -> Path | None:
    """Where the `kinetix` package is installed (None: it is not), found without importing it."""
    try:
        spec = importlib.util.find_spec("kinetix")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def shipped_levels() -> dict[str, list[str]]:
    """The package's levels by size set (`l`, `m`, `s`), each `<size>/<name>`; empty when it is not installed."""
    root = _package_dir()
    if root is None:
        return {}
    return {size: sorted(f"{size}/{path.stem}" for path in (root / "levels" / size).glob("*.json")) for size in SIZES}


def _splits() -> dict[str, list[str]]:
    rtc = [name for name in RTC_LEVELS if name in _every_level()]
    return {"rtc": rtc, **{size: shipped_levels().get(size, []) for size in SIZES}}


@functools.cache
def _every_level() -> frozenset[str]:
    return frozenset(name for names in shipped_levels().values() for name in names)


def unavailable_levels() -> dict[str, str]:
    """RTC's levels that the installed package does not ship → why."""
    return {
        name: "an RTC level that kinetix-env does not ship (it comes with RTC's own code, as worlds/" + name + ".json)"
        for name in RTC_LEVELS
        if name not in _every_level()
    }


def instruction_of(level: str) -> str:
    return INSTRUCTIONS.get(level, GOAL)


# One process compiles each program once: the compiled programs, the loaded levels and the counts live here.
_LOCK = threading.RLock()
_PROGRAMS: dict[str, _Programs] = {}  # by static configuration: every level runs in the `l` size's
_LEVELS: dict[str, Any] = {}
_COMPILATIONS: Counter[str] = Counter()


def compilations() -> dict[str, int]:
    """How many times this process compiled each of the env's programs (`reset`, `step`, `render`)."""
    with _LOCK:
        return dict(_COMPILATIONS)


@dataclass
class _Programs:
    """The compiled programs of one configuration, the package's objects they close over, and JAX's CPU device."""

    jax: Any
    kinetix: Any
    device: Any
    static_params: Any
    env_params: Any
    env: Any
    reset: Any
    step: Any
    render: Any = None


def _modules(cache: bool) -> SimpleNamespace:
    """jax and the package's modules (imported on first use: listing the benchmark imports neither)."""
    jax = importlib.import_module("jax")
    if cache:
        _use_compilation_cache(jax)
    return SimpleNamespace(
        jax=jax,
        jnp=importlib.import_module("jax.numpy"),
        environment=importlib.import_module("kinetix.environment"),
        utils=importlib.import_module("kinetix.environment.utils"),
        saving=importlib.import_module("kinetix.util.saving"),
        pixels=importlib.import_module("kinetix.render.renderer_pixels"),
    )


def _use_compilation_cache(jax: Any) -> None:
    """Point JAX's persistent compilation cache at a per-user, per-CPU directory unless one is already set."""
    if jax.config.jax_compilation_cache_dir:
        return
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    directory = base / "hylo" / f"jax-{platform.machine() or 'cpu'}-{_cpu_fingerprint()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("no persistent JAX compilation cache (%s): every process compiles Kinetix again", exc)
        return
    jax.config.update("jax_compilation_cache_dir", str(directory))


def _cpu_fingerprint() -> str:
    """A short hash of the CPU's model and feature flags: XLA's CPU code is compiled for them."""
    described = platform.processor()
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        wanted = ("model name", "flags", "Features", "CPU implementer", "CPU part")
        described = "\n".join(sorted({line.strip() for line in lines if line.split(":")[0].strip() in wanted}))
    return hashlib.blake2b(described.encode(), digest_size=6).hexdigest()


@contextlib.contextmanager
def _quiet_cpu_loader() -> Iterator[None]:
    """Hold back the XLA:CPU loader's false alarms that a compile writes to stderr (file descriptor 2) while the
    persistent cache loads a program; every other line is written out after the compile, as it came."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = []
            for line in captured.read().splitlines(keepends=True):
                if b"cpu_aot_loader" in line:
                    log.debug("%s", line.decode(errors="replace").strip()[:300])
                else:
                    kept.append(line)
            if kept:
                os.write(2, b"".join(kept))


def _cpu(jax: Any) -> Any:
    try:
        return jax.devices("cpu")[0]
    except RuntimeError:  # a process that enabled no CPU backend (JAX_PLATFORMS): its default device
        return jax.devices()[0]


def _programs(cache: bool) -> _Programs:
    """This process's compiled reset and step programs (compiled on the first call; `cache`: with the persistent
    compilation cache)."""
    with _LOCK:
        programs = _PROGRAMS.get("l")
        if programs is None:
            with _quiet_cpu_loader():
                programs = _PROGRAMS["l"] = _compile(_modules(cache))
        return programs


def _compile(m: SimpleNamespace) -> _Programs:
    jax, jnp = m.jax, m.jnp
    device = _cpu(jax)
    static_params = m.utils.static_env_params_from_size("l")
    env_params = m.environment.EnvParams()
    env = m.environment.make_kinetix_env(
        m.environment.ActionType.CONTINUOUS,
        m.environment.ObservationType.SYMBOLIC_FLAT,
        None,
        env_params,
        static_params,
        auto_reset=False,
    )

    def finite(state: Any) -> Any:
        leaves = [
            jnp.isfinite(leaf).all() for leaf in jax.tree.leaves(state) if jnp.issubdtype(leaf.dtype, jnp.floating)
        ]
        return jnp.stack(leaves).all()

    def reset(state: Any) -> Any:
        return env.get_obs(state), finite(state)

    def step(state: Any, key: Any, action: Any, noise_std: Any) -> Any:
        key, noise_key, step_key = jax.random.split(key, 3)
        noisy = action + jax.random.normal(noise_key, action.shape) * noise_std
        obs, state, reward, done, info = env.step_env(step_key, state, noisy, env_params)
        return state, key, (obs, reward, done, info["GoalR"], info["distance"], finite(state), state.timestep)

    with jax.default_device(device), warnings.catch_warnings():
        # The package calls jnp.clip with the argument names JAX 0.9 deprecates (a_min, a_max).
        warnings.filterwarnings("ignore", "Passing arguments 'a', 'a_min' or 'a_max'", DeprecationWarning)
        template = jax.device_put(m.utils.create_empty_env(static_params), device)
        key = jax.device_put(np.zeros(2, np.uint32), device)
        action = np.zeros(ACTION_SIZE, np.float32)
        started = time.perf_counter()
        compiled_reset = jax.jit(reset).lower(template).compile()
        compiled_step = jax.jit(step).lower(template, key, action, np.float32(0)).compile()
        _COMPILATIONS.update(("reset", "step"))
    log.info("Kinetix reset and step compiled in %.1f s", time.perf_counter() - started)
    return _Programs(jax, m, device, static_params, env_params, env, compiled_reset, compiled_step)


def _renderer(programs: _Programs) -> Any:
    """The compiled pixel renderer (compiled on the first frame asked for)."""
    if programs.render is not None:
        return programs.render
    with _LOCK, _quiet_cpu_loader():
        if programs.render is None:
            jax, m = programs.jax, programs.kinetix
            draw = m.pixels.make_render_pixels(programs.env_params, programs.static_params)

            def render(state: Any) -> Any:  # the renderer's x-major, y-up frame as an upright HWC image
                return draw(state).round().astype(m.jnp.uint8).transpose(1, 0, 2)[::-1]

            template = jax.device_put(m.utils.create_empty_env(programs.static_params), programs.device)
            with jax.default_device(programs.device):
                programs.render = jax.jit(render).lower(template).compile()
            _COMPILATIONS.update(("render",))
        return programs.render


def _level(programs: _Programs, name: str) -> Any:
    """The level's start state, loaded once per process and padded to the `l` size."""
    with _LOCK:
        level = _LEVELS.get(name)
        if level is None:
            jax, m = programs.jax, programs.kinetix
            with jax.default_device(programs.device), _quiet_cpu_loader():
                state, static_params, env_params = m.saving.load_from_json_file(name)
                if env_params != programs.env_params:
                    raise HyloError(f"Kinetix level {name} has environment parameters of its own: {env_params}")
                if static_params != programs.static_params:
                    state = m.saving.expand_env_state(state, programs.static_params)
                level = _LEVELS[name] = jax.device_put(state, programs.device)
        return level


def checked_noise_std(value: Any) -> float:
    """`action_noise_std` as a float, or ValueError: a number in [0, 1]."""
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0 <= value <= 1):
        raise ValueError(f"action_noise_std must be a number in [0, 1], got {value!r}")
    return float(value)


def episode_key(seed: int) -> np.ndarray[Any, Any]:
    """`jax.random.PRNGKey(seed)` as JAX builds it from a 64-bit seed: its high and low 32-bit words (for a seed
    below 2**32, exactly `PRNGKey(seed)`)."""
    if not 0 <= seed < 2**64:
        raise ValueError(f"a Kinetix episode seed is an integer in [0, 2**64), got {seed}")
    return np.array([seed >> 32, seed & 0xFFFF_FFFF], np.uint32)


class KinetixEnvironment(Environment):
    """Any Kinetix level, chosen by `task.task` (e.g. "l/grasp_easy") on reset; see the module's doc.

    Observation: `state` (679 float32), `instruction`, and — only with `render_images=True` — `images["scene"]`
    (125 x 125 x 3 uint8). Action: 6 floats, 4 motors in [-1, 1] and 2 thrusters in [0, 1], with Gaussian noise of
    `action_noise_std` added from the episode's seed. Success is the package's `info["GoalR"]`; episodes end at 256
    steps. `env_state()` / `set_env_state()` read and replace the package's `EnvState`.
    """

    render_images: bool = False  # `Environment.render_images`, as a plain attribute

    def __init__(
        self, render_images: bool = False, action_noise_std: float = DEFAULT_NOISE_STD, compilation_cache: bool = True
    ) -> None:
        self.render_images = render_images
        self.action_noise_std = checked_noise_std(action_noise_std)
        self.compilation_cache = compilation_cache
        obs_spaces: dict[str, spaces.Space[Any]] = {
            "state": spaces.Box(-10.0, 10.0, (STATE_SIZE,), np.float32),
            "instruction": spaces.Text(160, charset=string.printable),
        }
        if render_images:
            obs_spaces["images"] = spaces.Dict({CAMERA: spaces.Box(0, 255, (IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)})
        low = np.array(ACTION_CONVENTION.low, np.float32)
        self._spec = EnvSpec(
            observation_space=spaces.Dict(obs_spaces),
            action_space=spaces.Box(low, np.array(ACTION_CONVENTION.high, np.float32), (ACTION_SIZE,), np.float32),
            control_rate_hz=CONTROL_RATE_HZ,
            max_episode_steps=MAX_EPISODE_STEPS,
            name="kinetix",
            feature_names=FEATURE_NAMES,
            action_convention=ACTION_CONVENTION,
        )
        self._noise = np.float32(self.action_noise_std)
        self._programs: _Programs | None = None
        self._task: TaskInstance | None = None
        self._state: Any = None
        self._key: Any = None
        self._obs: Observation | None = None
        self._steps = 0
        self._ended = False

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def reset(self, task: TaskInstance) -> Observation:
        if task.task not in _every_level():
            if task.task in unavailable_levels():
                raise HyloError(f"Kinetix level {task.task} cannot run here: {unavailable_levels()[task.task]}")
            raise UnknownChoice("Kinetix level", task.task, sorted(_every_level()))
        key = episode_key(task.seed)
        programs = self._programs = self._programs or _programs(self.compilation_cache)
        level = _level(programs, task.task)
        obs, finite = programs.jax.device_get(programs.reset(level))
        if not finite:
            raise SimulationDiverged("non-finite start state", f"Kinetix level {task.task}")
        self._task, self._state = task, level
        self._key = programs.jax.device_put(key, programs.device)
        self._steps, self._ended = 0, False
        self._obs = self._observation(obs)
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._programs is None or self._obs is None or self._task is None:
            raise RuntimeError("step before the first reset")
        if self._ended:
            raise RuntimeError("step after the episode ended; reset first")
        array = finite_vector(action, ACTION_SIZE, "Kinetix takes (6,): 4 motors in [-1, 1], 2 thrusters in [0, 1]")
        programs = self._programs
        state, key, out = programs.step(self._state, self._key, array.astype(np.float32, copy=False), self._noise)
        obs, reward, done, solved, distance, finite, timestep = programs.jax.device_get(out)
        self._steps += 1
        if not finite:
            self._ended = True
            raise SimulationDiverged("non-finite state", f"Kinetix level {self._task.task}, step {self._steps}")
        self._state, self._key = state, key
        self._obs = self._observation(obs)
        truncated = int(timestep) >= MAX_EPISODE_STEPS
        terminated = bool(done) and (bool(solved) or not truncated)
        self._ended = terminated or truncated
        info = {"distance": float(distance), "timestep": int(timestep)}
        return StepResult(self._obs, float(reward), terminated, truncated and not terminated, bool(solved), info)

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def hold_action(self) -> Any:
        """The package's no-op: motors and thrusters off (gravity and momentum still act)."""
        return np.zeros(ACTION_SIZE, np.float32)

    def env_state(self) -> Any:
        """The package's `EnvState` of the current episode (a JAX pytree on the CPU device)."""
        if self._state is None:
            raise RuntimeError("no state before the first reset")
        return self._state

    def set_env_state(self, state: Any) -> None:
        """Go on from `state`, an `EnvState` of the same shapes as `env_state()`'s (a saved state, or a fault to
        inject); the next step starts from it."""
        if self._programs is None or self._state is None:
            raise RuntimeError("no state before the first reset")
        jax = self._programs.jax
        if jax.tree.structure(state) != jax.tree.structure(self._state):
            raise ValueError("set_env_state takes an EnvState of the same structure as env_state()'s")
        self._state = jax.device_put(state, self._programs.device)

    @property
    def video_camera(self) -> VideoCamera:
        return self

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
        """The scene at `size` (width, height; None: 125 x 125), padded to keep its aspect, for a video alone: it
        renders whether or not the observations carry frames."""
        if self._state is None:
            raise RuntimeError("video_frame before the first reset")
        frame = self._frame()
        return frame if size is None else resize_with_pad(frame, size[1], size[0])

    def close(self) -> None:
        self._programs = self._task = self._state = self._key = self._obs = None

    def _frame(self) -> np.ndarray[Any, Any]:
        assert self._programs is not None
        frame: np.ndarray[Any, Any] = np.array(self._programs.jax.device_get(_renderer(self._programs)(self._state)))
        return frame

    def _observation(self, state: np.ndarray[Any, Any]) -> Observation:
        assert self._task is not None
        obs = Observation(state=np.array(state, np.float32), instruction=instruction_of(self._task.task))
        if self.render_images:
            obs["images"] = {CAMERA: self._frame()}
        return obs


class KinetixBenchmark(Benchmark):
    """Kinetix's shipped levels: RTC's (`rtc`, the default) and the package's `l`, `m` and `s` sets; see the module's
    doc."""

    name = "kinetix"
    display_name = "Kinetix"
    default_split = "rtc"
    default_per_step_budget_sec = 0.5
    typical_reset_sec = 0.1  # 1 ms; a level's first reset in a worker loads it (0.7-1 s), 2 shared cores
    typical_step_sec = 0.005  # medians 2.1-2.5 ms (p90 3-4 ms), 3.1-3.7 ms rendering a frame
    typical_build_sec = 35.0  # a first reset's extra: 12-17 s with the compilation cache warm, 19-35 s cold
    result_packages = ("kinetix-env", "jax2d", "jax", "jaxlib")
    feature_names = FEATURE_NAMES
    action_convention = ACTION_CONVENTION
    observation_keys = {
        "state": "679 float32: the package's symbolic_flat observation of the l-size scene (polygons, circles, "
        "joints, thrusters, gravity), clipped to [-10, 10]",
        "instruction": "what to do, one English sentence per level (the shared Kinetix goal for most)",
        f"images/{CAMERA}": "125x125 RGB frame of the package's pixel renderer (only when rendering)",
    }
    request_options = (
        BenchmarkOption.number("action_noise_std", 0.0, 1.0, "Gaussian noise added to every action number (RTC: 0.1)"),
    )

    def __init__(self, action_noise_std: float = DEFAULT_NOISE_STD, compilation_cache: bool = True) -> None:
        self.action_noise_std = checked_noise_std(action_noise_std)
        self.compilation_cache = bool(compilation_cache)

    def available(self) -> tuple[bool, str]:
        for package in ("kinetix", "jax"):
            if importlib.util.find_spec(package) is None:
                return False, f"{INSTALL_HINT} (no {package} module)"
        return True, ""

    def splits(self) -> list[str]:
        return list(_splits())

    def tasks(self, split: str) -> list[str]:
        return list(_splits()[self.check_split(split)])

    def unavailable_tasks(self) -> dict[str, str]:
        return unavailable_levels()

    def check_tasks(self, split: str, tasks: Sequence[str] | None) -> list[str]:
        for task in tasks or ():
            why = unavailable_levels().get(task)
            if why is not None:
                raise HyloError(f"Kinetix level {task} cannot run here: {why}")
        return super().check_tasks(split, tasks)

    def make_env(self, *, render_images: bool = False) -> KinetixEnvironment:
        ok, why = self.available()
        if not ok:
            raise HyloError(f"Kinetix is not installed: {why}")
        return KinetixEnvironment(render_images, self.action_noise_std, self.compilation_cache)

    def default_step_budget(self, task: str) -> int:
        return MAX_EPISODE_STEPS

    def instruction(self, task: str) -> str | None:
        return instruction_of(task)
