"""Feature names: how an env's observation maps to the names policies trained on datasets know (LeRobot's).

A benchmark declares, as data, which of its observation keys carries each named feature: `images/agentview` is
`observation.images.image`, `state[0:4]` (the first four floats of `state`) is `observation.state`, `instruction`
is `task`. A `*` in a key stands for any one camera and is the same `*` in the name (`images/*` →
`observation.images.*`). An agent that reads named features declares them with their shapes
(`AgentRequirements.features`); the bind-time check (`check_compatible`) resolves them against the env's
declaration and refuses a missing camera or a wrong size, naming both sides, before any episode runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

FeatureNames = tuple[tuple[str, str], ...]
"""An env's declaration: (observation key, feature name) pairs, first match wins."""

_SLICE = re.compile(r"^(?P<key>[^\[\]]+)\[(?P<start>\d*):(?P<stop>\d*)\]$")


@dataclass(frozen=True, slots=True)
class FeatureSource:
    """Where a named feature is in an observation: the key path (`/`-separated), a slice of a vector, its kind."""

    name: str
    path: str
    kind: str  # "image" (H x W x C uint8), "vector" (floats) or "text"
    shape: tuple[int, ...]
    start: int | None = None
    stop: int | None = None

    def read(self, obs: Mapping[str, Any]) -> Any:
        """The feature's value in `obs` (a vector sliced as declared)."""
        value: Any = obs
        for part in self.path.split("/"):
            value = value[part]
        if self.kind == "vector" and (self.start is not None or self.stop is not None):
            return np.asarray(value)[self.start : self.stop]
        return value

    def describe(self) -> str:
        where = self.path
        if self.start is not None or self.stop is not None:
            where += f"[{'' if self.start is None else self.start}:{'' if self.stop is None else self.stop}]"
        return f"{where} ({self.kind} {'x'.join(map(str, self.shape)) or 'text'})"


def _leaves(space: spaces.Space[Any], prefix: str = "") -> dict[str, spaces.Space[Any]]:
    if isinstance(space, spaces.Dict):
        out: dict[str, spaces.Space[Any]] = {}
        for key, sub in space.spaces.items():
            out.update(_leaves(sub, f"{prefix}{key}/"))
        return out
    return {prefix.rstrip("/"): space}


def _kind(path: str, space: spaces.Space[Any]) -> tuple[str, tuple[int, ...]] | None:
    if isinstance(space, spaces.Text) or path == "instruction":
        return "text", ()
    if isinstance(space, spaces.Box):
        shape = tuple(int(n) for n in space.shape)
        if len(shape) == 3 and space.dtype == np.uint8 and shape[-1] in (1, 3, 4):
            return "image", shape
        return "vector", shape
    return None


def _match(pattern: str, path: str) -> str | None:
    """The camera `*` stands for when `pattern` matches `path` ('' for a pattern without one), else None."""
    if "*" not in pattern:
        return "" if pattern == path else None
    head, _, tail = pattern.partition("*")
    if path.startswith(head) and path.endswith(tail) and len(path) > len(head) + len(tail):
        middle = path[len(head) : len(path) - len(tail)]
        return middle if "/" not in middle else None
    return None


def resolve_features(observation_space: spaces.Space[Any], declared: FeatureNames) -> dict[str, FeatureSource]:
    """Each named feature the env's observation carries under `declared`, by name (first declaration wins)."""
    leaves = {path: each for path, space in _leaves(observation_space).items() if (each := _kind(path, space))}
    found: dict[str, FeatureSource] = {}
    for key, name in declared:
        sliced = _SLICE.match(key)
        pattern = sliced["key"] if sliced else key
        for path, (kind, shape) in leaves.items():
            star = _match(pattern, path)
            if star is None:
                continue
            feature = name.replace("*", star)
            if feature in found:
                continue
            if sliced and kind == "vector" and len(shape) == 1:
                start = int(sliced["start"]) if sliced["start"] else None
                stop = int(sliced["stop"]) if sliced["stop"] else None
                size = len(range(shape[0])[start:stop])
                found[feature] = FeatureSource(feature, path, kind, (size,), start, stop)
            elif not sliced:
                found[feature] = FeatureSource(feature, path, kind, shape)
    return found


def default_feature_names(observation_space: spaces.Space[Any]) -> FeatureNames:
    """Names for an env that declares none: each camera, vector and text of its observation as LeRobot would name a
    key it does not know, `observation.<key>` (`images/top` is `observation.images.top`); the instruction is `task`."""
    names: list[tuple[str, str]] = []
    for path, space in _leaves(observation_space).items():
        kind = _kind(path, space)
        if kind is not None:
            names.append((path, "task" if kind[0] == "text" else "observation." + path.replace("/", ".")))
    return tuple(names)


def feature_problems(
    who: str,
    env: str,
    wanted: Sequence[tuple[str, tuple[int, ...]]],
    observation_space: spaces.Space[Any],
    declared: FeatureNames,
) -> list[str]:
    """What `wanted` (feature name, shape: images channel-first C x H x W as policies take them) misses in the env's
    observation under its declaration, each problem naming both sides."""
    if not wanted:
        return []
    have = resolve_features(observation_space, declared)
    shown = ", ".join(f"{name} = {source.describe()}" for name, source in sorted(have.items())) or "none"
    if not declared:
        return [f"{who} reads named features, but env {env!r} declares none (hylo list benchmarks)"]
    problems: list[str] = []
    for name, shape in wanted:
        source = have.get(name)
        if source is None:
            problems.append(f"{who} needs {name} {'x'.join(map(str, shape))}; env {env!r} gives {shown}")
            continue
        given = source.shape
        if source.kind == "image" and len(given) == 3:
            given = (given[2], given[0], given[1])
        if source.kind != "text" and tuple(shape) != given:
            problems.append(
                f"{who} needs {name} of shape {'x'.join(map(str, shape))}; env {env!r} gives {source.describe()}"
                + (" (channels x height x width)" if source.kind == "image" else "")
            )
    return problems


def declared_text(declared: FeatureNames) -> str:
    """`key → name, ...` as listings show a declaration."""
    return ", ".join(f"{key} → {name}" for key, name in declared)
