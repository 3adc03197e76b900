"""How an episode's faults are carried and named, for every loop and the scaffold they share (core/scaffold.py): what
a component may raise, the exception that carries an outcome out of a loop, the short and the long form of a fault,
and what a trace recorder that failed earlier means for the next episode."""

from __future__ import annotations

import asyncio
import dataclasses
import traceback

from hylo.core.bus import EventBus
from hylo.core.errors import HyloFailure
from hylo.core.status import EpisodeOutcome

FAULTS = (Exception, asyncio.CancelledError)
"""What a component may raise that ends an episode (KeyboardInterrupt and SystemExit still stop the program)."""


class EndEpisode(HyloFailure):
    """Carries an episode's outcome out of a loop."""

    def __init__(self, outcome: EpisodeOutcome) -> None:
        self.outcome = outcome


def raised(who: str, exc: BaseException) -> str:
    """The short reason for an exception: `who raised Type: first line`."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{who} raised {type(exc).__name__}" + (f": {first}" if first else "")


def detail_of(exc: BaseException) -> str:
    """The long form of an exception (its traceback)."""
    return "".join(traceback.format_exception(exc)).strip()


def noted(outcome: EpisodeOutcome, note: str) -> EpisodeOutcome:
    """The outcome with `note` added to its detail (what failed after the verdict cannot change it)."""
    return dataclasses.replace(outcome, detail=f"{outcome.detail}\n{note}" if outcome.detail else note)


def unrecorded(bus: EventBus) -> tuple[str, str] | None:
    """(reason, detail) when a critical recorder failed in an earlier episode: nothing records this one."""
    if not bus.critical_failures:
        return None
    subscriber, exc = bus.critical_failures[0]
    return f"trace recorder {subscriber!r} failed in an earlier episode; nothing records this one", raised(
        "recorder", exc
    )
