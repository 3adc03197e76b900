"""Why a run's episodes did not succeed, grouped: what a summary says under its table.

Episodes that ended for the same reason form one group, with their count and the first of them; reasons that differ
only in their numbers (an index, a duration, an address) are one group, shown with `<n>` where the numbers differ.
When a limit ended the episodes, the group carries the flag that changes it: the episode's detail names it (episode
limits, `hylo.eval.limits`) and the step budget's and the watchdog's are known here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hylo.core.status import EpisodeStatus
from hylo.evallog.rows import EpisodeRow

ORDER = (EpisodeStatus.ERROR, EpisodeStatus.INFRA_INVALID, EpisodeStatus.SAFETY_ABORT, EpisodeStatus.FAILURE)
"""The statuses whose reasons are listed, those a user acts on first."""

_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")

VARIES = "<n>"


@dataclass(frozen=True, slots=True)
class ReasonGroup:
    """The episodes of one status that ended for one reason: how many, the first of them (in the run's order), and
    how to change the limit that ended them when one did."""

    status: EpisodeStatus
    reason: str
    count: int
    first: str
    hint: str | None = None


def reason_groups(rows: Iterable[EpisodeRow]) -> list[ReasonGroup]:
    """The groups of `rows` (a run's final episodes) that did not succeed, by status (`ORDER`), then the largest
    first."""
    members: dict[tuple[EpisodeStatus, str], list[EpisodeRow]] = {}
    for row in rows:
        if row.status in ORDER:
            members.setdefault((row.status, _NUMBER.sub("#", row.reason)), []).append(row)
    groups = [
        ReasonGroup(status, _merged([row.reason for row in group]), len(group), group[0].episode_id, _hint(group[0]))
        for (status, _), group in members.items()
    ]
    return sorted(groups, key=lambda g: (ORDER.index(g.status), -g.count))  # stable: first seen first among equals


def _merged(reasons: list[str]) -> str:
    """The reason of a group: the first one, each number that is not the same in all of them shown as `<n>`."""
    first = reasons[0]
    numbers = [_NUMBER.findall(reason) for reason in reasons]
    varying = {i for i, value in enumerate(numbers[0]) if any(other[i] != value for other in numbers[1:])}
    if not varying:
        return first
    parts = _NUMBER.split(first)
    out = [parts[0]]
    for i, value in enumerate(numbers[0]):
        out.append(VARIES if i in varying else value)
        out.append(parts[i + 1])
    return "".join(out)


def _hint(row: EpisodeRow) -> str | None:
    """How to change the limit that ended `row`: its detail when that is one line naming a flag, else what the
    step budget's and the watchdog's reasons say."""
    detail = (row.detail or "").strip()
    if detail and "\n" not in detail and _FLAG.search(detail):
        return detail
    if row.reason == "max_steps":
        return f"the step budget ran out after {row.steps} steps; --max-steps sets it"
    if row.reason == "watchdog":
        return f"{detail or 'the action queue stayed empty'}; --max-hold-steps sets how many holds end an episode"
    return None
