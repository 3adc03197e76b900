"""The sequential paired A/B test: look after every pair, stop as soon as the evidence decides, and still make a
false decision with probability at most alpha.

A and B run on the same episode keys (same task, index and seed), so each key gives a pair of outcomes. Only the
discordant pairs (one side succeeded, the other failed) say which is better. Under the null, that for each pair A
winning it and B winning it are equally likely (McNemar's null: the two success rates are equal, however correlated
A and B are), B wins each discordant pair with probability 1/2. The test is the mixture sequential probability ratio
test of that Bernoulli(1/2) null (Robbins 1970, "Statistical methods related to the law of the iterated logarithm";
in today's terms an e-process, Ramdas et al. 2023, "Game-theoretic statistics and safe anytime-valid inference"):
with k of n discordant pairs won by B,

    E_n = 2^n · B(a + k, a + n − k) / B(a, a)

(the likelihood ratio of Bernoulli(θ) against Bernoulli(1/2), averaged over θ ~ Beta(a, a)) is a nonnegative
martingale with mean 1 under the null. By Ville's inequality, P(E_n ≥ 1/alpha for some n) ≤ alpha: deciding the
first time E_n ≥ 1/alpha is a two-sided level-alpha test at any stopping time, however often the pairs are looked
at, and a run stopped and later extended stays valid. The decision goes to the side that won more discordant pairs.
`PRIOR` (a = 2) was chosen by simulation: it needs the fewest pairs at differences of 0.1 to 0.3 among a in
{0.25, 0.5, 1, 2, 4, 8} (`benchmarks/sequential_savings.py`).

The difference δ = p_B − p_A comes with a confidence sequence that is the same test turned around. With
D = B − A ∈ {−1, 0, 1} for each pair and λ = (2θ − 1) / (1 + δ) for θ ≥ 1/2, (2θ − 1) / (1 − δ) below,

    E_n(δ) = ∫ Π_i (1 + λ (D_i − δ)) dBeta(a, a)(θ)

is a nonnegative martingale of mean 1 whenever each pair's D has mean δ (each factor is ≥ 0 for every D in
[−1, 1] and has mean 1), and E_n(0) is the E_n above (a concordant pair's factor is 1, a discordant pair's 2θ or
2(1 − θ)). The interval at pair n is every δ with E_n(δ) < 1/alpha: by Ville's inequality it holds at every n at
once with probability ≥ 1 − alpha, hence at the stopping time, and it excludes 0 exactly when the test decides, on
the side it decides for. E_n(δ) is convex in δ (each branch is a polynomial with nonnegative coefficients in
1/(1 + δ) or in 1/(1 − δ)), and at most 1 at the observed difference, so the interval is one interval around it;
each bound is found by Newton's method kept inside its bracket, and at 0 the test's own closed form decides which
side of 0 a bound is on. Once the test has decided,
a later pair may move the interval, never back across 0: it is intersected with the interval at the decision.

Pairs with an abstention (a side whose episode is not scored: `error`, `infra_invalid`) never decide anything: they
are counted and reported, and left out of both the test and the interval.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hylo.stats.capped import INTERIM_PRIOR, SHARE, CappedBoundary, capped_boundary
from hylo.stats.futility import BETA, check_min_effect, futility_leads

Decision = Literal["B better", "A better"]
Design = Literal["anytime", "capped"]
DESIGNS: tuple[Design, ...] = ("anytime", "capped")

PRIOR = 2.0
"""The a of the Beta(a, a) mixing distribution over θ, B's chance of winning a discordant pair."""
NEWTON_STEPS = 60
"""The most steps a bound of the interval takes (Newton's, or a halving where Newton's would leave the bracket); it
stops as soon as every bound moves less than 1e-12."""


def log_evalue(b_wins: int, a_wins: int, prior: float = PRIOR) -> float:
    """log E_n after `b_wins` + `a_wins` discordant pairs (0 before any)."""
    n = b_wins + a_wins
    return (
        n * math.log(2.0)
        + math.lgamma(prior + b_wins)
        + math.lgamma(prior + a_wins)
        - math.lgamma(2 * prior + n)
        - (2 * math.lgamma(prior) - math.lgamma(2 * prior))
    )


