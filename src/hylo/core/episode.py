"""What the episode loops share (the Kernel, a graph's runner, a served session): how a fault becomes a reason, how
an episode's start, end and reviewed actions are traced, and what a failed trace recorder does to the verdict."""

from __future__ import annotations

import asyncio
import dataclasses
import traceback
from typing import Any

from hylo.core.bus import EventBus
from hylo.core.errors import HyloFailure, SafetyAbort
from hylo.core.events import ActionEvent, EpisodeEndEvent, EpisodeStartEvent, SafetyReviewEvent
from hylo.core.jsonable import jsonable
from hylo.core.shield import SafetyShield, ShieldReview
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Action, TaskInstance

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


def _recorder_failed(bus: EventBus, outcome: EpisodeOutcome) -> EpisodeOutcome:
    subscriber, exc = bus.critical_failures[0]
    reason = f"trace recorder {subscriber!r} failed: {raised('recorder', exc)}"
    return dataclasses.replace(
        outcome, status=EpisodeStatus.INFRA_INVALID, success=False, reason=reason, detail=detail_of(exc)
    )


def trace_start(bus: EventBus, task: TaskInstance, *, agent: str, guards: list[str], timing: str) -> None:
    """Trace `episode.start` for a placed task."""
    if bus.active:
        bus.emit_trusted(
            EpisodeStartEvent,
            task={
                "episode_id": task.episode_id,
                "benchmark": task.benchmark,
                "split": task.split,
                "task": task.task,
                "index": task.index,
                "base_seed": task.base_seed,
                "instruction": task.instruction,
            },
            task_digest=task.digest,
            seed=task.seed,
            agent=agent,
            guards=guards,
            timing=timing,
        )


def trace_end(bus: EventBus, outcome: EpisodeOutcome, *, recorded: bool) -> EpisodeOutcome:
    """Trace `episode.end` and return the verdict: `infra_invalid` when a critical recorder of this episode (one
    that was still working when it began: `recorded`) failed, `episode.end` itself included."""
    if recorded and bus.critical_failures:
        outcome = _recorder_failed(bus, outcome)
    if bus.active:
        bus.emit_trusted(
            EpisodeEndEvent,
            status=outcome.status.value,
            success=outcome.success,
            steps=outcome.steps,
            reason=outcome.reason,
            safety_interventions=outcome.safety_interventions,
            detail=outcome.detail,
        )
        if recorded and bus.critical_failures and outcome.status is not EpisodeStatus.INFRA_INVALID:
            outcome = _recorder_failed(bus, outcome)
    return outcome


def traced_review(
    shield: SafetyShield, action: Action, space: Any, bus: EventBus, *, step: int, hold: bool = False
) -> ShieldReview:
    """The shield's review of one action, traced (`safety.review`, then `action` when approved). A rejection is
    traced and its `SafetyAbort` raised again; any other exception of the review is the caller's to judge."""
    try:
        review = shield.review(action, space)
    except SafetyAbort as abort:
        if bus.active:
            bus.emit_trusted(
                SafetyReviewEvent, approved=False, modified=False, reasons=[abort.reason], guard=abort.guard
            )
        raise
    if bus.active:
        bus.emit_trusted(SafetyReviewEvent, approved=True, modified=review.modified, reasons=list(review.reasons))
        bus.emit_trusted(ActionEvent, step=step, action=jsonable(review.action), hold=hold)
    return review
