"""How many episodes an A/B comparison needs, for three ways of comparing: the paired exact McNemar test (A and B on
the same episode keys), the unpaired two-proportion z-test (independent episodes), and the sequential paired test of
`hylo.stats.sequential` (looked at after every pair). The first two are computed exactly, the third by simulation."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any

import numpy as np

from hylo.stats.sequential import FUTILE, Design, Simulated, decide, pair_probabilities

_NORMAL = NormalDist()

MAX_PAIRS = 100_000
"""The most pairs `mcnemar_pairs` looks at before it says the difference is too small to plan for."""


def _log_binomial(n: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """log C(n, k) for k = 0..n."""
    top = math.lgamma(n + 1)
    return np.array([top - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in range(n + 1)])


@lru_cache(maxsize=4096)
def critical_wins(discordant: int, alpha: float) -> int:
    """The most discordant pairs the losing side may win for the exact two-sided McNemar test (conditional on
    `discordant` pairs, a Binomial(m, 1/2) test) to reject at `alpha`; −1 when no split rejects."""
    if discordant == 0:
        return -1
    tail = np.cumsum(np.exp(_log_binomial(discordant) - discordant * math.log(2.0)))  # P(wins ≤ r)
    rejecting = np.nonzero(np.minimum(1.0, 2 * tail) <= alpha * (1 + 1e-12))[0]
    return int(rejecting[-1]) if rejecting.size and rejecting[-1] < discordant / 2 else -1


def mcnemar_power(p_a: float, p_b: float, pairs: int, *, correlation: float = 0.0, alpha: float = 0.05) -> float:
    """The probability that the exact two-sided McNemar test over `pairs` pairs decides for the better side (for
    equal rates: that it decides at all)."""
    _, only_a, only_b, _ = pair_probabilities(p_a, p_b, correlation)
    d = only_a + only_b
    if d == 0.0 or pairs <= 0:
        return 0.0
    theta = only_b / d if p_b >= p_a else only_a / d  # the better side's chance of winning a discordant pair
    m = np.arange(pairs + 1)
    with np.errstate(divide="ignore"):
        log_m = _log_binomial(pairs) + m * math.log(d) + (pairs - m) * (math.log(1 - d) if d < 1 else -np.inf)
    if d == 1.0:
        log_m = np.where(m == pairs, 0.0, -np.inf)
    power = 0.0
    for count in range(1, pairs + 1):
        weight = math.exp(log_m[count]) if log_m[count] > -745 else 0.0
        r = critical_wins(count, alpha)
        if weight == 0.0 or r < 0:
            continue
        k = np.arange(count + 1)
        with np.errstate(divide="ignore"):
            log_k = _log_binomial(count) + k * math.log(theta or 1e-300) + (count - k) * math.log(1 - theta or 1e-300)
        wins = np.exp(log_k)
        better = float(wins[count - r :].sum())  # the better side won all but at most r
        worse = float(wins[: r + 1].sum()) if p_a == p_b else 0.0  # equal rates: a rejection either way
        power += weight * (better + worse)
    return power


def mcnemar_pairs(p_a: float, p_b: float, *, correlation: float = 0.0, alpha: float = 0.05, power: float = 0.8) -> int:
    """The fewest pairs at which the exact McNemar test reaches `power`. Its power is saw-toothed in the number of
    pairs: this is the count found by bisection between the normal approximation's halves and doubles, stepped down
    while the count below reaches the power too. Raises ValueError when the rates are equal or it would take more
    than `MAX_PAIRS`."""
    if p_a == p_b:
        raise ValueError(f"equal success rates ({p_a}) cannot be told apart with any number of pairs")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")

    only_a, only_b = pair_probabilities(p_a, p_b, correlation)[1:3]
    d, delta = only_a + only_b, abs(only_b - only_a)
    z_alpha, z_power = _NORMAL.inv_cdf(1 - alpha / 2), _NORMAL.inv_cdf(power)
    guess = ((z_alpha * math.sqrt(d) + z_power * math.sqrt(d - delta**2)) / delta) ** 2  # the normal approximation
    return _fewest(lambda n: mcnemar_power(p_a, p_b, n, correlation=correlation, alpha=alpha) >= power, guess,
                   f"telling {p_a} from {p_b} at power {power}")  # fmt: skip


def two_proportion_power(p_a: float, p_b: float, per_side: int, *, alpha: float = 0.05) -> float:
    """The probability that the two-sided pooled two-proportion z-test over `per_side` independent episodes of each
    decides for the better side (summed exactly over both binomials)."""
    pair_probabilities(p_a, p_b)  # the rates' own checks
    n = per_side
    k = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        pmf_a = np.exp(_log_binomial(n) + k * np.log(p_a) + (n - k) * np.log1p(-p_a))
        pmf_b = np.exp(_log_binomial(n) + k * np.log(p_b) + (n - k) * np.log1p(-p_b))
    if p_a in (0.0, 1.0):
        pmf_a = (k == round(p_a * n)).astype(float)
    if p_b in (0.0, 1.0):
        pmf_b = (k == round(p_b * n)).astype(float)
    a, b = k[:, None], k[None, :]
    pooled = (a + b) / (2 * n)
    spread = np.sqrt(pooled * (1 - pooled) * 2 / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(spread > 0, (b - a) / n / spread, 0.0)
    z_alpha = _NORMAL.inv_cdf(1 - alpha / 2)
    rejects = z >= z_alpha if p_b >= p_a else z <= -z_alpha
    if p_a == p_b:
        rejects = np.abs(z) >= z_alpha
    return float((pmf_a[:, None] * pmf_b[None, :] * rejects).sum())


def two_proportion_per_side(p_a: float, p_b: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """The fewest independent episodes per side at which the pooled two-proportion z-test reaches `power` (found as
    `mcnemar_pairs` finds its count)."""
    if p_a == p_b:
        raise ValueError(f"equal success rates ({p_a}) cannot be told apart with any number of episodes")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    mean = (p_a + p_b) / 2
    z_alpha, z_power = _NORMAL.inv_cdf(1 - alpha / 2), _NORMAL.inv_cdf(power)
    guess = ((z_alpha * math.sqrt(2 * mean * (1 - mean)) + z_power * math.sqrt(p_a * (1 - p_a) + p_b * (1 - p_b)))
             / (p_b - p_a)) ** 2  # fmt: skip  # Fleiss's normal approximation
    return _fewest(lambda n: two_proportion_power(p_a, p_b, n, alpha=alpha) >= power, guess,
                   f"telling {p_a} from {p_b} at power {power}")  # fmt: skip


CORRELATIONS = (0.0, 0.25, 0.5, 0.75)
"""The correlations `hylo plan` gives the paired count at when none is stated: from none (pairing saves nothing) to
strong (A and B mostly succeed and fail on the same episodes)."""


def paired_by_correlation(
    p_a: float, p_b: float, correlations: tuple[float, ...] = CORRELATIONS, *, alpha: float = 0.05,
    power: float = 0.8,
) -> list[tuple[float, int]]:  # fmt: skip
    """(correlation, `mcnemar_pairs` at it) for each of `correlations` that the two rates can have."""
    counts = []
    for correlation in correlations:
        try:
            pair_probabilities(p_a, p_b, correlation)
        except ValueError:
            continue  # e.g. rates far apart cannot correlate strongly
        counts.append((correlation, mcnemar_pairs(p_a, p_b, correlation=correlation, alpha=alpha, power=power)))
    return counts


def correlation_error(correlation: float, pairs: int) -> float:
    """The standard error of a correlation estimated from `pairs` pairs, (1 − r²)/√n (its large-sample value): how
    far below a pilot's estimate to plan with."""
    return (1 - correlation**2) / math.sqrt(pairs)


