"""The capped design of the sequential paired A/B test: a boundary calibrated exactly to a cap of N pairs, so that
it spends all of alpha by the cap instead of the part an anytime-valid test spends.

Under McNemar's null, whether each pair is discordant is independent of who wins it, and B wins each discordant pair
with probability 1/2. Conditional on which pairs are discordant, B's lead (its discordant wins less A's) is a
fair-coin walk over the discordant pairs. The boundary depends only on the discordant count m:

- before the cap (pairs 1 to N − 1) the test rejects at m when |lead| ≥ c_m, the interim boundary. Its shape is the
  mixture SPRT's (`hylo.stats.sequential.log_evalue`) at a threshold chosen so that the fair-coin walk crosses it
  within N discordant pairs with probability at most `SHARE` · alpha (computed exactly, by dynamic programming);
- at the cap (pair N, D discordant pairs seen) it also rejects when |lead| ≥ f_D, the final critical value: the
  smallest with P(the walk crosses c within D) + P(|lead_D| ≥ f_D, not crossed within D) ≤ alpha, by the same
  dynamic programming, one value for every D ≤ N.

Rejecting by the cap is then the event {the walk crosses c within D} ∪ {|lead_D| ≥ f_D}, whose probability given the
discordant pattern is at most alpha for every D: the test is level alpha whatever the discordance rate (however
correlated A and B are), and stopping earlier, with or without a rejection, only removes rejections from that event.
It is not valid past the cap: a capped comparison cannot be extended.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

SHARE = 0.95
"""γ: the share of alpha the interim boundary may spend within N discordant pairs (the rest is the final look's,
at the D ≤ N discordant pairs a comparison actually reaches by the cap, where the interim boundary has spent less).
Chosen by simulation with `INTERIM_PRIOR`: docs/statistics.md gives the grid and the mean pairs of each."""
INTERIM_PRIOR = 4.0
"""The a of the mixture SPRT whose boundary shapes the interim one (the anytime test's is 2): chosen with `SHARE`."""
CALIBRATION_STEPS = 30
"""Bisection steps on the interim boundary's log threshold (each an exact DP over N discordant pairs)."""
IntArray = np.ndarray[Any, np.dtype[np.int64]]
FloatArray = np.ndarray[Any, np.dtype[np.float64]]


@functools.lru_cache(maxsize=8)
def _mixture_table(max_discordant: int, prior: float, top: float) -> FloatArray:
    """`table[m, l]` = the mixture SPRT's log E over m discordant pairs with |lead| l (−inf where no split gives
    it), for l up to the lead that reaches `top` at m = `max_discordant` (no boundary asked for needs more)."""
    j = np.arange(max_discordant + 1)
    single = np.array([math.lgamma(prior + i) for i in j])
    double = np.array([math.lgamma(2 * prior + i) for i in j])
    constant = 2 * math.lgamma(prior) - math.lgamma(2 * prior)

    def log_e(m: Any, lead: Any) -> Any:
        k = (m + lead) // 2
        return m * math.log(2.0) + single[k] + single[m - k] - double[m] - constant

    n = max_discordant
    ends = np.arange(n % 2, n + 1, 2)
    reaching = np.flatnonzero(log_e(n, ends) >= top)
    width = min(n, int(ends[reaching[0]]) + 2 if reaching.size else n)
    m, lead = j[:, None], np.arange(width + 1)[None, :]
    valid = (lead <= m) & ((m - lead) % 2 == 0)
    table: FloatArray = np.where(valid, log_e(m, np.where(valid, lead, m)), -np.inf)
    return table


def mixture_leads(max_discordant: int, threshold: float, prior: float, top: float | None = None) -> IntArray:
    """c_m for m = 0..`max_discordant`: the smallest |lead| ≥ 1 at which the mixture SPRT's log E over m discordant
    pairs reaches `threshold` (m + 1, out of reach, where none does); `top` ≥ `threshold` sizes the table it reads."""
    table = _mixture_table(max_discordant, prior, max(threshold, top if top is not None else threshold))
    reached = table[:, 1:] >= threshold
    j = np.arange(max_discordant + 1)
    leads: IntArray = np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, j + 1).astype(np.int64)
    return leads


def _walk(interim: IntArray, *, keep_alive: bool = True) -> Iterator[tuple[int, float, FloatArray | None]]:
    """The fair-coin walk over m = 1..N steps absorbed at |lead| ≥ `interim[m]`, step by step: m, the probability it
    has crossed within m steps, and (`keep_alive`) the probability by |lead| s ≤ N that it has not and stands at s.
    Exact up to floating point; m = 0 first."""
    n = len(interim) - 1
    width = int(min(n + 1, interim.max(initial=1)))  # the walk lives at |lead| < c_m ≤ width: absorbed beyond
    walk = np.zeros(2 * width + 3)  # lead from −(width + 1) to width + 1
    centre = width + 1
    walk[centre] = 1.0
    leads = np.abs(np.arange(2 * width + 3) - centre)
    start = np.zeros(n + 1)
    start[0] = 1.0
    yield 0, 0.0, start if keep_alive else None
    total = 0.0
    for m in range(1, n + 1):
        walk[1:-1] = 0.5 * (walk[:-2] + walk[2:])
        walk[0] = walk[-1] = 0.0
        out = leads >= interim[m]
        total += float(walk[out].sum())
        walk[out] = 0.0
        if keep_alive:
            alive = np.zeros(n + 1)
            by_lead = np.bincount(leads, weights=walk)
            alive[: min(n + 1, len(by_lead))] = by_lead[: n + 1]
            yield m, total, alive
        else:
            yield m, total, None


