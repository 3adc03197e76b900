"""The five lifecycle signals and the state containers they clear.

A container declares a lifetime; only the matching signal clears it. No node or agent wipes a container by hand, so
memory behaves the same on the canvas, in the Kernel and in batch evaluation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Signal(StrEnum):
    RUN_START = "run_start"
    RUN_END = "run_end"
    STEP_START = "step_start"
    STEP_END = "step_end"
    EPISODE_RESET = "episode_reset"


class Lifetime(StrEnum):
    STEP = "step"
    EPISODE = "episode"
    RUN = "run"


CLEARED_BY: dict[Lifetime, Signal] = {
    Lifetime.STEP: Signal.STEP_END,
    Lifetime.EPISODE: Signal.EPISODE_RESET,
    Lifetime.RUN: Signal.RUN_START,
}
"""Which signal clears which lifetime: run at run_start, step at step_end, episode at episode_reset."""


class Reducer(StrEnum):
    """How a write merges into a container: `last` overwrites, `append` adds to a list, `add` sums."""

    LAST = "last"
    APPEND = "append"
    ADD = "add"


_INITIAL: dict[Reducer, Callable[[], Any]] = {
    Reducer.LAST: lambda: None,
    Reducer.APPEND: list,
    Reducer.ADD: int,
}


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """Declaration of a state container: its name, lifetime and reducer (and, for `append`, a size cap)."""

    name: str
    lifetime: Lifetime | str = Lifetime.EPISODE
    reducer: Reducer | str = Reducer.LAST
    max_size: int | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"container name must be a non-empty string, got {self.name!r}")
        try:
            object.__setattr__(self, "lifetime", Lifetime(self.lifetime))
        except ValueError:
            raise ValueError(
                f"container {self.name!r}: unknown lifetime {self.lifetime!r}; "
                f"choose one of {[x.value for x in Lifetime]}"
            ) from None
        try:
            object.__setattr__(self, "reducer", Reducer(self.reducer))
        except ValueError:
            raise ValueError(
                f"container {self.name!r}: unknown reducer {self.reducer!r}; choose one of {[x.value for x in Reducer]}"
            ) from None
        if self.max_size is not None and self.max_size < 1:
            raise ValueError(f"container {self.name!r}: max_size must be >= 1, got {self.max_size}")


@dataclass(slots=True)
class StateContainer:
    """A named box of memory that outlives a single step, cleared only by the signal of its lifetime."""

    spec: ContainerSpec
    value: Any = field(default=None)
    writes: int = 0

    def __post_init__(self) -> None:
        self.value = _INITIAL[Reducer(self.spec.reducer)]()

    @property
    def name(self) -> str:
        return self.spec.name

    def read(self) -> Any:
        return self.value

    def write(self, item: Any) -> None:
        reducer = self.spec.reducer
        if reducer is Reducer.LAST:
            self.value = item
        elif reducer is Reducer.APPEND:
            self.value.append(item)
            if self.spec.max_size is not None and len(self.value) > self.spec.max_size:
                del self.value[: len(self.value) - self.spec.max_size]
        else:
            self.value = self.value + item
        self.writes += 1

    def _clear(self) -> None:
        self.value = _INITIAL[Reducer(self.spec.reducer)]()
        self.writes = 0


class ContainerSet:
    """The containers of one owner (an agent, a graph), fanned out to by signals."""

    __slots__ = ("_by_name", "_by_signal")

    def __init__(self, specs: Iterable[ContainerSpec] = ()) -> None:
        self._by_name: dict[str, StateContainer] = {}
        self._by_signal: dict[Signal, list[StateContainer]] = {s: [] for s in Signal}
        for spec in specs:
            self.add(spec)

    def add(self, spec: ContainerSpec) -> StateContainer:
        if spec.name in self._by_name:
            raise ValueError(f"duplicate container name {spec.name!r}")
        container = StateContainer(spec)
        self._by_name[spec.name] = container
        self._by_signal[CLEARED_BY[Lifetime(spec.lifetime)]].append(container)
        return container

    def __getitem__(self, name: str) -> StateContainer:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no container named {name!r}; declared: {sorted(self._by_name)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[StateContainer]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def on_signal(self, signal: Signal | str) -> None:
        for container in self._by_signal[signal if isinstance(signal, Signal) else Signal(signal)]:
            container._clear()

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of every container's value, for checkpoints and the UI."""
        return {name: copy.deepcopy(c.value) for name, c in self._by_name.items()}
