"""The futility stop of the sequential paired A/B test: "no difference ≥ δ", once the discordant pairs say that a
difference of the smallest size worth finding (`--min-effect` δ) is unlikely.

With ψ̂ = m/n the share of the n pairs so far that were discordant, a difference δ = p_B − p_A means B wins a
discordant pair with probability θ₁ = 1/2 + δ/(2ψ̂) (clipped to `THETA_MAX`). Wald's lower boundary for the
sequential probability ratio test of Bernoulli(θ₁) against Bernoulli(1/2) (Wald 1945, "Sequential tests of statistical
hypotheses", Ann. Math. Statist.) stops when the likelihood ratio over the m discordant pairs falls below
β_f/(1 − alpha); the test stops for futility when that holds for θ₁ and for 1 − θ₁ (a difference of δ either way).
With B's lead s (its discordant wins less A's) the two ratios are 2^m θ₁^((m ± s)/2) (1 − θ₁)^((m ∓ s)/2), so the stop
is a band |s| < u(m, θ₁), u growing linearly in m.

The stop is non-binding: the efficacy boundary ignores it, so it can only remove decisions and never adds a false
one. What it costs is power at a difference of δ (a run stopped for futility although B is δ better): that share,
type II, is measured by simulation (`benchmarks/sequential_savings.py`) and `BETA` tuned on it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

BETA = 0.05
"""β_f of Wald's lower boundary β_f/(1 − alpha). Chosen by simulation among 0.02, 0.05 and 0.1 (δ = the difference):
0.1 saves a little more at power 0.8 but stops so many runs for futility that the anytime design cannot reach power
0.9 at a difference of 0.3; 0.05 is the largest that lets every design reach power 0.9 (docs/statistics.md)."""
MIN_DISCORDANT = 10
"""The fewest discordant pairs before a futility stop: ψ̂ and θ₁ need a few to mean anything."""
THETA_MAX = 0.95
"""The most θ₁ may be: a small ψ̂ early on would otherwise make θ₁ 1, and one loss each way futile."""


def futility_leads(
    discordant: Any, pairs: Any, *, min_effect: float, alpha: float, beta: float = BETA
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """u for each (discordant, pairs) (elementwise): the test stops for futility when |B's lead| < u (−inf where it
    cannot: too few discordant pairs)."""
    m = np.asarray(discordant, dtype=np.float64)
    n = np.maximum(np.asarray(pairs, dtype=np.float64), 1.0)
    psi = np.maximum(m, 1.0) / n
    theta = np.clip(0.5 + min_effect / (2 * psi), 0.5 + 1e-9, THETA_MAX)
    bound = math.log(beta / (1 - alpha))
    u = (2 * bound - m * np.log(4 * theta * (1 - theta))) / np.log(theta / (1 - theta))
    out: np.ndarray[Any, np.dtype[np.float64]] = np.where(m >= MIN_DISCORDANT, u, -np.inf)
    return out


def check_min_effect(min_effect: float | None) -> None:
    """A δ that is no difference (≤ 0) or past every one (≥ 1) is refused naming it."""
    if min_effect is not None and not 0.0 < min_effect < 1.0:
        raise ValueError(f"--min-effect must be a difference in (0, 1), got {min_effect!r}")
