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

The difference p_B − p_A comes with a confidence sequence, an interval that holds at every n at once with
probability ≥ 1 − alpha, hence at the stopping time: the predictable plug-in empirical-Bernstein confidence sequence
of Waudby-Smith & Ramdas (2024, "Estimating means of bounded random variables by betting", JRSSB, Theorem 2) for the
mean of X = (D + 1) / 2 ∈ [0, 1], D = B − A ∈ {−1, 0, 1} for each pair, intersected over time. It is a second,
separate guarantee: at the moment the test decides, the interval may still (rarely) include 0.

Pairs with an abstention (a side whose episode is not scored: `error`, `infra_invalid`) never decide anything: they
are counted and reported, and left out of both the test and the interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Decision = Literal["B better", "A better"]

PRIOR = 2.0
"""The a of the Beta(a, a) mixing distribution over θ, B's chance of winning a discordant pair."""
BET_CAP = 0.5
"""The largest bet of the confidence sequence (Waudby-Smith & Ramdas's truncation c)."""


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


@dataclass
class ConfidenceSequence:
    """The betting confidence sequence for the mean of values in [0, 1], updated one value at a time."""

    alpha: float
    n: int = 0
    low: float = 0.0
    high: float = 1.0
    _sum: float = 0.0  # Σ x
    _squares: float = 0.0  # Σ (x_i − mean_i)², mean_i the regularised mean after x_i
    _bets: float = 0.0  # Σ λ
    _weighted: float = 0.0  # Σ λ x
    _penalty: float = 0.0  # Σ v ψ_E(λ)

    def update(self, x: float) -> None:
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"a confidence sequence value must be in [0, 1], got {x!r}")
        n = self.n + 1
        mean_before = (0.5 + self._sum) / n  # the regularised mean of the first n − 1 values
        variance_before = (0.25 + self._squares) / n
        bet = min(math.sqrt(2 * math.log(2 / self.alpha) / (variance_before * n * math.log(1 + n))), BET_CAP)
        self._sum += x
        self._squares += (x - (0.5 + self._sum) / (n + 1)) ** 2
        self._bets += bet
        self._weighted += bet * x
        self._penalty += (x - mean_before) ** 2 * (-math.log(1 - bet) - bet)  # v ψ_E(λ): 4(x − μ)² · (…)/4
        centre = self._weighted / self._bets
        margin = (math.log(2 / self.alpha) + self._penalty) / self._bets
        self.n = n
        self.low = max(self.low, centre - margin)  # intersected over time
        self.high = min(self.high, centre + margin)


@dataclass
class PairedSequentialTest:
    """The test over the pairs fed to `add`, in key order. `decision` is set by the first pair that decides, and
    stays: later pairs still update the counts and the interval, never the decision."""

    alpha: float = 0.05
    prior: float = PRIOR
    pairs: int = 0  # scored pairs
    b_wins: int = 0
    a_wins: int = 0
    both: int = 0  # both succeeded
    neither: int = 0
    abstentions: int = 0  # pairs with an unscored side
    decision: Decision | None = None
    decided_at: int | None = None  # the number of scored pairs when it decided
    path: list[float] = field(default_factory=list)  # log E after each scored pair
    _cs: ConfidenceSequence = field(init=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not self.prior > 0.0:
            raise ValueError(f"the prior's a must be > 0, got {self.prior!r}")
        self._cs = ConfidenceSequence(self.alpha)

    @property
    def threshold(self) -> float:
        """The log e-value at which the test decides: log(1 / alpha)."""
        return math.log(1 / self.alpha)

    @property
    def log_evalue(self) -> float:
        return log_evalue(self.b_wins, self.a_wins, self.prior)

    def add(self, a_success: bool | None, b_success: bool | None) -> Decision | None:
        """One pair, in key order (None for a side that abstained); the decision so far."""
        if a_success is None or b_success is None:
            self.abstentions += 1
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
        self._cs.update((int(b_success) - int(a_success) + 1) / 2)
        log_e = self.log_evalue
        self.path.append(log_e)
        if self.decision is None and log_e >= self.threshold and self.b_wins != self.a_wins:
            self.decision = "B better" if self.b_wins > self.a_wins else "A better"
            self.decided_at = self.pairs
        return self.decision

    @property
    def difference(self) -> float | None:
        """p_B − p_A estimated over the scored pairs."""
        return None if not self.pairs else (self.b_wins - self.a_wins) / self.pairs

    @property
    def confidence_sequence(self) -> tuple[float, float]:
        """[low, high] for p_B − p_A, valid at any stopping time ([−1, 1] before any pair)."""
        return 2 * self._cs.low - 1, 2 * self._cs.high - 1

    def to_json(self) -> dict[str, Any]:
        low, high = self.confidence_sequence
        return {
            "decision": self.decision,
            "pairs_used": self.decided_at if self.decided_at is not None else self.pairs,
            "pairs": self.pairs,
            "difference": self.difference,
            "confidence_sequence": [low, high],
            "flips": {"b_wins": self.b_wins, "a_wins": self.a_wins, "both": self.both, "neither": self.neither},
            "abstentions": self.abstentions,
            "log_evalue": self.log_evalue,
            "threshold": self.threshold,
            "alpha": self.alpha,
        }


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


@dataclass(frozen=True)
class Simulated:
    """Simulated A/B runs: each run's decision (+1 B better, −1 A better, 0 none by `max_pairs`) and the pairs it
    used (`max_pairs` when it did not decide)."""

    decisions: np.ndarray[Any, np.dtype[np.int8]]
    pairs_used: np.ndarray[Any, np.dtype[np.int64]]


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
) -> Simulated:
    """`runs` A/B runs of at most `max_pairs` pairs each, decided as `PairedSequentialTest` decides."""
    probabilities = pair_probabilities(p_a, p_b, correlation)
    rng = np.random.default_rng(seed)
    return decide(rng.choice(4, size=(runs, max_pairs), p=probabilities), alpha=alpha, prior=prior)


def decide(cells: np.ndarray[Any, Any], *, alpha: float = 0.05, prior: float = PRIOR) -> Simulated:
    """The test's decisions over runs of pairs: `cells[run, i]` is pair i of a run, 0 when neither side succeeded,
    1 only A, 2 only B, 3 both."""
    runs, max_pairs = cells.shape
    b_wins = np.cumsum(cells == 2, axis=1)
    a_wins = np.cumsum(cells == 1, axis=1)
    log_e = log_evalue_table(max_pairs, prior)[b_wins + a_wins, b_wins]
    decides = (log_e >= math.log(1 / alpha)) & (b_wins != a_wins)
    decided = decides.any(axis=1)
    first = np.where(decided, decides.argmax(axis=1), max_pairs - 1)
    rows = np.arange(runs)
    side = np.sign(b_wins[rows, first] - a_wins[rows, first]).astype(np.int8)
    return Simulated(np.where(decided, side, 0).astype(np.int8), (first + 1).astype(np.int64))
