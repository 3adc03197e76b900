"""Checking a continuous action before it reaches a simulator: a NaN, a ragged list or a wrong length would otherwise
reach the controller (and blow up the simulation) instead of being the agent's error."""

from __future__ import annotations

from typing import Any

import numpy as np

from hylo.core.errors import InvalidAction


def finite_vector(action: Any, size: int, takes: str, *, as_float64: bool = False) -> np.ndarray[Any, Any]:
    """`action` as `size` finite numbers, or `InvalidAction` naming what is wrong; `takes` says what the env takes
    (e.g. "Meta-World takes (4,): dx, dy, dz, gripper"). Integers become float64; floats stay as they are unless
    `as_float64`."""
    try:
        raw = np.asarray(action)
    except (TypeError, ValueError) as exc:  # e.g. ragged nested lists
        raise InvalidAction(f"action is not an array: {action!r}") from exc
    if raw.dtype.kind not in "biuf":
        raise InvalidAction(f"action is not numeric: {action!r}")
    if raw.shape != (size,):
        raise InvalidAction(f"action has shape {raw.shape}, {takes}")
    array = raw if raw.dtype.kind == "f" and not as_float64 else raw.astype(np.float64)
    if not np.isfinite(array).all():
        raise InvalidAction(f"non-finite action {np.array2string(array, precision=3)}")
    return array