def interim_spent(interim: IntArray) -> float:
    """The probability that the fair-coin walk crosses the interim boundary within N steps."""
    return [crossed for _, crossed, _ in _walk(interim, keep_alive=False)][-1]


def final_leads(interim: IntArray, alpha: float) -> tuple[IntArray, FloatArray]:
    """f_D for each D ≤ N: the smallest |lead| whose rejection at the cap, with the interim crossings within D, keeps
    the probability at most alpha (`interim[D]` where nothing more can be spent); and P(reject by the cap | D)."""
    n = len(interim) - 1
    final = np.empty(n + 1, dtype=np.int64)
    rejected = np.empty(n + 1)
    for d, crossed, alive in _walk(interim):
        assert alive is not None  # kept: keep_alive
        tail = np.cumsum(alive[::-1])[::-1]  # tail[s] = P(|lead_D| ≥ s, not crossed)
        fits = np.flatnonzero((tail <= alpha * (1 + 1e-12) - crossed) & (np.arange(n + 1) >= 1))
        final[d] = min(int(fits[0]), int(interim[d])) if fits.size else int(interim[d])
        rejected[d] = crossed + (float(tail[final[d]]) if final[d] <= n else 0.0)
    return final, rejected


def rejection_probabilities(interim: IntArray, final: IntArray) -> FloatArray:
    """P(reject by the cap | D discordant pairs by then) for each D ≤ N under the null, for any interim and final
    boundaries: the interim crossings within D plus the final rejections of the walks that had not crossed."""
    n = len(interim) - 1
    out = np.empty(n + 1)
    for d, crossed, alive in _walk(interim):
        assert alive is not None  # kept: keep_alive
        out[d] = crossed + (float(alive[final[d] :].sum()) if final[d] <= n else 0.0)
    return out


@dataclass(frozen=True)
class CappedBoundary:
    """The capped design's boundary for a cap of `max_pairs` pairs at `alpha`: `interim[m]` the |lead| that rejects
    before the cap at m discordant pairs, `final[D]` the one that also rejects at the cap with D discordant pairs
    (m, D ≤ max_pairs), `interim_spent` the interim crossing probability within `max_pairs` discordant pairs, and
    `threshold` the log threshold of the mixture SPRT that gives the interim boundary its shape."""

    max_pairs: int
    alpha: float
    interim: IntArray
    final: IntArray
    interim_spent: float
    threshold: float

    def needed(self, discordant: Any, *, at_cap: Any) -> IntArray:
        """The |lead| that rejects with `discordant` pairs, at the cap or before it (elementwise)."""
        m = np.asarray(discordant)
        out: IntArray = np.where(at_cap, np.minimum(self.interim[m], self.final[m]), self.interim[m])
        return out

    @functools.cached_property
    def _reach(self) -> list[IntArray]:
        """A sparse table of min over D of (min(c_D, f_D) − D): `_reach[j][D]` over D..D + 2^j − 1."""
        levels = [np.minimum(self.interim, self.final).astype(np.int64) - np.arange(self.max_pairs + 1)]
        width = 1
        while 2 * width <= self.max_pairs + 1:
            previous = levels[-1]
            levels.append(np.minimum(previous[:-width], previous[width:]))
            width *= 2
        return levels

    def reachable(self, discordant: Any, lead: Any, remaining: Any) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Whether a rejection is still possible by the cap with `remaining` pairs to go (elementwise): some D in
        [m, m + remaining] with |lead| + (D − m) ≥ min(c_D, f_D), every remaining pair going to the leader."""
        m = np.asarray(discordant, dtype=np.int64)
        last = np.minimum(m + np.asarray(remaining, dtype=np.int64), self.max_pairs)
        span = last - m + 1
        level = np.floor(np.log2(np.maximum(span, 1))).astype(np.int64)
        best = np.full(np.shape(m), np.iinfo(np.int64).max, dtype=np.int64)
        for j, table in enumerate(self._reach):
            here = level == j
            if here.any():
                width = 1 << j
                lows, highs = m[here], last[here] - width + 1
                best[here] = np.minimum(table[lows], table[highs])
        out: np.ndarray[Any, np.dtype[np.bool_]] = np.abs(np.asarray(lead)) - m >= best
        return out


@functools.lru_cache(maxsize=32)
def capped_boundary(max_pairs: int, alpha: float, share: float = SHARE, prior: float = INTERIM_PRIOR) -> CappedBoundary:
    """The boundary for a cap of `max_pairs` pairs: the interim mixture boundary's threshold bisected so that it
    spends at most `share` · alpha within `max_pairs` discordant pairs, then the final look spending the rest."""
    if max_pairs < 1:
        raise ValueError(f"the capped design needs a cap of at least 1 pair, got {max_pairs}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not 0.0 <= share < 1.0:
        raise ValueError(f"the interim share of alpha must be in [0, 1), got {share!r}")
    top = math.log(1 / alpha) + 40.0  # log E ≥ 0 rejects at the first pair; 40 more than Ville's: never
    low, high = 0.0, top
    for _ in range(CALIBRATION_STEPS):
        mid = (low + high) / 2
        spent = interim_spent(mixture_leads(max_pairs, mid, prior, top))
        low, high = (mid, high) if spent > share * alpha else (low, mid)
    interim = mixture_leads(max_pairs, high, prior, top)
    final, _ = final_leads(interim, alpha)
    return CappedBoundary(max_pairs, alpha, interim, final, interim_spent(interim), high)
