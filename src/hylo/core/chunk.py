"""Action chunks and the executor that plays them out."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hylo.core.types import Action


def _frozen(action: Action) -> Action:
    """`action` with its arrays read-only: a read-only view of an array (the caller's array stays writable), a dict
    (its own copy) whose arrays are read-only views; any other action as it is."""
    kind = type(action)
    if kind is int or kind is float:
        return action
    if kind is np.ndarray or isinstance(action, np.ndarray):
        view = action.view()
        view.setflags(write=False)
        return view
    if kind is dict:
        return {key: _frozen(value) for key, value in action.items()}
    return action


class ActionChunk:
    """A plan of actions; after `execution_steps` of them are executed, the agent is asked again.

    `actions` is any sequence of actions (ints, arrays, dicts) or a 2-D array whose rows are actions.
    `execution_steps` defaults to the whole chunk. A chunk is checked once, when it is built, and cannot change
    afterwards: its `actions` are a tuple, and its arrays are read-only views (the agent's own arrays stay writable).
    """

    __slots__ = ("actions", "execution_steps")

    actions: tuple[Action, ...]
    execution_steps: int

    def __init__(self, actions: Sequence[Action] | np.ndarray[Any, Any], execution_steps: int | None = None) -> None:
        if isinstance(actions, np.ndarray):
            if actions.ndim == 0:
                raise ValueError("ActionChunk needs a sequence of actions, got a 0-d array; wrap it in a list")
            seq: tuple[Action, ...] = tuple(_frozen(actions))  # its rows: read-only views
        elif isinstance(actions, (str, bytes)) or not isinstance(actions, Sequence):
            raise TypeError(f"ActionChunk needs a sequence of actions, got {type(actions).__name__}")
        else:
            seq = tuple(_frozen(a) for a in actions)
        if not seq:
            raise ValueError("ActionChunk needs at least one action, got an empty sequence")
        steps = len(seq) if execution_steps is None else execution_steps
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 1 <= steps <= len(seq):
            raise ValueError(f"execution_steps must be an int in [1, {len(seq)}], got {execution_steps!r}")
        _set_actions(self, seq)
        _set_steps(self, int(steps))

    @classmethod
    def single(cls, action: Action) -> ActionChunk:
        """A chunk of one action."""
        chunk = _new(cls)  # nothing to validate: one action, executed once (the common case, every step)
        _set_actions(chunk, (_frozen(action),))
        _set_steps(chunk, 1)
        return chunk

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"an ActionChunk cannot change once built (setting {name!r}); build a new one")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"an ActionChunk cannot change once built (deleting {name!r}); build a new one")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ActionChunk, (self.actions, self.execution_steps))

    def __len__(self) -> int:
        return len(self.actions)

    def __repr__(self) -> str:
        return f"ActionChunk(<{len(self.actions)} actions>, execution_steps={self.execution_steps})"


_new = object.__new__
_set_actions: Callable[[ActionChunk, tuple[Action, ...]], None] = vars(ActionChunk)["actions"].__set__
_set_steps: Callable[[ActionChunk, int], None] = vars(ActionChunk)["execution_steps"].__set__
"""The slots' own setters: how a chunk is built past its refusing `__setattr__` (faster than object.__setattr__)."""


def as_chunk(value: object) -> ActionChunk:
    """What an agent's `act` returned, as a chunk: an ActionChunk as is, anything else as one action."""
    if isinstance(value, ActionChunk):
        return value
    if value is None:
        raise TypeError("act returned None; return an ActionChunk or one action")
    if (isinstance(value, (list, tuple)) and not value) or (isinstance(value, np.ndarray) and value.size == 0):
        raise ValueError(f"act returned an empty {type(value).__name__}; return an ActionChunk or one action")
    return ActionChunk.single(value)


class ChunkExecutor:
    """Queue of the actions still to execute from the current chunk; a new chunk replaces it (the naive strategy)."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: deque[Any] = deque()

    def load(self, chunk: ActionChunk, *, skip: int = 0, whole: bool = False) -> int:
        """Queue the chunk's first `execution_steps` actions (all of them when `whole`), less the first `skip`
        (stale ones). Returns the count of actions dropped."""
        end = len(chunk.actions) if whole else chunk.execution_steps
        dropped = min(skip, end)
        self._queue.clear()
        self._queue.extend(chunk.actions[dropped:end])
        return dropped

    def next(self) -> Action:
        """The next action; raises IndexError when empty."""
        return self._queue.popleft()

    def clear(self) -> None:
        """Drop the plan: the agent replans at the next step."""
        self._queue.clear()

    @property
    def remaining(self) -> int:
        return len(self._queue)

    @property
    def empty(self) -> bool:
        return not self._queue


class EnsembleExecutor(ChunkExecutor):
    """Temporal ensembling (Zhao et al. 2023): every prediction made for a control step is kept, and the step executes
    their average weighted exp(−m·i), i = 0 the oldest. A new chunk adds its predictions to the steps it covers
    instead of replacing the plan; it needs array actions."""

    __slots__ = ("_dtype", "m")

    def __init__(self, m: float = 0.01) -> None:
        super().__init__()
        self.m = m
        self._dtype = np.dtype(np.float32)

    def load(self, chunk: ActionChunk, *, skip: int = 0, whole: bool = False) -> int:
        end = len(chunk.actions) if whole else chunk.execution_steps
        dropped = min(skip, end)
        try:
            fresh = [np.asarray(a, dtype=np.float64) for a in chunk.actions[dropped:end]]
        except (TypeError, ValueError):
            raise ValueError("the ensemble strategy averages array actions; this chunk's are not numeric") from None
        queue = self._queue
        shape = queue[0][0].shape if queue else fresh[0].shape if fresh else None
        for action in fresh:
            if action.shape != shape:
                raise ValueError(
                    f"the ensemble strategy averages actions of one shape: got {action.shape} beside {shape}"
                )
        for i, action in enumerate(fresh):
            if i < len(queue):
                queue[i].append(action)
            else:
                queue.append([action])
        self._dtype = np.asarray(chunk.actions[0]).dtype
        return dropped

    def next(self) -> Action:
        predictions: list[np.ndarray[Any, Any]] = self._queue.popleft()
        dtype = self._dtype if self._dtype.kind == "f" else np.dtype(np.float32)
        if len(predictions) == 1:
            return predictions[0].astype(dtype)
        weights = np.exp(-self.m * np.arange(len(predictions)))
        return np.tensordot(weights / weights.sum(), np.stack(predictions), axes=1).astype(dtype)
