"""What an EnvSpec promises: the spec itself is well formed, and values lie in its spaces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.conformance.compare import describe, subscript
from hylo.conformance.errors import ConformanceError, Rule, call_under
from hylo.core.environment import Environment
from hylo.core.types import EnvCapabilities, EnvSpec


def spec_of(env: Environment) -> EnvSpec:
    """Check the spec rule on `env` (every rule does, so a broken spec is never reported as something else)."""
    rule = Rule.SPEC
    spec = call_under(rule, "env.spec", lambda: env.spec)
    if not isinstance(spec, EnvSpec):
        raise ConformanceError(rule, f"env.spec is {describe(spec)} of type {type(spec).__name__}, not an EnvSpec")
    if not isinstance(spec.observation_space, spaces.Dict):
        raise ConformanceError(
            rule,
            f"spec.observation_space is {spec.observation_space!r}, not a gymnasium spaces.Dict "
            "(observations are mappings: wrap a single array as {'state': ...})",
        )
    if not isinstance(spec.action_space, spaces.Space):
        raise ConformanceError(rule, f"spec.action_space is {describe(spec.action_space)}, not a gymnasium Space")
    capabilities = call_under(rule, "env.capabilities", lambda: env.capabilities)
    if not isinstance(capabilities, EnvCapabilities):
        raise ConformanceError(
            rule,
            f"env.capabilities is {describe(capabilities)} of type {type(capabilities).__name__}, not EnvCapabilities",
        )
    return spec


def _box_problem(space: spaces.Box, value: Any, path: str, *, exact_dtype: bool) -> str | None:
    if exact_dtype:
        # An observation is the env's own output: it must match the declared dtype exactly, or agents trained on
        # the declared space see values they never saw (float64 for float32, int64 for uint8 images).
        if not isinstance(value, (np.ndarray, np.generic)):
            return f"{path} is {describe(value)} of type {type(value).__name__}, not a numpy array for {space}"
        array = np.asarray(value)
        if array.shape != space.shape:
            return f"{path} has shape {array.shape}, but {space} has shape {space.shape}"
        if array.dtype != space.dtype:
            return f"{path} has dtype {array.dtype}, but {space} has dtype {space.dtype}"
    else:
        # An action may be computed in another numeric precision: the shield and the env cast it (as gymnasium's
        # own wrappers do), so only the kind, the shape and the bounds matter.
        try:
            array = np.asarray(value)
        except Exception as exc:
            return f"{path} {describe(value)} is not array-like ({exc}) for {space}"
        if array.dtype.kind not in "biuf":
            return f"{path} {describe(value)} has dtype {array.dtype}, not a real number type for {space}"
        if array.shape != space.shape:
            return f"{path} has shape {array.shape}, but {space} has shape {space.shape}"
    with np.errstate(invalid="ignore"):
        outside = ~((array >= space.low) & (array <= space.high))  # NaN is outside every bound
    if not bool(outside.any()):
        return None
    index = tuple(int(i) for i in np.argwhere(outside)[0])
    low, high = np.broadcast_to(space.low, space.shape)[index], np.broadcast_to(space.high, space.shape)[index]
    return f"{path}{subscript(index)} = {array[index].item()!r} is outside [{low.item()!r}, {high.item()!r}] of {space}"


def space_problem(space: spaces.Space[Any], value: Any, path: str, *, exact_dtype: bool) -> str | None:
    """Why `value` is not in `space`, or None. Recurses through Dict and Tuple to name the offending leaf."""
    if isinstance(space, spaces.Dict):
        return _dict_problem(space, value, path, exact_dtype=exact_dtype)
    if isinstance(space, spaces.Tuple):
        return _tuple_problem(space, value, path, exact_dtype=exact_dtype)
    if isinstance(space, spaces.Box):
        return _box_problem(space, value, path, exact_dtype=exact_dtype)
    if isinstance(space, spaces.Text):
        return _text_problem(space, value, path)
    if isinstance(space, spaces.Discrete) and isinstance(value, (bool, np.bool_)):
        return f"{path} is the bool {value!r}, not an integer of {space}"
    try:
        inside = bool(space.contains(value))
    except Exception:  # a value of the wrong kind can make contains() raise: that is a "no"
        inside = False
    return None if inside else f"{path} = {describe(value)} is not in {space}"


def _first(found: Iterable[str | None]) -> str | None:
    """The first problem found (the rest are not looked for), None when there is none."""
    return next((problem for problem in found if problem is not None), None)


def _dict_problem(space: spaces.Dict, value: Any, path: str, *, exact_dtype: bool) -> str | None:
    if not isinstance(value, Mapping):
        return f"{path} is {describe(value)}, not a mapping for a Dict space"
    missing = [str(key) for key in space.spaces if key not in value]
    extra = sorted(str(key) for key in value if key not in space.spaces)
    if missing or extra:
        return f"{path} keys do not match the space: missing {missing}, not in the space {extra}"
    return _first(
        space_problem(sub, value[key], f"{path}[{key!r}]", exact_dtype=exact_dtype) for key, sub in space.spaces.items()
    )


def _tuple_problem(space: spaces.Tuple, value: Any, path: str, *, exact_dtype: bool) -> str | None:
    if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
        return f"{path} is {describe(value)}, not a sequence of {len(space.spaces)} for {space}"
    return _first(
        space_problem(sub, item, f"{path}[{i}]", exact_dtype=exact_dtype)
        for i, (sub, item) in enumerate(zip(space.spaces, value, strict=True))
    )


def _text_problem(space: spaces.Text, value: Any, path: str) -> str | None:
    # Only type and length: gymnasium's default Text charset is alphanumeric without spaces, which no natural
    # instruction fits; in hylo a Text space means "a string of at most max_length characters".
    if not isinstance(value, str):
        return f"{path} is {describe(value)} of type {type(value).__name__}, not a str for {space}"
    if not space.min_length <= len(value) <= space.max_length:
        return (
            f"{path} has {len(value)} characters, outside [{space.min_length}, {space.max_length}] of {space}: "
            f"{describe(value)}"
        )
    return None
