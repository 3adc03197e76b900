"""Which env step each trace event of an episode belongs to: the one cut of a trace into steps, shared by the episode
viewer's timeline (`hylo.evallog.timeline`) and the Rerun export (`hylo.evallog.rrd`), so that the two never put an
event in different steps.

Events are taken in trace order (the order the bus stamped their `seq`), one at a time, so a trace read lazily
(`EvalLog.iter_trace`) is never held whole. Every event belongs to one step:

- a step opens with the first event after the previous step's result and that result's tail (its `step_start`
  signal, the agent's chunk merged there); it is a step once the shield reviews an action, an action runs or a result
  comes (`STEP_KINDS`);
- its result closes it; the observation, checkpoint and `step_end` signal right after the result are still its own
  (`after_result`: the observation the step returned, which the next step acts on);
- events before the first step belong to step 0; those after the last step (the episode's end) to the last step; a
  review that aborted the episode is a step of its own that holds the episode's closing events;
- a trace in which no step ever ran puts every event in step 0.

A signal (an `episode_reset` among them) is an event like any other: it belongs to the step running when it came.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

STEP_KINDS = frozenset({"safety.review", "action", "step.result"})
"""The events that make a step of the events gathered since the previous one: the step ran, or was refused."""

STEP_TAIL = frozenset({"observation", "container.checkpoint"})
"""Kinds that, right after a step's result, still belong to that step (its observation, a graph's checkpoint)."""


class Placed(NamedTuple):
    """One trace event and the step it belongs to. `seq` is its sequence number (its index in the trace when it has
    none); `after_result` says it came after its step's result (the step's tail, or the episode's closing events)."""

    step: int
    seq: int
    event: Mapping[str, Any]
    after_result: bool = False


def place_events(events: Iterable[Mapping[str, Any]]) -> Iterator[Placed]:
    """Each event of an episode's trace with the step it belongs to, in trace order. Events between two steps are
    held back until it is known whether another step follows them (they are its own) or not (the last step's)."""
    open_step = 0  # the step the next action is for
    stepped = False  # whether `open_step` is a step already (reviewed, acted or stepped)
    closing = False  # just after a step's result: its tail still belongs to it
    waiting: list[Placed] = []  # events of `open_step` while it is not yet known to be a step
    for index, event in enumerate(events):
        kind = event.get("event")
        seq = _seq(event.get("seq"), index)
        if closing and (kind in STEP_TAIL or _is_step_end(event)):
            yield Placed(open_step - 1, seq, event, after_result=True)
            continue
        closing = False
        placed = Placed(open_step, seq, event)
        if kind not in STEP_KINDS and not stepped:
            waiting.append(placed)
            continue
        yield from waiting
        waiting.clear()
        yield placed
        stepped = True
        if kind == "step.result":
            open_step, stepped, closing = open_step + 1, False, True
    last = max(open_step - 1, 0)
    after = open_step > 0
    for placed in waiting:
        yield Placed(last, placed.seq, placed.event, after_result=after)


def _is_step_end(event: Mapping[str, Any]) -> bool:
    """Whether `event` is the signal that closes a step."""
    return event.get("event") == "signal" and event.get("signal") == "step_end"


def _seq(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
