"""The capped design and the futility stop of the sequential paired A/B test: at most alpha false decisions under the
null for both designs with and without futility (10,000 simulated comparisons per cell), the capped boundary's
dynamic programming equal to brute force over every win pattern, the comparison object deciding as the simulation
does, and futility stopping most null comparisons early while missing few differences of δ."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from hylo.stats.capped import capped_boundary, rejection_probabilities
from hylo.stats.sequential import FUTILE, PairedSequentialTest, decide, pair_probabilities, simulate
from hylo.stats.success import wilson_interval

ALPHA = 0.05
RUNS = {"anytime": 10_000, "capped": 40_000}
"""Comparisons per null cell: the capped design spends nearly all of alpha, and from 10,000 runs the 99 % upper bound
of a rate of exactly 0.05 is about 0.056; from 40,000 it is about 0.053."""


@pytest.mark.parametrize("min_effect", [None, 0.1])
@pytest.mark.parametrize("design", ["anytime", "capped"])
@pytest.mark.parametrize("max_pairs", [50, 200])
@pytest.mark.parametrize(("p", "correlation"), [(0.5, 0.0), (0.2, 0.5), (0.8, 0.2)])
def test_under_the_null_false_decisions_stay_below_alpha(
    p: float, correlation: float, max_pairs: int, design: str, min_effect: float | None
) -> None:
    runs = RUNS[design]
    sim = simulate(p, p, correlation=correlation, max_pairs=max_pairs, runs=runs, alpha=ALPHA, seed=17,
                   design=design, min_effect=min_effect)  # type: ignore[arg-type]  # fmt: skip
    false = int((sim.decisions != 0).sum())
    _, upper = wilson_interval(false, runs, confidence=0.99)
    print(f"{design} δ={min_effect} N={max_pairs} p={p} r={correlation}: {false / runs:.4f}, 99% upper {upper:.4f}")
    assert upper <= ALPHA + 0.005, f"{false} false decisions in {runs} ({design}, δ {min_effect}, p {p})"


def _brute_force(interim: np.ndarray[Any, Any], final: np.ndarray[Any, Any], discordant: int) -> float:
    """P(reject by the cap | `discordant` pairs) by enumerating every win pattern of the fair coin."""
    rejecting = 0
    for wins in itertools.product((1, -1), repeat=discordant):
        leads = np.cumsum(wins)
        crossed = any(abs(int(lead)) >= interim[m + 1] for m, lead in enumerate(leads))
        rejecting += crossed or (discordant > 0 and abs(int(leads[-1])) >= final[discordant])
    return float(rejecting / 2**discordant)


def test_the_capped_tables_give_the_crossing_probability_brute_force_gives() -> None:
    boundary = capped_boundary(12, ALPHA)
    exact = rejection_probabilities(boundary.interim, boundary.final)
    for discordant in range(1, 13):
        assert exact[discordant] == pytest.approx(_brute_force(boundary.interim, boundary.final, discordant), abs=1e-12)
    assert exact.max() <= ALPHA + 1e-12
    # the final look spends what is left: one step further would exceed alpha wherever it rejects at all
    for discordant in range(1, 13):
        final = boundary.final.copy()
        if final[discordant] > 1 and final[discordant] <= discordant:
            final[discordant] -= 2
            assert _brute_force(boundary.interim, final, discordant) > ALPHA


def test_the_capped_boundary_spends_its_share_before_the_cap_and_nearly_alpha_by_it() -> None:
    boundary = capped_boundary(200, ALPHA)
    assert 0.0 < boundary.interim_spent <= 0.95 * ALPHA
    at_cap = rejection_probabilities(boundary.interim, boundary.final)
    assert at_cap.max() <= ALPHA and at_cap[150:].min() > 0.045  # nearly all of alpha at a realistic D


@pytest.mark.parametrize(("design", "min_effect"), [("anytime", 0.3), ("capped", None), ("capped", 0.3)])
def test_the_comparison_decides_and_stops_as_the_simulation_does(design: str, min_effect: float | None) -> None:
    rng = np.random.default_rng(5)
    cells = rng.choice(4, size=(120, 90), p=pair_probabilities(0.4, 0.6, 0.0))
    sim = decide(cells, alpha=ALPHA, design=design, min_effect=min_effect)  # type: ignore[arg-type]
    decided = {1: "B better", -1: "A better", 0: None}
    for row, decision, used, how in zip(cells, sim.decisions, sim.pairs_used, sim.stopped, strict=True):
        test = PairedSequentialTest(alpha=ALPHA, design=design, max_pairs=90, min_effect=min_effect)  # type: ignore[arg-type]
        for cell in row:
            test.add(cell in (1, 3), cell in (2, 3))
            if test.stopped:
                break
        assert test.decision == decided[int(decision)] and test.pairs == used
        assert test.futile == (how == FUTILE)
    assert len(np.unique(sim.stopped)) >= 2 and (min_effect is None or FUTILE in sim.stopped)  # paths compared


def test_futility_stops_null_comparisons_early_and_misses_few_differences_of_delta() -> None:
    null = simulate(0.5, 0.5, max_pairs=400, runs=2000, design="capped", min_effect=0.2, seed=3)
    assert (null.stopped == FUTILE).mean() > 0.6 and null.pairs_used.mean() < 200
    effect = simulate(0.5, 0.7, max_pairs=120, runs=2000, design="capped", min_effect=0.2, seed=4)
    assert (effect.stopped == FUTILE).mean() < 0.12  # type II from futility, loosely: β_f is 0.05
    assert (effect.decisions == 1).mean() > 0.8


def test_the_capped_design_refuses_a_missing_cap_and_a_bad_delta() -> None:
    with pytest.raises(ValueError, match="cap"):
        PairedSequentialTest(design="capped")
    with pytest.raises(ValueError, match=r"1\.5"):
        PairedSequentialTest(min_effect=1.5)
    with pytest.raises(ValueError, match="'fixed'"):
        PairedSequentialTest(design="fixed")  # type: ignore[arg-type]


def test_a_capped_abstention_at_the_cap_still_gets_the_final_look() -> None:
    boundary = capped_boundary(30, ALPHA)
    test = PairedSequentialTest(alpha=ALPHA, design="capped", max_pairs=30)
    lead_needed = int(boundary.needed(12, at_cap=True))
    lead = lead_needed + (lead_needed - 12) % 2  # a lead over 12 discordant pairs is even
    assert lead < int(boundary.interim[12])  # the final look rejects where the interim one does not
    wins = (12 + lead) // 2
    outcomes = [(True, False)] * (12 - wins) + [(False, True)] * wins + [(True, True)] * 17
    for a, b in outcomes:  # B ends ahead by the final lead, never by the interim one before the cap
        test.add(a, b)
    assert (test.stopped, test.pairs) == (False, 29)
    test.add(None, True)  # the 30th pair abstains: the look at the cap happens anyway
    assert test.decision == "B better" and test.stopped_for == "efficacy"
