"""Distributions of a run's final episodes: histograms of episode length (steps) and of return, each bin counted
per status, for the run's page.

Pure functions of `EpisodeRow`s (no trace is read): a run of 10,000 episodes is counted in a few milliseconds. A
histogram's bins share one set of edges for every status; their width is a round number (1, 2 or 5 times a power of
ten; 2.5 too for returns), at most `MAX_BINS` of them. Steps are integers, so their edges are too: the bin
`[10, 20)` holds the episodes of 10 to 19 steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hylo.core.status import EpisodeStatus
from hylo.evallog.rows import EpisodeRow

MAX_BINS = 30
"""The most bins a histogram has: what bounds the size of an answer, whatever the episode count."""

STATUSES = tuple(EpisodeStatus)
"""Every status, in the order a histogram lists their counts."""

_INTEGER_WIDTHS = (1, 2, 5)
_REAL_WIDTHS = (1.0, 2.0, 2.5, 5.0)


@dataclass(frozen=True)
class Histogram:
    """One quantity's histogram: `edges` (bins + 1 values, bin i is `[edges[i], edges[i+1])`, the last bin closed),
    `counts` (status → its count in each bin, every status listed), the episodes counted (`n`) and those left out
    because they recorded no value (`missing`). A histogram of no values has no edges and no bins."""

    quantity: str
    unit: str
    edges: tuple[float, ...]
    counts: dict[EpisodeStatus, tuple[int, ...]]
    n: int
    missing: int

    def to_json(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "unit": self.unit,
            "edges": list(self.edges),
            "counts": {status.value: list(self.counts[status]) for status in STATUSES},
            "n": self.n,
            "missing": self.missing,
        }


@dataclass(frozen=True)
class Distributions:
    """The histograms of one set of final episodes (a run's, or one task's): steps always, return only when some
    episode recorded one (`returns` is None otherwise)."""

    task: str | None
    episodes: int
    steps: Histogram
    returns: Histogram | None

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "episodes": self.episodes,
            "steps": self.steps.to_json(),
            "returns": None if self.returns is None else self.returns.to_json(),
        }


def episode_return(row: EpisodeRow) -> float | None:
    """The episode's `metrics["return"]` as a finite number; None when it recorded none (or not a number)."""
    value = row.metrics.get("return")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _round_widths(smallest: float, multipliers: Sequence[float]) -> Iterable[float]:
    """Round widths from the largest power of ten at most `smallest` upwards: 1, 2, 5, 10, 20, 50, ... times it."""
    power = 10.0 ** math.floor(math.log10(smallest)) if smallest > 0 else 1.0
    while True:
        for multiplier in multipliers:
            yield multiplier * power
        power *= 10


def _bin_count(low: float, high: float, start: float, width: float) -> int:
    return math.floor((high - start) / width) + 1 if high > low else 1


def integer_edges(low: int, high: int, max_bins: int = MAX_BINS) -> tuple[int, ...]:
    """Edges of integer-aligned bins of a round width that cover `low..high` (inclusive) in at most `max_bins`
    bins: each bin `[e, e + width)` holds the integers e to e + width - 1, and every edge is a multiple of the width.
    """
    if high < low:
        raise ValueError(f"the range {low}..{high} is empty")
    for width in _round_widths(max(1.0, (high - low + 1) / max_bins), _INTEGER_WIDTHS):
        step = max(1, int(width))
        start = (low // step) * step
        bins = (high - start) // step + 1
        if bins <= max_bins:
            return tuple(start + i * step for i in range(bins + 1))
    raise AssertionError("unreachable: a width past the range makes one bin")


def real_edges(low: float, high: float, max_bins: int = MAX_BINS) -> tuple[float, ...]:
    """Edges of bins of a round width that cover `low..high` in at most `max_bins` bins, every edge a multiple of
    the width; one bin of width 1 around a single value."""
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        raise ValueError(f"the range {low}..{high} is not a finite, non-empty range")
    for width in _round_widths((high - low) / max_bins, _REAL_WIDTHS):
        start = math.floor(low / width) * width
        bins = _bin_count(low, high, start, width)
        if bins <= max_bins:
            return tuple(_tidy(start + i * width) for i in range(bins + 1))
    raise AssertionError("unreachable: a width past the range makes one bin")


def _tidy(edge: float) -> float:
    """An edge without the float noise of its multiplication (0.30000000000000004 → 0.3)."""
    return float(f"{edge:.12g}")


def bin_index(value: float, edges: Sequence[float]) -> int:
    """The bin of `value`: i with edges[i] <= value < edges[i+1], the last bin holding its upper edge too."""
    last = len(edges) - 2
    width = edges[1] - edges[0]
    index = math.floor((value - edges[0]) / width)
    index = min(max(index, 0), last)
    while index > 0 and value < edges[index]:  # float rounding at an edge
        index -= 1
    while index < last and value >= edges[index + 1]:
        index += 1
    return index


def histogram(
    quantity: str, unit: str, values: Sequence[tuple[EpisodeStatus, float | None]], *, integer: bool
) -> Histogram:
    """The histogram of `values` (each episode's status and value, None where it recorded none), per status."""
    kept = [(status, value) for status, value in values if value is not None]
    missing = len(values) - len(kept)
    if not kept:
        return Histogram(quantity, unit, (), {status: () for status in STATUSES}, 0, missing)
    low = min(value for _, value in kept)
    high = max(value for _, value in kept)
    edges: tuple[float, ...] = (
        tuple(float(e) for e in integer_edges(int(low), int(high))) if integer else real_edges(low, high)
    )
    counts = {status: [0] * (len(edges) - 1) for status in STATUSES}
    for status, value in kept:
        counts[status][bin_index(value, edges)] += 1
    return Histogram(quantity, unit, edges, {s: tuple(c) for s, c in counts.items()}, len(kept), missing)


def distributions(rows: Iterable[EpisodeRow], task: str | None = None) -> Distributions:
    """The steps and return histograms of `rows` (final episodes), of `task`'s alone when given."""
    chosen = [row for row in rows if task is None or row.task == task]
    steps = histogram("steps", "steps", [(row.status, float(row.steps)) for row in chosen], integer=True)
    returns = histogram(
        "return", "sum of rewards", [(row.status, episode_return(row)) for row in chosen], integer=False
    )
    return Distributions(task, len(chosen), steps, returns if returns.n else None)
