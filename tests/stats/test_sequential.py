"""The sequential paired A/B test: at most alpha false decisions under the null however often it looks, the better
side found when there is one, abstentions counted and never deciding, a confidence sequence that covers the
difference at every pair and excludes 0 exactly when the test decides, on the side it decides for."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hylo.stats.sequential import (
    PairedSequentialTest,
    confidence_interval,
    decide,
    log_evalue,
    log_evalue_at,
    log_evalue_table,
    pair_probabilities,
    simulate,
)
from hylo.stats.success import wilson_interval

ALPHA = 0.05


@pytest.mark.parametrize("correlation", [0.0, 0.5])
@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_under_the_null_false_decisions_stay_below_alpha(p: float, correlation: float) -> None:
    runs = 10_000
    sim = simulate(p, p, correlation=correlation, max_pairs=300, runs=runs, alpha=ALPHA, seed=7)
    false = int((sim.decisions != 0).sum())
    _, upper = wilson_interval(false, runs, confidence=0.99)
    assert upper <= ALPHA + 0.005, f"{false} false decisions in {runs} runs at p={p}, correlation={correlation}"


def test_the_simulation_decides_as_the_test_does_pair_by_pair() -> None:
    rng = np.random.default_rng(3)
    cells = rng.choice(4, size=(200, 120), p=pair_probabilities(0.4, 0.7, 0.2))
    vectorised = decide(cells, alpha=ALPHA)
    decided = {1: "B better", -1: "A better", 0: None}
    for row, decision, used in zip(cells, vectorised.decisions, vectorised.pairs_used, strict=True):
        test = PairedSequentialTest(alpha=ALPHA)
        for cell in row:
            test.add(cell in (1, 3), cell in (2, 3))  # 1: only A succeeded, 2: only B, 3: both
        assert test.decision == decided[int(decision)]
        assert (test.decided_at or len(row)) == used
        assert test.log_evalue == pytest.approx(log_evalue_table(120)[test.a_wins + test.b_wins, test.b_wins])
    assert 0 < (vectorised.decisions == 1).sum() < len(cells)  # some runs decide, some do not: both paths compared


def test_a_clear_difference_is_found_for_the_better_side_early() -> None:
    sim = simulate(0.3, 0.8, max_pairs=200, runs=2000, alpha=ALPHA, seed=11)
    assert (sim.decisions == 1).mean() > 0.99 and (sim.decisions == -1).sum() == 0
    assert np.median(sim.pairs_used) < 60
    swapped = simulate(0.8, 0.3, max_pairs=200, runs=2000, alpha=ALPHA, seed=11)
    assert (swapped.decisions == -1).mean() > 0.99


def test_abstentions_are_counted_and_never_decide() -> None:
    test = PairedSequentialTest(alpha=ALPHA)
    for _ in range(50):
        test.add(None, True)  # B succeeded, A's episode errored
        test.add(False, None)
    assert test.decision is None and test.abstentions == 100 and test.pairs == 0
    assert test.difference is None and test.confidence_sequence == (-1.0, 1.0)
    for _ in range(12):
        test.add(False, True)
    assert test.decision == "B better" and test.decided_at is not None and test.decided_at <= 12
    record = test.to_json()
    assert record["abstentions"] == 100 and record["pairs_used"] == test.decided_at
    assert record["flips"] == {"b_wins": 12, "a_wins": 0, "both": 0, "neither": 0}
    assert record["difference"] == 1.0


def test_the_decision_stays_once_made() -> None:
    test = PairedSequentialTest(alpha=ALPHA)
    for _ in range(10):
        test.add(True, False)
    assert test.decision == "A better"
    decided_at = test.decided_at
    for _ in range(40):
        test.add(False, True)
    assert test.decision == "A better" and test.decided_at == decided_at and test.pairs == 50


def counts_at(cells: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs won by B, by A, and tied among the first `pairs[run]` pairs of each run (0 neither, 1 only A, 2 only B,
    3 both)."""
    first = np.arange(cells.shape[1])[None, :] < pairs[:, None]
    b_wins, a_wins = ((cells == 2) & first).sum(axis=1), ((cells == 1) & first).sum(axis=1)
    return b_wins, a_wins, pairs - b_wins - a_wins


def misses_allowed(runs: int) -> float:
    """The largest share of misses a level-alpha guarantee leaves room for in `runs` simulated runs: alpha plus three
    binomial standard errors."""
    return ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


@pytest.mark.parametrize(("p_a", "p_b", "correlation"), [(0.5, 0.5, 0.3), (0.4, 0.6, 0.3), (0.7, 0.5, 0.0)])
def test_the_interval_excludes_zero_exactly_when_the_test_decides_on_the_side_it_decides(
    p_a: float, p_b: float, correlation: float
) -> None:
    cells = np.random.default_rng(13).choice(4, size=(3000, 150), p=pair_probabilities(p_a, p_b, correlation))
    sim = decide(cells, alpha=ALPHA)
    b_wins, a_wins, ties = counts_at(cells, sim.pairs_used)  # where each run stopped: its decision, or the cap
    low, high = confidence_interval(b_wins, a_wins, ties, alpha=ALPHA)
    decided = sim.decisions != 0
    assert (decided.any() and (~decided).any()) or p_a == p_b  # both kinds of run are checked where they occur
    assert np.all(low[sim.decisions == 1] > 0) and np.all(high[sim.decisions == -1] < 0)
    assert np.all((low <= 0) & (high >= 0) == ~decided)
    observed = (b_wins - a_wins) / sim.pairs_used
    assert np.all((low <= observed) & (observed <= high))


