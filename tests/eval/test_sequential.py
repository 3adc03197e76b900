"""The sequential paired A/B test: at most alpha false decisions under the null however often it looks, the better
side found when there is one, abstentions counted and never deciding, a confidence sequence that covers the
difference at every pair."""

from __future__ import annotations

import numpy as np
import pytest

from hylo.eval.sequential import (
    ConfidenceSequence,
    PairedSequentialTest,
    decide,
    log_evalue_table,
    pair_probabilities,
    simulate,
)
from hylo.eval.stats import wilson_interval

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


def test_the_confidence_sequence_covers_the_difference_at_every_pair() -> None:
    rng = np.random.default_rng(5)
    p_a, p_b, correlation = 0.4, 0.6, 0.3
    probabilities = pair_probabilities(p_a, p_b, correlation)
    truth = (p_b - p_a + 1) / 2  # the mean of X = (B − A + 1) / 2
    runs, missed, widths = 1000, 0, []
    for row in rng.choice(4, size=(runs, 300), p=probabilities):
        cs = ConfidenceSequence(ALPHA)
        covered = True
        for cell in row:
            cs.update({0: 0.5, 1: 0.0, 2: 1.0, 3: 0.5}[int(cell)])
            covered = covered and cs.low <= truth <= cs.high
        missed += not covered
        widths.append(2 * (cs.high - cs.low))
    assert missed / runs <= ALPHA
    assert float(np.median(widths)) < 0.5  # and it narrows: after 300 pairs, well inside [-1, 1]


def test_an_impossible_correlation_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"0\.9 and 0\.1 cannot have correlation 0\.5"):
        pair_probabilities(0.9, 0.1, 0.5)
    with pytest.raises(ValueError, match="p_a must be in"):
        pair_probabilities(1.5, 0.1)
    with pytest.raises(ValueError, match="alpha must be in"):
        PairedSequentialTest(alpha=0.0)