def log_evalue_table(max_discordant: int, prior: float = PRIOR) -> np.ndarray[Any, np.dtype[np.float64]]:
    """`table[n, k]` = `log_evalue(k, n - k)` for every n ≤ `max_discordant` (−inf where k > n): the same sum,
    its log-gamma terms looked up."""
    j = np.arange(max_discordant + 1)
    single = np.array([math.lgamma(prior + i) for i in j])  # log Γ(a + i)
    double = np.array([math.lgamma(2 * prior + i) for i in j])  # log Γ(2a + i)
    n, k = j[:, None], j[None, :]
    inside = k <= n
    table = np.where(
        inside,
        n * math.log(2.0) + single[k] + single[np.where(inside, n - k, 0)] - double[n]
        - (2 * math.lgamma(prior) - math.lgamma(2 * prior)),
        -np.inf,
    )  # fmt: skip
    return table


@functools.lru_cache(maxsize=64)
def _nodes(count: int, prior: float) -> tuple[np.ndarray[Any, np.dtype[np.float64]], ...]:
    """Gauss–Legendre nodes ν = |2θ − 1| on (0, 1), the log of their weights times the density of ν under Beta(a, a)
    (each half of θ's range carries half of it), and log(1 − ν)."""
    x, w = np.polynomial.legendre.leggauss(count)
    nu = (x + 1) / 2
    log_density = (prior - 1) * (np.log1p(nu) + np.log1p(-nu) - 2 * math.log(2.0)) - (
        2 * math.lgamma(prior) - math.lgamma(2 * prior)
    )
    return nu, np.log(w / 2) + log_density - math.log(2.0), np.log1p(-nu)


def node_count(pairs: int) -> int:
    """Nodes enough for `pairs` pairs: the integrand's peak narrows as 1/√pairs, and 24 + √pairs nodes keep log E
    within 1e-9 of its closed form at δ = 0 from 1 to 40,000 pairs (measured; it is exact up to 40 pairs)."""
    return 24 + math.isqrt(max(pairs, 0))


def _log_evalue_and_slope(
    b: np.ndarray[Any, Any], a: np.ndarray[Any, Any], z: np.ndarray[Any, Any], d: np.ndarray[Any, Any], prior: float
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """log E_n(δ) and its derivative in δ, elementwise (counts b, a, z and δ as arrays of one shape)."""
    b, a, z, d = (np.asarray(v, dtype=np.float64)[..., None] for v in (b, a, z, d))
    nu, log_weight, log_lost = _nodes(node_count(int(np.max(b + a + z, initial=0))), prior)
    up, down = 1 + d, 1 - d
    won, tied = nu * (down / up), nu * (d / up)  # B's bets (θ > 1/2): a pair won by B, a tie
    lost, even = nu * (up / down), nu * (d / down)  # A's bets
    for_b = log_weight + b * np.log1p(won) + a * log_lost + z * np.log1p(-tied)
    for_a = log_weight + b * log_lost + a * np.log1p(lost) + z * np.log1p(even)
    slope_b = -b * (2 * nu / up**2) / (1 + won) - z * (nu / up**2) / (1 - tied)
    slope_a = a * (2 * nu / down**2) / (1 + lost) + z * (nu / down**2) / (1 + even)
    terms = np.concatenate([for_b, for_a], axis=-1)
    top = terms.max(axis=-1, keepdims=True)
    weights = np.exp(terms - top)
    total = weights.sum(axis=-1)
    slope = (weights * np.concatenate([slope_b, slope_a], axis=-1)).sum(axis=-1) / total
    return top[..., 0] + np.log(total), slope


def log_evalue_at(
    b_wins: Any, a_wins: Any, ties: Any, difference: Any, prior: float = PRIOR
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """log E_n(δ) of the test turned around (the module's docstring), elementwise over arrays (or numbers) of the
    counts of pairs won by B, by A, and tied (both or neither succeeded) and of δ in (−1, 1)."""
    b, a, z, d = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (b_wins, a_wins, ties, difference)))
    if np.ndim(difference) == 0:
        return _at_one_difference(b, a, z, float(difference), prior)
    return _log_evalue_and_slope(b, a, z, d, prior)[0]