@pytest.mark.parametrize(("p_a", "p_b", "correlation"), [(0.4, 0.6, 0.3), (0.7, 0.5, 0.0), (0.2, 0.3, 0.6)])
def test_the_interval_covers_the_difference_at_every_pair_at_once(p_a: float, p_b: float, correlation: float) -> None:
    runs, pairs = 1000, 150
    cells = np.random.default_rng(17).choice(4, size=(runs, pairs), p=pair_probabilities(p_a, p_b, correlation))
    b_wins, a_wins = np.cumsum(cells == 2, axis=1), np.cumsum(cells == 1, axis=1)
    ties = np.arange(1, pairs + 1)[None, :] - b_wins - a_wins
    truth = p_b - p_a
    # the interval at pair n misses the truth exactly when the truth is rejected there: E_n(truth) ≥ 1/alpha
    rejected = log_evalue_at(b_wins, a_wins, ties, truth) >= math.log(1 / ALPHA)
    missed = rejected.any(axis=1)
    assert missed.mean() <= misses_allowed(runs), f"{missed.sum()} of {runs} runs missed {truth:+.2f} at some pair"

    sim = decide(cells, alpha=ALPHA)  # and where `hylo ab` would stop: the deciding pair, or the cap
    low, high = confidence_interval(*counts_at(cells, sim.pairs_used), alpha=ALPHA)
    covered = (low <= truth) & (truth <= high)
    assert np.all(covered | missed) and (~covered).mean() <= misses_allowed(runs)
    at_cap = sim.decisions == 0
    if at_cap.any():  # and it narrows: after 150 pairs, well inside [-1, 1]
        assert float(np.median((high - low)[at_cap])) < 0.45


def test_the_interval_is_the_test_inverted() -> None:
    for b_wins, a_wins, ties in [(15, 5, 80), (10, 0, 0), (0, 7, 3), (100, 60, 840), (4, 4, 0)]:
        low, high = (float(v) for v in confidence_interval(b_wins, a_wins, ties, alpha=ALPHA))
        assert log_evalue_at(b_wins, a_wins, ties, 0.0) == pytest.approx(log_evalue(b_wins, a_wins), abs=1e-9)
        for bound in (low, high):  # each bound is where E_n(δ) reaches 1/alpha, or the edge of [-1, 1]
            if abs(bound) < 1:
                assert log_evalue_at(b_wins, a_wins, ties, bound) == pytest.approx(math.log(1 / ALPHA), abs=1e-6)
        inside = np.linspace(low, high, 41)[1:-1]
        assert np.all(log_evalue_at(b_wins, a_wins, ties, inside) < math.log(1 / ALPHA))
        for outside in (low - 0.01, high + 0.01):
            if -1 < outside < 1:
                assert log_evalue_at(b_wins, a_wins, ties, outside) >= math.log(1 / ALPHA)


def test_the_test_reports_the_interval_of_the_pairs_it_took() -> None:
    cells = np.random.default_rng(23).choice(4, size=(24, 60), p=pair_probabilities(0.3, 0.6, 0.2))
    sim = decide(cells, alpha=ALPHA)
    expected = np.stack(confidence_interval(*counts_at(cells, sim.pairs_used), alpha=ALPHA), axis=1)
    for row, used, interval in zip(cells, sim.pairs_used, expected, strict=True):
        test = PairedSequentialTest(alpha=ALPHA)
        for cell in row[:used]:  # as `hylo ab` feeds it: up to the deciding pair, or the cap
            test.add(cell in (1, 3), cell in (2, 3))
        assert test.confidence_sequence == pytest.approx(tuple(interval), abs=1e-12)
        assert test.to_json()["confidence_sequence"] == list(test.confidence_sequence)
        assert test.to_json()["confidence_sequence_kind"] == "test"
    assert 0 < (sim.decisions == 1).sum() < len(cells)


def test_later_pairs_never_move_the_interval_back_across_zero() -> None:
    test = PairedSequentialTest(alpha=ALPHA)
    for _ in range(10):
        test.add(True, False)
    assert test.decision == "A better" and test.confidence_sequence[1] < 0
    for _ in range(40):
        test.add(False, True)  # B wins the next 40: the evidence now points the other way
    low, high = test.confidence_sequence
    assert test.decision == "A better" and high < 0 and low <= high


def test_an_impossible_correlation_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"0\.9 and 0\.1 cannot have correlation 0\.5"):
        pair_probabilities(0.9, 0.1, 0.5)
    with pytest.raises(ValueError, match="p_a must be in"):
        pair_probabilities(1.5, 0.1)
    with pytest.raises(ValueError, match="alpha must be in"):
        PairedSequentialTest(alpha=0.0)
