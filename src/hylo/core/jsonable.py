"""Turning trace payloads into JSON: small arrays become lists, images and large arrays become digests."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

MAX_INLINE_ARRAY = 64
"""Arrays with more elements than this are recorded by digest, not by value (frames go to video, not the trace)."""


def array_digest(array: np.ndarray[Any, Any]) -> str:
    data = np.ascontiguousarray(array)
    return hashlib.blake2b(data.data, digest_size=12).hexdigest()


_PLAIN = frozenset({type(None), bool, int, float, str})
_DTYPE_NAMES: dict[np.dtype[Any], str] = {}


def _dtype_name(dtype: np.dtype[Any]) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def _array(value: np.ndarray[Any, Any]) -> Any:
    if value.size <= MAX_INLINE_ARRAY and value.dtype.kind in "biuf":
        return value.tolist()
    return {"digest": array_digest(value), "shape": list(value.shape), "dtype": _dtype_name(value.dtype)}


def jsonable(value: Any) -> Any:
    """A JSON-friendly view of `value`: exact for scalars, strings and small arrays; a digest for the rest.

    On the trace's hot path (every observation and action): the common types are tested first, by exact type."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is np.ndarray:
        return _array(value)
    if isinstance(value, dict):
        return {k if type(k) is str else str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str)):  # subclasses (IntEnum, numpy's float64, ...)
        return value
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"digest": hashlib.blake2b(value, digest_size=12).hexdigest(), "bytes": len(value)}
    return repr(value)


def snapshot(obs: Any) -> Any:
    """A copy of an observation that later env steps cannot change (an env may reuse its buffers), for handing to
    another thread."""
    if isinstance(obs, np.ndarray):
        return obs.copy()
    if isinstance(obs, dict):
        return type(obs)((k, snapshot(v)) for k, v in obs.items())
    if isinstance(obs, list):
        return [snapshot(v) for v in obs]
    return obs
