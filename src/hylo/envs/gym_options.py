"""What a request may set on a `gym:<id>` benchmark, and which ids it may not name.

A Gymnasium env's constructor takes whatever its author chose: MuJoCo envs an `xml_file` they read, sizes they
allocate, FrozenLake a `desc` of any size; `GymV21Environment-v0` / `GymV26Environment-v0` build another library's env
from an `env_id`, importing its module. The command line (the operator) passes any of them; a request (`env_args`
over HTTP) only the options of `GYM_OPTIONS` the env takes, each bounded, and the enumerated ones of
`ENUMERATED` where the env's own code lists their values. Nothing here builds an env or reads a file.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

from hylo.envs.benchmark import BenchmarkOption

MAX_SIZE = 4096
"""The largest frame side (pixels) a request may ask for."""

MAKE_OPTIONS = ("max_episode_steps", "disable_env_checker")
"""The keyword arguments `gymnasium.make` takes itself (the others go to the env's constructor)."""

GYM_OPTIONS: tuple[BenchmarkOption, ...] = (
    BenchmarkOption.integer("max_episode_steps", 1, 1_000_000, "the episode's step limit (and step budget)"),
    BenchmarkOption.flag("disable_env_checker", "skip gymnasium's env checker"),
    BenchmarkOption.integer("width", 16, MAX_SIZE, "rendered frame width in pixels (MuJoCo envs)"),
    BenchmarkOption.integer("height", 16, MAX_SIZE, "rendered frame height in pixels (MuJoCo envs)"),
    BenchmarkOption.integer("observation_width", 16, MAX_SIZE, "image observation width (gym-pusht, gym-aloha)"),
    BenchmarkOption.integer("observation_height", 16, MAX_SIZE, "image observation height (gym-pusht, gym-aloha)"),
    BenchmarkOption.integer("visualization_width", 16, MAX_SIZE, "rendered frame width (gym-pusht, gym-aloha)"),
    BenchmarkOption.integer("visualization_height", 16, MAX_SIZE, "rendered frame height (gym-pusht, gym-aloha)"),
    BenchmarkOption.integer("frame_skip", 1, 100, "simulator steps per env step (MuJoCo envs)"),
    BenchmarkOption.number("reset_noise_scale", 0.0, 1.0, "scale of the noise added to the initial state (MuJoCo)"),
    BenchmarkOption.flag("is_slippery", "a slippery lake (FrozenLake, CliffWalking)"),
    BenchmarkOption.number("success_rate", 0.0, 1.0, "the chance a slippery move goes where intended (FrozenLake)"),
    BenchmarkOption.flag("sutton_barto_reward", "Sutton and Barto's reward (CartPole)"),
    BenchmarkOption.flag("continuous", "continuous actions (LunarLander, CarRacing)"),
    BenchmarkOption.flag("natural", "a bonus for a natural blackjack (Blackjack)"),
    BenchmarkOption.flag("sab", "Sutton and Barto's rules (Blackjack)"),
)
"""The options a request may set on any `gym:<id>` whose env takes them, each with its bounds."""

ENUMERATED: dict[str, dict[str, tuple[str, ...]]] = {
    "gym_pusht": {"obs_type": ("state", "environment_state_agent_pos", "pixels", "pixels_agent_pos")},
    "gym_aloha": {"obs_type": ("pixels", "pixels_agent_pos")},
    "ale_py": {"obs_type": ("rgb", "grayscale", "ram")},
    "gymnasium.envs.toy_text.frozen_lake": {"map_name": ("4x4", "8x8")},
}
"""Module of an env's entry point → its string options and the values its code lists for them (gym-pusht's
`obs_type` branches; gym-aloha's, less the `state` it does not implement; FrozenLake's `MAPS`)."""

_DESCRIBED = {"obs_type": "what an observation holds", "map_name": "the lake's predefined map"}

COMPAT_NAMES = frozenset({"GymV21Environment", "GymV26Environment"})
"""Gymnasium's own ids (any version) that build another library's env from an `env_id` (shimmy's compatibility
wrappers: old gym's `make` imports the id's module)."""
COMPAT_ENTRY_POINT = "shimmy.openai_gym_compatibility:"


def is_compat_id(env_id: str, entry_point: object = None) -> bool:
    """Whether `env_id` (any `module:` or namespace prefix aside) is one of `COMPAT_NAMES`, or is registered to
    shimmy's old-gym compatibility wrapper."""
    name = env_id.rpartition(":")[2].rpartition("/")[2]
    if re.sub(r"-v\d+$", "", name) in COMPAT_NAMES:
        return True
    return isinstance(entry_point, str) and entry_point.startswith(COMPAT_ENTRY_POINT)


def constructor_keywords(creator: Any) -> set[str] | None:
    """The keyword arguments an env's creator takes, following `**kwargs` into the base classes' constructors (a
    MuJoCo v5 env passes its `**kwargs` on to `MujocoEnv`: `width`, `height`); None when it cannot be inspected."""
    if not callable(creator):
        return None
    constructors: Iterable[Any] = (
        [vars(klass)["__init__"] for klass in creator.__mro__ if "__init__" in vars(klass)]
        if isinstance(creator, type)
        else [creator]
    )
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names: set[str] = set()
    for constructor in constructors:
        try:
            parameters = list(inspect.signature(constructor).parameters.values())
        except (TypeError, ValueError):
            return names or None
        names |= {p.name for p in parameters if p.kind in kinds and p.name != "self"}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            break
    return names


def request_options(module: str, keywords: set[str] | None) -> tuple[BenchmarkOption, ...]:
    """The options a request may set on an env whose entry point is in `module` and whose constructor takes
    `keywords` (None: unknown, then only `gymnasium.make`'s own): those of `GYM_OPTIONS` it takes, and its
    module's enumerated ones (`ENUMERATED`) it takes."""
    takes = set(MAKE_OPTIONS) | (keywords or set())
    declared = [option for option in GYM_OPTIONS if option.name in takes]
    for prefix, options in ENUMERATED.items():
        if module == prefix or module.startswith(f"{prefix}."):
            declared += [
                BenchmarkOption.choice(name, values, _DESCRIBED.get(name, ""))
                for name, values in options.items()
                if name in takes
            ]
    return tuple(declared)