BLOCK = 16_384
"""Counts taken at once by `_at_one_difference` (a block's terms: BLOCK × twice the nodes)."""


def _at_one_difference(
    b: np.ndarray[Any, Any], a: np.ndarray[Any, Any], z: np.ndarray[Any, Any], d: float, prior: float
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """log E_n(δ) at one δ over many counts (a simulation's every pair): the nodes' log factors once, then each
    block of counts times them."""
    counts = np.stack([b.ravel(), a.ravel(), z.ravel()], axis=1)
    nu, log_weight, log_lost = _nodes(node_count(int(counts.sum(axis=1).max(initial=0))), prior)
    factors = np.array([
        np.concatenate([np.log1p(nu * (1 - d) / (1 + d)), log_lost]),  # a pair won by B: B's bets, then A's
        np.concatenate([log_lost, np.log1p(nu * (1 + d) / (1 - d))]),  # won by A
        np.concatenate([np.log1p(-nu * d / (1 + d)), np.log1p(nu * d / (1 - d))]),  # tied
    ])  # fmt: skip
    weights = np.concatenate([log_weight, log_weight])
    out = np.empty(len(counts))
    for start in range(0, len(counts), BLOCK):
        terms = weights + counts[start : start + BLOCK] @ factors
        top = terms.max(axis=1, keepdims=True)
        out[start : start + BLOCK] = top[:, 0] + np.log(np.exp(terms - top).sum(axis=1))
    return out.reshape(b.shape)


def confidence_interval(
    b_wins: Any, a_wins: Any, ties: Any, *, alpha: float, prior: float = PRIOR
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """(low, high) for p_B − p_A after the pairs counted (elementwise over arrays): every δ with E_n(δ) < 1/alpha.
    [−1, 1] before any pair. 0 is outside it exactly when log E_n(0) (`log_evalue`, the test's own closed form)
    reaches log(1/alpha)."""
    b, a, z = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (b_wins, a_wins, ties)))
    threshold = math.log(1 / alpha)
    n = b + a + z
    observed = (b - a) / np.maximum(n, 1)
    at_zero = np.vectorize(lambda k, m: log_evalue(int(k), int(m), prior), otypes=[np.float64])(b, a)
    zero_out = (at_zero >= threshold) & (n > 0)
    edge = 1 - 1e-12

    def bound(inner: np.ndarray[Any, Any], outer: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The boundary between `inner` (inside the interval) and `outer` (rejected, or the edge of [−1, 1]),
        by Newton's method kept inside the bracket (E_n is convex in δ: one crossing)."""
        at_edge = (np.abs(outer) == edge) & (log_evalue_at(b, a, z, outer, prior) < threshold)  # the bound is ±1
        x = (inner + outer) / 2
        active = np.flatnonzero(~at_edge & (n > 0))  # the bounds still moving
        x_, inner_, outer_ = x.ravel(), inner.ravel().copy(), outer.ravel().copy()
        b_, a_, z_ = b.ravel(), a.ravel(), z.ravel()
        for _ in range(NEWTON_STEPS):
            if not active.size:
                break
            at = x_[active]
            value, slope = _log_evalue_and_slope(b_[active], a_[active], z_[active], at, prior)
            rejected = value >= threshold
            low, high = np.where(rejected, inner_[active], at), np.where(rejected, at, outer_[active])
            inner_[active], outer_[active] = low, high
            with np.errstate(divide="ignore", invalid="ignore"):
                step = at - (value - threshold) / slope
            inside = np.isfinite(step) & ((step - low) * (step - high) <= 0)
            moved = np.where(inside, step, (low + high) / 2)
            x_[active] = moved
            active = active[np.abs(moved - at) >= 1e-12]
        found: np.ndarray[Any, np.dtype[np.float64]] = np.where(at_edge, np.sign(outer), x_.reshape(x.shape))
        return found

    # the side of 0 each bound is on is the test's: a bound past 0 is searched between 0 and the observed difference
    low_outer = np.where(zero_out & (observed > 0), 0.0, -edge)
    low_inner = np.where(zero_out | (observed <= 0), observed, 0.0)
    high_outer = np.where(zero_out & (observed < 0), 0.0, edge)
    high_inner = np.where(zero_out | (observed >= 0), observed, 0.0)
    low, high = bound(low_inner, low_outer), bound(high_inner, high_outer)
    tiny = np.nextafter(0.0, 1.0)
    low = np.where(zero_out & (observed > 0), np.maximum(low, tiny), low)
    high = np.where(zero_out & (observed < 0), np.minimum(high, -tiny), high)
    none = n == 0
    return np.where(none, -1.0, low), np.where(none, 1.0, high)


def check_design(design: str) -> None:
    """A design other than `DESIGNS` is refused naming it."""
    if design not in DESIGNS:
        raise ValueError(f"the design must be one of {', '.join(DESIGNS)}, got {design!r}")


def futility_outcome(min_effect: float) -> str:
    """The futility outcome's words: "no difference ≥ δ"."""
    return f"no difference ≥ {min_effect:g}"


@dataclass
class PairedSequentialTest:
    """The test over the pairs fed to `add`, in key order. `decision` is set by the first pair that decides, and
    stays: later pairs still update the counts and the interval, never the decision.

    `design` "anytime" is the mixture SPRT above, valid at any stopping time and extendable; "capped" rejects on the
    boundary calibrated to `max_pairs` (`hylo.stats.capped`; its final look is the `max_pairs`-th pair fed, an
    abstention included), valid up to that cap only, and stops as soon as no rejection is reachable by the cap
    (`curtailed`). With `min_effect` δ it also stops for futility (`futile`: "no difference ≥ δ",
    `hylo.stats.futility`)."""

    alpha: float = 0.05
    prior: float = PRIOR
    design: Design = "anytime"
    max_pairs: int | None = None  # the cap: the capped design's calibration
    min_effect: float | None = None
    beta: float = BETA
    share: float = SHARE
    interim_prior: float = INTERIM_PRIOR
    pairs: int = 0  # scored pairs
    b_wins: int = 0
    a_wins: int = 0
    both: int = 0  # both succeeded
    neither: int = 0
    abstentions: int = 0  # pairs with an unscored side
    decision: Decision | None = None
    decided_at: int | None = None  # the number of scored pairs when it decided (or stopped for futility)
    futile: bool = False
    curtailed: bool = False
    path: list[float] = field(default_factory=list)  # log E after each scored pair
    lead_path: list[int] = field(default_factory=list)  # B's lead (b_wins − a_wins) after each scored pair
    efficacy_path: list[int | None] = field(default_factory=list)  # the |lead| that decided there (None: none could)
    futility_path: list[float | None] = field(default_factory=list)  # |lead| below which it stopped for futility
    _decided_counts: tuple[int, int, int] | None = field(default=None, init=False)  # B's wins, A's, ties then

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not self.prior > 0.0:
            raise ValueError(f"the prior's a must be > 0, got {self.prior!r}")
        check_design(self.design)
        check_min_effect(self.min_effect)
        if self.design == "capped" and (self.max_pairs is None or self.max_pairs < 1):
            raise ValueError(f"the capped design needs its cap (max_pairs ≥ 1), got {self.max_pairs!r}")

    @functools.cached_property
    def boundary(self) -> CappedBoundary | None:
        """The capped design's boundary (None for anytime)."""
        if self.design != "capped" or self.max_pairs is None:
            return None
        return capped_boundary(self.max_pairs, self.alpha, self.share, self.interim_prior)

    @property
    def threshold(self) -> float:
        """The log e-value at which the anytime test decides: log(1 / alpha)."""
        return math.log(1 / self.alpha)

    @property
    def log_evalue(self) -> float:
        return log_evalue(self.b_wins, self.a_wins, self.prior)

    @property
    def stopped(self) -> bool:
        """Whether the test has stopped: decided, futile or curtailed."""
        return self.decision is not None or self.futile or self.curtailed

    @property
    def outcome(self) -> str | None:
        """The decision, "no difference ≥ δ" when it stopped for futility, or None."""
        if self.decision is not None:
            return self.decision
        return futility_outcome(self.min_effect) if self.futile and self.min_effect is not None else None

    @property
    def stopped_for(self) -> str | None:
        """Why it stopped: "efficacy", "futility", "curtailment" (capped: no rejection reachable by the cap), "cap"
        (every pair allowed is in), or None while it may go on."""
        if self.decision is not None:
            return "efficacy"
        if self.futile:
            return "futility"
        if self.curtailed:
            return "curtailment"
        if self.max_pairs is not None and self.pairs + self.abstentions >= self.max_pairs:
            return "cap"
        return None

    def add(self, a_success: bool | None, b_success: bool | None) -> Decision | None:
        """One pair, in key order (None for a side that abstained); the decision so far."""
        if a_success is None or b_success is None:
            self.abstentions += 1
            if self.design == "capped" and not self.stopped and self._at_cap:
                self._look()  # the final look is the cap's, whichever pair it is
            return self.decision
        self.pairs += 1
        if a_success and not b_success:
            self.a_wins += 1
        elif b_success and not a_success:
            self.b_wins += 1
        elif a_success:
            self.both += 1
        else:
            self.neither += 1
        self.path.append(self.log_evalue)
        self.lead_path.append(self.b_wins - self.a_wins)
        efficacy, futility = self._boundaries()
        self.efficacy_path.append(efficacy)
        self.futility_path.append(futility)
        if not self.stopped:
            self._look()
        return self.decision

    @property
    def _at_cap(self) -> bool:
        return self.max_pairs is not None and self.pairs + self.abstentions >= self.max_pairs

    def _boundaries(self) -> tuple[int | None, float | None]:
        """The |lead| that decides at this pair (None where none can), and the one below which it is futile."""
        m = self.b_wins + self.a_wins
        if self.boundary is None:
            needed = anytime_lead(m, self.threshold, self.prior)
        else:
            needed = int(self.boundary.needed(m, at_cap=self._at_cap))
        u = self._futility_lead(m)
        return (needed if needed <= m else None), (u if math.isfinite(u) and u > 0 else None)

    def _look(self) -> None:
        """Decide, stop for futility or curtail, on the counts so far."""
        lead, m = self.b_wins - self.a_wins, self.b_wins + self.a_wins
        if self.boundary is None:
            decides = self.log_evalue >= self.threshold
        else:
            decides = abs(lead) >= int(self.boundary.needed(m, at_cap=self._at_cap))
        if decides and lead != 0:
            self.decision = "B better" if lead > 0 else "A better"
        elif self.min_effect is not None and self.pairs and abs(lead) < self._futility_lead(m):
            self.futile = True
        elif self.boundary is not None and self.max_pairs is not None and not self._at_cap:
            remaining = self.max_pairs - self.pairs - self.abstentions
            self.curtailed = not bool(self.boundary.reachable(m, lead, remaining))
        if self.decision is not None or self.futile:
            self.decided_at = self.pairs
            self._decided_counts = (self.b_wins, self.a_wins, self.both + self.neither)

    def _futility_lead(self, discordant: int) -> float:
        """u: the test is futile while |lead| < u (−inf before it can be)."""
        if self.min_effect is None:
            return -math.inf
        return float(futility_leads(discordant, self.pairs, min_effect=self.min_effect, alpha=self.alpha,
                                    beta=self.beta))  # fmt: skip

    @property
    def difference(self) -> float | None:
        """p_B − p_A estimated over the scored pairs."""
        return None if not self.pairs else (self.b_wins - self.a_wins) / self.pairs

    @property
    def confidence_sequence(self) -> tuple[float, float]:
        """[low, high] for p_B − p_A, valid at any stopping time ([−1, 1] before any pair): the differences the
        anytime test turned around has not rejected. For the anytime design it excludes 0 exactly when the test has
        decided, on the side it decided for."""
        counts = (self.b_wins, self.a_wins, self.both + self.neither)
        now = self._interval(*counts)
        if self.decision is None or self._decided_counts is None or self._decided_counts == counts:
            return now
        then = self._interval(*self._decided_counts)
        low, high = max(now[0], then[0]), min(now[1], then[1])
        return (low, high) if low <= high else then  # disjoint only once the sequence has missed

    def _interval(self, b_wins: int, a_wins: int, ties: int) -> tuple[float, float]:
        low, high = confidence_interval(b_wins, a_wins, ties, alpha=self.alpha, prior=self.prior)
        return float(low), float(high)

    def to_json(self) -> dict[str, Any]:
        low, high = self.confidence_sequence
        return {
            "decision": self.outcome,
            "pairs_used": self.decided_at if self.decided_at is not None else self.pairs,
            "pairs": self.pairs,
            "difference": self.difference,
            "confidence_sequence": [low, high],
            "confidence_sequence_kind": "test" if self.design == "anytime" else "anytime",
            "flips": {"b_wins": self.b_wins, "a_wins": self.a_wins, "both": self.both, "neither": self.neither},
            "abstentions": self.abstentions,
            "log_evalue": self.log_evalue,
            "threshold": self.threshold,
            "alpha": self.alpha,
        }

    def design_json(self) -> dict[str, Any]:
        """The design's part of the record: design, δ, why it stopped, and B's lead after each pair with the two
        boundaries there."""
        return {
            "design": self.design,
            "min_effect": self.min_effect,
            "stopped_for": self.stopped_for,
            "extendable": self.design == "anytime",
            "lead_path": list(self.lead_path),
            "efficacy_boundary": list(self.efficacy_path),
            "futility_boundary": list(self.futility_path),
        }


def anytime_lead(discordant: int, threshold: float, prior: float = PRIOR) -> int:
    """The anytime test's boundary as a |lead| (B's discordant wins less A's): the smallest ≥ 1 at which log E over
    `discordant` pairs reaches `threshold` (`discordant` + 1 where none does). log E grows with the lead: bisection."""
    low, high = 1 + (discordant + 1) % 2, discordant + 2  # leads of the parity of `discordant`; high: out of reach
    if low > discordant:
        return discordant + 1

    def reaches(lead: int) -> bool:
        return log_evalue((discordant + lead) // 2, (discordant - lead) // 2, prior) >= threshold

    if not reaches(discordant - (discordant - low) % 2):
        return discordant + 1
    while high - low > 2:
        mid = low + 2 * ((high - low) // 4)
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return low if reaches(low) else high


# -- simulation ---------------------------------------------------------------------------------------------------


def pair_probabilities(p_a: float, p_b: float, correlation: float = 0.0) -> tuple[float, float, float, float]:
    """P(neither), P(only A), P(only B), P(both) for success rates `p_a`, `p_b` whose outcomes have the given
    correlation (the phi coefficient); a correlation the two rates cannot have raises ValueError naming it."""
    for name, p in (("p_a", p_a), ("p_b", p_b)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {p!r}")
    if not -1.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must be in [-1, 1], got {correlation!r}")
    both = p_a * p_b + correlation * math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    cells = (1 - p_a - p_b + both, p_a - both, p_b - both, both)
    if min(cells) < -1e-12:
        low = max(0.0, p_a + p_b - 1)
        high = min(p_a, p_b)
        spread = math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b)) or 1.0
        raise ValueError(
            f"success rates {p_a} and {p_b} cannot have correlation {correlation}: it must lie in "
            f"[{(low - p_a * p_b) / spread:.3f}, {(high - p_a * p_b) / spread:.3f}]"
        )
    clipped = tuple(max(0.0, cell) for cell in cells)
    total = sum(clipped)
    return clipped[0] / total, clipped[1] / total, clipped[2] / total, clipped[3] / total


CAP, DECIDED, FUTILE, CURTAILED = 0, 1, 2, 3
"""How a simulated run stopped (`Simulated.stopped`): at the cap undecided, deciding, for futility ("no difference
≥ δ"), or curtailed (capped: no rejection was reachable by the cap any more)."""
BLOCK_CELLS = 4_000_000
"""Pairs `decide` takes at once (runs × pairs), to keep its arrays small."""


@dataclass(frozen=True)
class Simulated:
    """Simulated A/B runs: each run's decision (+1 B better, −1 A better, 0 none), the pairs it used (`max_pairs`
    when it ran to the cap) and how it stopped (`CAP`, `DECIDED`, `FUTILE`, `CURTAILED`)."""

    decisions: np.ndarray[Any, np.dtype[np.int8]]
    pairs_used: np.ndarray[Any, np.dtype[np.int64]]
    stopped: np.ndarray[Any, np.dtype[np.int8]]


def simulate(
    p_a: float,
    p_b: float,
    *,
    correlation: float = 0.0,
    max_pairs: int,
    runs: int,
    alpha: float = 0.05,
    prior: float = PRIOR,
    seed: int = 0,
    design: Design = "anytime",
    min_effect: float | None = None,
    beta: float = BETA,
    share: float = SHARE,
    interim_prior: float = INTERIM_PRIOR,
) -> Simulated:
    """`runs` A/B runs of at most `max_pairs` pairs each, decided as `PairedSequentialTest` decides."""
    probabilities = pair_probabilities(p_a, p_b, correlation)
    rng = np.random.default_rng(seed)
    cells = rng.choice(4, size=(runs, max_pairs), p=probabilities).astype(np.int8)
    return decide(cells, alpha=alpha, prior=prior, design=design, min_effect=min_effect, beta=beta, share=share,
                  interim_prior=interim_prior)  # fmt: skip


def decide(
    cells: np.ndarray[Any, Any],
    *,
    alpha: float = 0.05,
    prior: float = PRIOR,
    design: Design = "anytime",
    min_effect: float | None = None,
    beta: float = BETA,
    share: float = SHARE,
    interim_prior: float = INTERIM_PRIOR,
) -> Simulated:
    """The test's decisions over runs of pairs: `cells[run, i]` is pair i of a run, 0 when neither side succeeded,
    1 only A, 2 only B, 3 both. The capped design's cap is the runs' length."""
    check_design(design)
    check_min_effect(min_effect)
    runs, max_pairs = cells.shape
    boundary = capped_boundary(max_pairs, alpha, share, interim_prior) if design == "capped" else None
    block = max(1, BLOCK_CELLS // max(max_pairs, 1))
    parts = [
        _decide_block(cells[start : start + block], alpha, prior, boundary, min_effect, beta)
        for start in range(0, runs, block)
    ]
    return Simulated(*(np.concatenate([part[i] for part in parts]) for i in range(3)))


def _decide_block(
    cells: np.ndarray[Any, Any],
    alpha: float,
    prior: float,
    boundary: CappedBoundary | None,
    min_effect: float | None,
    beta: float,
) -> tuple[np.ndarray[Any, Any], ...]:
    """`decide` over one block of runs."""
    runs, max_pairs = cells.shape
    b_wins = np.cumsum(cells == 2, axis=1)
    a_wins = np.cumsum(cells == 1, axis=1)
    discordant, lead = b_wins + a_wins, b_wins - a_wins
    pairs = np.arange(1, max_pairs + 1)[None, :]
    if boundary is None:
        decides = (log_evalue_table(max_pairs, prior)[discordant, b_wins] >= math.log(1 / alpha)) & (lead != 0)
    else:
        decides = (np.abs(lead) >= boundary.needed(discordant, at_cap=pairs == max_pairs)) & (lead != 0)
    futile = np.zeros_like(decides)
    if min_effect is not None:
        futile = np.abs(lead) < futility_leads(discordant, pairs, min_effect=min_effect, alpha=alpha, beta=beta)
    curtailed = np.zeros_like(decides)
    if boundary is not None:
        curtailed = ~boundary.reachable(discordant, lead, max_pairs - pairs) & (pairs < max_pairs)
    stops = decides | futile | curtailed
    stopped = stops.any(axis=1)
    first = np.where(stopped, stops.argmax(axis=1), max_pairs - 1)
    rows = np.arange(runs)
    decided = decides[rows, first]
    side = np.sign(lead[rows, first]).astype(np.int8)
    how = np.select([decided, futile[rows, first], curtailed[rows, first]], [DECIDED, FUTILE, CURTAILED], CAP)
    return np.where(decided, side, 0).astype(np.int8), (first + 1).astype(np.int64), how.astype(np.int8)
