"""Comparing and describing observation values, precisely enough that a message points at the fix."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


def describe(value: Any) -> str:
    """A short, exact-enough rendering for an error message (images are summarised, not printed)."""
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"array({value.tolist()!r}, dtype={value.dtype})"
        return f"array(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, np.generic):
        return f"{value.item()!r} ({value.dtype})"
    if isinstance(value, Mapping):
        return f"{type(value).__name__} with keys {sorted(map(str, value))}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def subscript(index: tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, index))}]" if index else ""


def _array_difference(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], path: str) -> str | None:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{path}: {describe(a)} vs {describe(b)}"
    if a.dtype.kind in "fc":
        same = (a == b) | (np.isnan(a) & np.isnan(b))
    elif a.dtype.kind in "biuSUM":
        same = np.asarray(a == b)
    else:
        return None if np.array_equal(a, b) else f"{path}: {describe(a)} vs {describe(b)}"
    if bool(same.all()):
        return None
    index = tuple(int(i) for i in np.argwhere(~same)[0])
    count = int((~same).sum())
    return f"{path}{subscript(index)}: {a[index].item()!r} vs {b[index].item()!r} ({count} of {a.size} elements differ)"


def first_difference(a: Any, b: Any, path: str = "obs") -> str | None:
    """Where two observations differ, as `obs['images']['top'][3, 4, 0]: 12 vs 13 (...)`; None when they are equal.

    Handles what observations are made of: nested mappings, numpy arrays (shape, dtype and values; NaN equals NaN),
    lists, tuples, strings and scalars. A precise location is what turns "not deterministic" into a fixable bug.
    """
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return _mapping_difference(a, b, path)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return _differ(a, b, path)
        return _array_difference(a, b, path)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return _sequence_difference(a, b, path)
    return _scalar_difference(a, b, path)


def _differ(a: Any, b: Any, path: str) -> str:
    return f"{path}: {describe(a)} vs {describe(b)}"


def _first(found: Iterable[str | None]) -> str | None:
    """The first difference found (the rest are not looked for), None when there is none."""
    return next((difference for difference in found if difference is not None), None)


def _mapping_difference(a: Any, b: Any, path: str) -> str | None:
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        return _differ(a, b, path)
    if set(a) != set(b):
        only_a = sorted(str(k) for k in a if k not in b)
        only_b = sorted(str(k) for k in b if k not in a)
        return f"{path}: keys differ (only in the first: {only_a}, only in the second: {only_b})"
    return _first(first_difference(a[key], b[key], f"{path}[{key!r}]") for key in a)


def _sequence_difference(a: list[Any] | tuple[Any, ...], b: list[Any] | tuple[Any, ...], path: str) -> str | None:
    if type(a) is not type(b) or len(a) != len(b):
        return _differ(a, b, path)
    return _first(first_difference(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True)))


def _scalar_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, (float, np.floating)) and isinstance(b, (float, np.floating)) and math.isnan(a) and math.isnan(b):
        return None
    try:
        equal = bool(a == b)
    except Exception:  # an exotic value whose == is not a bool: differ rather than guess
        equal = False
    return None if equal else _differ(a, b, path)


def snapshot(value: Any) -> Any:
    """A copy that later calls cannot change: envs may return views of buffers they overwrite in place."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, Mapping):
        return {key: snapshot(item) for key, item in value.items()}
    if isinstance(value, list):
        return [snapshot(item) for item in value]
    if isinstance(value, tuple):
        return tuple(snapshot(item) for item in value)
    if value is None or isinstance(value, (str, bytes, int, float, np.generic)):
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # uncopyable (a handle, a lock): compare the live object, the best we can do
        return value