@dataclass(frozen=True)
class SequentialPlan:
    """The sequential paired test's plan for one design: `max_pairs`, the smallest cap at which it decides for the
    better side with the power asked for, and with that cap the mean and 90th percentile of the pairs its
    comparisons use (a comparison stops when it decides, stops for futility or is curtailed, else at the cap);
    `power` as simulated, `futile` the share of comparisons stopped for futility ("no difference ≥ δ") although the
    rates differ."""

    max_pairs: int
    mean_pairs: float
    p90_pairs: int
    power: float
    design: Design = "anytime"
    min_effect: float | None = None
    futile: float = 0.0

    @property
    def type_ii(self) -> float:
        """The share of comparisons that miss the difference: 1 − power."""
        return 1.0 - self.power


def sequential_plan(
    p_a: float,
    p_b: float,
    *,
    correlation: float = 0.0,
    alpha: float = 0.05,
    power: float = 0.8,
    runs: int = 4000,
    seed: int = 1,
    design: Design = "anytime",
    min_effect: float | None = None,
    tuning: dict[str, float] | None = None,
) -> SequentialPlan:
    """The sequential test's plan for `design` (with futility at `min_effect` δ when given), from `runs` simulated
    comparisons; `tuning` overrides `decide`'s `prior`, `beta` or `share` (as the benchmark tunes them)."""
    options = dict(tuning or {})
    fixed = mcnemar_pairs(p_a, p_b, correlation=correlation, alpha=alpha, power=power)
    horizon = 4 * fixed
    better = 1 if p_b > p_a else -1
    rng = np.random.default_rng(seed)
    cells = rng.choice(4, size=(runs, horizon), p=pair_probabilities(p_a, p_b, correlation)).astype(np.int8)
    needed = math.ceil(power * runs)
    if design == "anytime":
        sim = decide(cells, alpha=alpha, min_effect=min_effect, **options)  # type: ignore[arg-type]
        right = np.sort(sim.pairs_used[sim.decisions == better])
        if right.size < needed:
            raise ValueError(f"the sequential test does not reach power {power} within {horizon} pairs for {p_a}/{p_b}")
        cap = int(right[needed - 1])
        used = np.minimum(sim.pairs_used, cap)
        futile = float(((sim.stopped == FUTILE) & (sim.pairs_used <= cap)).mean())
        decided = float((right <= cap).sum() / runs)
        return SequentialPlan(cap, float(used.mean()), _p90(used), decided, design, min_effect, futile)
    return _capped_plan(cells, better, fixed, alpha=alpha, power=power, min_effect=min_effect, options=options)


