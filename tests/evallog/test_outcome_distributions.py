"""The histograms of a run's page: round, integer-aligned bins for steps, at most 30 bins, every episode counted once
under its status, and a run without returns told apart from one whose returns are all alike."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from hylo.core.status import EpisodeStatus
from hylo.evallog.distributions import MAX_BINS, distributions, integer_edges, real_edges
from hylo.evallog.rows import EpisodeRow

S, F, E, INV, A = (
    EpisodeStatus.SUCCESS,
    EpisodeStatus.FAILURE,
    EpisodeStatus.ERROR,
    EpisodeStatus.INFRA_INVALID,
    EpisodeStatus.SAFETY_ABORT,
)


def row(index: int, status: EpisodeStatus, steps: int, ret: Any = None, task: str = "GoTo") -> EpisodeRow:
    metrics = {} if ret is None else {"return": ret}
    return EpisodeRow(
        episode_id=f"b/test/{task}/{index:04d}@s0",
        task=task,
        split="test",
        index=index,
        base_seed=0,
        seed=index,
        status=status,
        reason=status.value,
        success=status is S,
        steps=steps,
        metrics=metrics,
    )


def test_steps_of_a_small_range_get_one_bin_per_step_count() -> None:
    rows = [row(0, S, 3), row(1, F, 5), row(2, S, 3), row(3, A, 4), row(4, E, 5)]
    steps = distributions(rows).steps
    assert steps.edges == (3.0, 4.0, 5.0, 6.0)
    assert steps.counts[S] == (2, 0, 0)
    assert steps.counts[F] == (0, 0, 1)
    assert steps.counts[A] == (0, 1, 0)
    assert steps.counts[E] == (0, 0, 1)
    assert steps.counts[INV] == (0, 0, 0)
    assert (steps.n, steps.missing) == (5, 0)


def test_a_wide_range_of_steps_gets_round_integer_bins_that_start_on_a_multiple() -> None:
    # 7..93 is 87 step counts: width 1 or 2 makes more than 30 bins, width 5 makes 18 from 5 to 95.
    rows = [row(0, S, 7), row(1, F, 9), row(2, F, 10), row(3, S, 93), row(4, INV, 93)]
    steps = distributions(rows).steps
    assert steps.edges == tuple(float(edge) for edge in range(5, 100, 5))
    assert steps.counts[S][0] == 1 and steps.counts[F][0] == 1 and steps.counts[F][1] == 1  # 7, 9 | 10
    assert steps.counts[S][-1] == 1 and steps.counts[INV][-1] == 1  # 93 in [90, 95)
    assert sum(sum(counts) for counts in steps.counts.values()) == 5


@pytest.mark.parametrize("low, high", [(0, 0), (1, 29), (0, 30), (1, 1000), (17, 100_003), (5, 5)])
def test_integer_edges_cover_the_range_in_at_most_30_bins(low: int, high: int) -> None:
    edges = integer_edges(low, high)
    width = edges[1] - edges[0]
    assert len(edges) - 1 <= MAX_BINS
    assert edges[0] <= low and high < edges[-1]
    assert all(b - a == width for a, b in itertools.pairwise(edges))
    assert edges[0] % width == 0 and str(width).strip("0") in {"1", "2", "5"}


def test_returns_are_binned_on_round_edges_and_counted_per_status() -> None:
    rows = [row(0, S, 10, 1.0), row(1, S, 10, 0.95), row(2, F, 12, 0.0), row(3, F, 40, 0.0), row(4, E, 3, 0.52)]
    returns = distributions(rows).returns
    assert returns is not None
    # 0..1 over 30 bins: 0.05 is the smallest round width that fits (0.025 would make 41 bins).
    assert returns.edges[:3] == (0.0, 0.05, 0.1) and returns.edges[-1] == 1.05 and len(returns.edges) == 22
    assert returns.counts[F][0] == 2
    assert returns.counts[E][10] == 1  # 0.52 in [0.5, 0.55)
    assert returns.counts[S][19] == 1 and returns.counts[S][20] == 1  # 0.95 in [0.95, 1.0), 1.0 in [1.0, 1.05)
    assert (returns.quantity, returns.n, returns.missing) == ("return", 5, 0)


def test_negative_returns_and_one_value_alone() -> None:
    assert real_edges(-1.3, 2.7)[0] == -1.4 and real_edges(-1.3, 2.7)[-1] == 2.8
    one = distributions([row(0, S, 5, 2.5), row(1, F, 9, 2.5)]).returns
    assert one is not None and one.edges == (2.0, 3.0) and one.counts[S] == (1,) and one.counts[F] == (1,)


def test_a_run_without_returns_has_no_return_histogram_and_episodes_without_one_are_left_out() -> None:
    assert distributions([row(0, S, 5), row(1, F, 9)]).returns is None
    partial = distributions([row(0, S, 5, 1.0), row(1, F, 9), row(2, E, 9, "n/a"), row(3, F, 2, float("nan"))])
    assert partial.returns is not None
    assert (partial.returns.n, partial.returns.missing) == (1, 3)
    assert partial.steps.n == 4, "every episode has a length"


def test_a_task_counts_its_own_episodes_only() -> None:
    rows = [row(0, S, 5, task="A"), row(1, F, 6, task="A"), row(0, F, 50, task="B")]
    chosen = distributions(rows, "A")
    assert chosen.task == "A" and chosen.episodes == 2
    assert chosen.steps.edges == (5.0, 6.0, 7.0)
    assert chosen.steps.counts[S] == (1, 0) and chosen.steps.counts[F] == (0, 1)


def test_no_episodes_make_empty_histograms() -> None:
    empty = distributions([])
    assert empty.episodes == 0 and empty.steps.edges == () and empty.returns is None
    assert empty.to_json()["steps"]["counts"] == {status.value: [] for status in EpisodeStatus}
