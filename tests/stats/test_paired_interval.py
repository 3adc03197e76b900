"""The interval for B − A over paired episodes (Newcombe's square-and-add interval for paired proportions), as the
report shows it beside McNemar's p: it covers the true difference as often as it says, for correlated pairs as for
independent ones, and it turns with the runs' order."""

from __future__ import annotations

import numpy as np
import pytest

from hylo.stats.success import mcnemar_exact, paired_difference_interval


def _coverage(rate_a: float, rate_b: float, both: float, n: int, runs: int, seed: int) -> float:
    """How often the 95% interval over `n` pairs holds the true B − A, for pairs drawn with P(both succeed) =
    `both` (and so a correlation set by it)."""
    probabilities = [both, rate_a - both, rate_b - both, 1 - rate_a - rate_b + both]
    cells = np.random.default_rng(seed).multinomial(n, probabilities, size=runs)
    held = 0
    for both_success, a_only, b_only, neither in cells:
        low, high = paired_difference_interval(int(both_success), int(a_only), int(b_only), int(neither))
        held += low <= rate_b - rate_a <= high
    return held / runs


@pytest.mark.parametrize(
    ("rate_a", "rate_b", "both", "n"),
    [(0.6, 0.7, 0.5, 40), (0.6, 0.7, 0.42, 40), (0.3, 0.5, 0.25, 100), (0.9, 0.9, 0.85, 30)],
    ids=["correlated", "independent", "bigger-effect", "near-ceiling"],
)
def test_the_interval_covers_the_true_difference_about_as_often_as_it_says(
    rate_a: float, rate_b: float, both: float, n: int
) -> None:
    coverage = _coverage(rate_a, rate_b, both, n, runs=4000, seed=7)
    assert 0.93 <= coverage <= 0.995, coverage  # near nominal: not too narrow, not uselessly wide


def test_swapping_the_runs_negates_the_interval() -> None:
    low, high = paired_difference_interval(20, 3, 9, 8)
    assert paired_difference_interval(20, 9, 3, 8) == pytest.approx((-high, -low))
    assert low < 6 / 40 < high


def test_pairs_that_never_disagree_give_an_interval_around_zero_that_narrows_with_more_pairs() -> None:
    few = paired_difference_interval(5, 0, 0, 5)
    many = paired_difference_interval(50, 0, 0, 50)
    assert few[0] == pytest.approx(-few[1]) and few[0] < 0 < few[1]
    assert few[0] < many[0] < 0 < many[1] < few[1]


def test_a_clear_difference_excludes_zero_where_mcnemar_rejects_and_a_small_one_holds_it() -> None:
    assert mcnemar_exact(12, 1) < 0.05
    assert paired_difference_interval(10, 12, 1, 17)[1] < 0
    assert mcnemar_exact(3, 2) > 0.05
    low, high = paired_difference_interval(10, 3, 2, 25)
    assert low < 0 < high


def test_every_bound_stays_in_minus_one_to_one() -> None:
    low, high = paired_difference_interval(0, 10, 0, 0)
    assert low == -1.0 and -1.0 < high < 0
    low, high = paired_difference_interval(0, 0, 10, 0)
    assert 0 < low < 1.0 and high == 1.0


def test_bad_counts_are_named() -> None:
    with pytest.raises(ValueError, match="b_only"):
        paired_difference_interval(1, 2, -1, 4)
    with pytest.raises(ValueError, match="no pairs"):
        paired_difference_interval(0, 0, 0, 0)