def _capped_plan(
    cells: np.ndarray[Any, Any], better: int, fixed: int, *, alpha: float, power: float, min_effect: float | None,
    options: dict[str, float],
) -> SequentialPlan:  # fmt: skip
    """The capped design's plan: its boundary depends on the cap, so the cap is searched (by bisection, on the same
    simulated pairs for every cap tried) for the smallest whose runs reach `power`."""
    horizon = cells.shape[1]
    tried: dict[int, Simulated] = {}

    def at(cap: int) -> Simulated:
        if cap not in tried:
            tried[cap] = decide(cells[:, :cap], alpha=alpha, design="capped", min_effect=min_effect,
                                **options)  # fmt: skip
        return tried[cap]

    def reaches(cap: int) -> bool:
        return float((at(cap).decisions == better).mean()) >= power

    low, high = max(1, fixed // 3), max(2, fixed)
    while not reaches(high):
        low, high = high, min(2 * high, horizon)
        if low == horizon:
            raise ValueError(f"the capped design does not reach power {power} within {horizon} pairs")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    sim = at(high)
    power_reached = float((sim.decisions == better).mean())
    futile = float((sim.stopped == FUTILE).mean())
    used = sim.pairs_used
    return SequentialPlan(high, float(used.mean()), _p90(used), power_reached, "capped", min_effect, futile)


def _p90(used: np.ndarray[Any, Any]) -> int:
    return int(np.ceil(np.quantile(used, 0.9)))


def _fewest(reaches: Callable[[int], bool], guess: float, what: str) -> int:
    """The fewest n for which `reaches(n)`, for a power that grows with n but saw-toothed: found by bisection
    between the normal approximation's `guess` halved and doubled (widened as needed), then stepped down while the
    count below reaches it too."""
    low, high = max(1, int(guess / 2)), max(2, int(guess * 2))
    while low > 1 and reaches(low):
        low //= 2
    while not reaches(high):
        low, high = high, high * 2
        if high > MAX_PAIRS:
            raise ValueError(f"{what} takes more than {MAX_PAIRS} episodes")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    while high > 1 and reaches(high - 1):
        high -= 1
    return high


def detectable_difference(rate: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest difference from success rate `rate` that comparing two runs of `n` scored episodes each detects
    with `power` (the unpaired two-proportion z-test's normal approximation, up or down, whichever is smaller); None
    when not even a difference to 0 or 1 is (or `n` is 0). Pairing both runs on the same episodes detects less when
    their outcomes correlate."""
    if n <= 0 or not 0.0 <= rate <= 1.0:
        return None
    z_alpha = _NORMAL.inv_cdf(1 - alpha / 2)

    def approximate_power(other: float) -> float:
        mean = (rate + other) / 2
        spread = math.sqrt(rate * (1 - rate) + other * (1 - other)) or 1e-12
        shift = abs(other - rate) * math.sqrt(n) - z_alpha * math.sqrt(2 * mean * (1 - mean))
        return _NORMAL.cdf(shift / spread)

    found = []
    for sign, bound in ((1, 1.0 - rate), (-1, rate)):  # up, then down
        if bound <= 0 or approximate_power(rate + sign * bound) < power:
            continue
        low, high = 0.0, bound
        for _ in range(50):
            mid = (low + high) / 2
            low, high = (low, mid) if approximate_power(rate + sign * mid) >= power else (mid, high)
        found.append(high)
    return min(found) if found else None
