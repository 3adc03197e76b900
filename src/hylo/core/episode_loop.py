"""The frame of a loop that runs its own episodes — the Kernel's (core/kernel.py), a graph runner's (graph/executor.py).

`run(task)` opens the episode, runs the loop's own part, turns whatever ended it into one outcome (an `EndEpisode`
carries it; any other fault is the loop's own, `infra_invalid`) and ends the episode; `signal` delivers a lifecycle
signal from its owner between episodes; `auto_episode_reset` is the scaffold's; `step_budget` checks the step limit
once, for both. What happens inside an episode is shared with a served session too, through the scaffold
(core/scaffold.py); a served session runs no episodes of its own (its harness does), so it has no frame.
"""

from __future__ import annotations

import abc
from typing import ClassVar, overload

from hylo.core.episode import FAULTS, EndEpisode, detail_of, raised
from hylo.core.errors import SignalFailed
from hylo.core.scaffold import EpisodeScaffold
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import TaskInstance


@overload
def step_budget(*choices: int | None, missing: str) -> int: ...


@overload
def step_budget(*choices: int | None, missing: None = None) -> int | None: ...


def step_budget(*choices: int | None, missing: str | None = None) -> int | None:
    """The first of `choices` that is given, checked as a step budget (an int >= 1). None when none is given; a
    ValueError saying `missing` instead, when `missing` is given."""
    budget = next((choice for choice in choices if choice is not None), None)
    if budget is None:
        if missing is not None:
            raise ValueError(missing)
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {budget!r}")
    return budget


class EpisodeLoop(abc.ABC):
    """Runs episodes one at a time (`run`), with one `EpisodeScaffold` (`_sc`) reused episode after episode.

    A loop gives `_open(task)` (its `episode.start`) and `_episode(task)` (the rest: resets, the steps, the verdict;
    it returns the outcome or raises `EndEpisode`), and may override `_finish(outcome)` (by default the scaffold's
    `finish`, telling `_tell`), `_tell(outcome)` (who hears the verdict; by default nobody) and `_signalled(signal)`
    (what delivering a signal between episodes waits for as well).
    """

    fault_owner: ClassVar[str] = "episode loop"
    """Who a fault of the loop itself is put down to in the episode's reason (`kernel raised ...`)."""

    max_steps: int
    """The step budget of an episode; its owner may change it between episodes."""

    _sc: EpisodeScaffold
    _closed: bool = False

    @property
    def auto_episode_reset(self) -> bool:
        """Send `episode_reset` when `run` is given a different task than last time. The placement owner (an env
        panel) turns it off and sends `signal(Signal.EPISODE_RESET)` itself on a committed change."""
        return self._sc.auto_episode_reset

    @auto_episode_reset.setter
    def auto_episode_reset(self, value: bool) -> None:
        self._sc.auto_episode_reset = value

    def run(self, task: TaskInstance) -> EpisodeOutcome:
        """Run one episode of `task` and return its outcome."""
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        try:
            self._open(task)
            outcome = self._episode(task)
        except EndEpisode as end:
            outcome = end.outcome
        except FAULTS as exc:  # a fault in hylo itself, or in a trace subscriber's plumbing: not the agent's
            outcome = self._sc.infra_invalid(raised(self.fault_owner, exc), detail_of(exc))
        return self._finish(outcome)

    def signal(self, signal: Signal | str) -> None:
        """Deliver a lifecycle signal from its owner (e.g. `episode_reset` from an env panel), between episodes.
        Raises `SignalFailed` (a RuntimeError) if a listener fails on it."""
        signal = Signal(signal)
        try:
            self._sc.signal(signal)
            self._signalled(signal)
        except EndEpisode as end:
            failed = end.outcome
            raise SignalFailed(failed.reason, failed.detail, failed.status.value) from None

    @abc.abstractmethod
    def _open(self, task: TaskInstance) -> None:
        """Open the episode of `task` (the scaffold's `open`, with what this loop says of it)."""

    @abc.abstractmethod
    def _episode(self, task: TaskInstance) -> EpisodeOutcome:
        """The opened episode, to its verdict."""

    def _finish(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        return self._sc.finish(outcome, self._tell)

    def _tell(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        return outcome

    def _signalled(self, signal: Signal) -> None:
        """After `signal` was delivered between episodes (e.g. wait until the agent has heard it)."""
        return None  # nothing, by default
