"""A digest of model weights: what a run made from a live policy object records as its identity."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np


def state_digest(state: Any) -> str:
    """sha256 over `state`: nested mappings and sequences of arrays (numpy, or anything with `.detach().cpu()` /
    `.numpy()`, a torch tensor) and plain values, keys in sorted order, each array by dtype, shape and bytes."""
    digest = hashlib.sha256()
    _update(digest, state)
    return digest.hexdigest()


def _update(digest: Any, value: Any) -> None:
    if isinstance(value, Mapping):
        digest.update(b"{")
        for key in sorted(value, key=str):
            digest.update(str(key).encode() + b":")
            _update(digest, value[key])
        digest.update(b"}")
    elif isinstance(value, list | tuple):
        digest.update(b"[")
        for item in value:
            _update(digest, item)
        digest.update(b"]")
    elif isinstance(value, np.ndarray) or hasattr(value, "numpy"):
        array = _array(value)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).view(np.uint8).tobytes())
    else:
        digest.update(repr(value).encode())


def _array(value: Any) -> np.ndarray[Any, Any]:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach"):
        value = value.detach().cpu()
    if str(getattr(value, "dtype", "")) == "torch.bfloat16":  # numpy has no bfloat16: its bits as int16
        import torch  # optional: only a torch tensor reaches here

        value = value.view(torch.int16)
    return np.asarray(value.numpy())
