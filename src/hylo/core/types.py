"""The records that cross the Kernel's boundaries: tasks, observations, step results, environment specs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.conventions import ActionConvention

Action = Any
"""One action as the environment takes it: an int for a Discrete space, an array for a Box, a dict for a Dict."""

EMPTY_INFO: Mapping[str, Any] = MappingProxyType({})


class NodesetMode(StrEnum):
    """Where a graph's nodeset runs (and with an env nodeset, its env and env panel): in the worker's process, or in
    a subprocess of its own."""

    LOCAL = "local"
    SERVER = "server"


class Observation(dict[str, Any]):
    """What the agent sees. A mapping with canonical keys where the benchmark has them.

    - `images`: camera name -> HWC uint8 array
    - `state`: proprioceptive / state float vector
    - `instruction`: the task's language instruction

    plus benchmark-specific keys. Environments may return any mapping; this class only adds typed accessors.
    """

    __slots__ = ()

    @property
    def images(self) -> Mapping[str, Any]:
        images: Mapping[str, Any] = self.get("images", EMPTY_INFO)
        return images

    @property
    def state(self) -> Any:
        return self.get("state")

    @property
    def instruction(self) -> str | None:
        value = self.get("instruction")
        return None if value is None else str(value)


class StepResult(NamedTuple):
    """What one environment step produced, the new observation included."""

    obs: Mapping[str, Any]
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    success: bool = False
    info: Mapping[str, Any] = EMPTY_INFO


def _stable_repr(value: Any) -> str:
    if isinstance(value, np.ndarray):  # repr elides the middle of large arrays
        data = np.ascontiguousarray(value).tobytes()
        return f"ndarray({value.dtype},{value.shape},{hashlib.blake2b(data, digest_size=12).hexdigest()})"
    return repr(value)


MAX_SEED = 2**63 - 1
"""The largest base seed or episode index: what a signed 64-bit integer (numpy's, SQLite's) holds."""


def derive_seed(*parts: object) -> int:
    """A 31-bit seed that is a pure function of `parts` (stable across processes and Python versions)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF


@dataclass(frozen=True, slots=True)
class TaskInstance:
    """One placed episode: which task of which benchmark, and the seed the simulator is reset with.

    Its identity (`episode_id`) and `seed` are pure functions of (benchmark, split, task, index, base_seed), never of
    worker count, batch size or how many resets happened before. `id_prefix`, when a benchmark sets it, is a shorter
    form of `<benchmark>/<split>/<task>` in the episode id (the seed and `digest` do not depend on it).
    """

    benchmark: str
    task: str
    index: int = 0
    split: str = "default"
    base_seed: int = 0
    seed: int = -1
    instruction: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    id_prefix: str = ""

    def __post_init__(self) -> None:
        for name in ("index", "base_seed", "seed"):  # numpy integers in, plain ints out (they go to JSON logs)
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"TaskInstance.{name} must be an int, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.index < 0:
            raise ValueError(f"episode index must be >= 0, got {self.index}")
        if self.seed == -1:
            object.__setattr__(
                self, "seed", derive_seed(self.benchmark, self.split, self.task, self.index, self.base_seed)
            )
        elif self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")

    @property
    def digest(self) -> str:
        """A short hash of everything that defines the episode (for logs that must detect a changed task)."""
        params = sorted((str(k), _stable_repr(v)) for k, v in self.params.items())
        parts = (self.benchmark, self.split, self.task, self.index, self.base_seed, self.seed, self.instruction, params)
        return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()

    @property
    def episode_id(self) -> str:
        """Deterministic key of this episode, e.g. `babyai/test/GoToLocal/0003@s0` (`gym/default/pusht-v0/0003@s0`
        with an `id_prefix`)."""
        prefix = self.id_prefix or f"{self.benchmark}/{self.split}/{self.task}"
        return f"{prefix}/{self.index:04d}@s{self.base_seed}"


@dataclass(frozen=True, slots=True)
class EnvCapabilities:
    """What an environment can do beyond the core interface.

    - `hold_action`: `hold_action()` returns a safe action to execute when the realtime queue is empty
    - `self_paced`: the environment paces itself in wall-clock time (a real robot); the Kernel never sleeps for it
    - `privileged_state`: `privileged_state(name)` exposes simulator state to a benchmark's own expert
    - `success_signal`: the environment says when a task is solved (`StepResult.success`); an env that only rewards
      (CartPole) has none, and its reports show the return instead of a success rate that could only be 0
    """

    hold_action: bool = False
    self_paced: bool = False
    privileged_state: bool = False
    success_signal: bool = True


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """Static description of an environment: spaces (gymnasium), control rate and default step budget.

    `feature_names` maps its observation keys to the named features of datasets and the policies trained on them
    (`hylo.core.features`); `action_convention` says what its actions' numbers mean (`hylo.core.conventions`)."""

    observation_space: spaces.Space[Any]
    action_space: spaces.Space[Any]
    control_rate_hz: float = 10.0
    max_episode_steps: int | None = None
    name: str = "env"
    feature_names: tuple[tuple[str, str], ...] = ()
    action_convention: ActionConvention | None = None

    def __post_init__(self) -> None:
        if not self.control_rate_hz > 0:
            raise ValueError(f"control_rate_hz must be > 0, got {self.control_rate_hz}")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {self.max_episode_steps}")

    @property
    def dt(self) -> float:
        """Seconds of simulated time per step."""
        return 1.0 / self.control_rate_hz
