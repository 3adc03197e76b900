"""Honest statistics over episode records: success rates with Wilson intervals, abstentions kept in view, and paired
run comparisons with an exact McNemar test.

Nothing here drops an episode silently. `error` and `infra_invalid` abstain from the success rate (they say nothing
about the agent), but they are counted in `status_counts` and they count as failures in the conservative rate, so a
run that "succeeds" by crashing on its hard episodes cannot look better than it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from hylo.core.errors import HyloError
from hylo.core.status import EpisodeStatus
from hylo.envs.gym_ids import short_episode_id


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Unlike the normal (Wald) interval it stays inside [0, 1] and does not collapse to a point at 0/n or n/n, which is
    exactly where small evaluation runs tend to land. `n` (and `successes`) may be an effective sample size, as for
    clustered episodes (`seed_clusters`).
    """
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    z2 = z * z
    p = successes / n
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # The bounds are exactly 0 and 1 at the extremes; say so rather than leave rounding noise.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class EpisodeRecord:
    """One finished episode as the statistics see it.

    `status` is the truth; `success` must agree with it (as in `EpisodeOutcome`). A plain string status (e.g. read
    back from JSON) is converted to `EpisodeStatus`.
    """

    episode_id: str
    task: str
    index: int
    seed: int
    status: EpisodeStatus
    reason: str
    steps: int
    success: bool
    episode_return: float | None = None
    success_signal: bool = True
    base_seed: int | None = None
    """The run's seed this episode ran under (a run of several seeds runs each (task, index) under each)."""

    def __post_init__(self) -> None:
        status = EpisodeStatus(self.status)
        object.__setattr__(self, "status", status)
        if self.success != (status is EpisodeStatus.SUCCESS):
            raise ValueError(f"{self.episode_id}: success={self.success} contradicts status {status.value!r}")


@dataclass(frozen=True)
class Returns:
    """The returns of scored episodes, as moments: how many have one, their sum and their sum of squares."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def __add__(self, other: Returns) -> Returns:
        return Returns(self.n + other.n, self.total + other.total, self.squares + other.squares)

    @classmethod
    def of(cls, values: Iterable[float]) -> Returns:
        finite = [v for v in values if math.isfinite(v)]
        return cls(len(finite), math.fsum(finite), math.fsum(v * v for v in finite))

    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def std(self) -> float | None:
        """The sample standard deviation (n − 1); None below two returns."""
        if self.n < 2:
            return None
        mean = self.total / self.n
        return math.sqrt(max(0.0, (self.squares - self.n * mean * mean) / (self.n - 1)))


@dataclass(frozen=True)
class Tally:
    """Episodes tallied: a count per status, their total steps, the returns of the scored ones, and how many ran on
    an env that has no success signal."""

    counts: Mapping[EpisodeStatus, int]
    steps: int
    returns: Returns = field(default_factory=Returns)
    unsignalled: int = 0

    def __add__(self, other: Tally) -> Tally:
        counts = dict(self.counts)
        for status, count in other.counts.items():
            counts[status] = counts.get(status, 0) + count
        return Tally(
            counts, self.steps + other.steps, self.returns + other.returns, self.unsignalled + other.unsignalled
        )


@dataclass(frozen=True)
class Summary:
    """Aggregate of a set of episodes.

    `success_rate` and `success_ci` are over scored episodes only (success, failure, safety_abort); the abstentions
    (error, infra_invalid) are visible in `status_counts` and pull `conservative_success_rate` down, which treats every
    episode that was run as a trial.
    """

    n: int
    status_counts: dict[str, int]
    scored: int
    successes: int
    success_rate: float | None
    success_ci: tuple[float, float] | None
    conservative_success_rate: float | None
    mean_steps: float | None
    mean_return: float | None = None
    return_std: float | None = None
    success_signal: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "status_counts": dict(self.status_counts),
            "scored": self.scored,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "success_ci": list(self.success_ci) if self.success_ci is not None else None,
            "conservative_success_rate": self.conservative_success_rate,
            "mean_steps": self.mean_steps,
            "mean_return": self.mean_return,
            "return_std": self.return_std,
            "success_signal": self.success_signal,
        }


def summarize(records: Iterable[EpisodeRecord]) -> Summary:
    """Summarise episodes. Every status appears in `status_counts` (zeros included, in `EpisodeStatus` order) so a
    reader sees that abstentions were looked for, not just that none were reported. `mean_steps` is over all
    episodes; `mean_return` and `return_std` over the scored ones (an abstention's return says nothing of the
    agent)."""
    counts = dict.fromkeys(EpisodeStatus, 0)
    steps = unsignalled = 0
    returns: list[float] = []
    for record in records:
        counts[record.status] += 1
        steps += record.steps
        unsignalled += not record.success_signal
        if record.status.scored and record.episode_return is not None:
            returns.append(record.episode_return)
    return summary_of(Tally(counts, steps, Returns.of(returns), unsignalled))


def summary_of(tally: Tally) -> Summary:
    """The `Summary` of tallied episodes (what `summarize` tallies, or an EvalLog counts in SQL). `success_signal`
    is false when episodes ran on an env that showed none and none succeeded: its success rate then measures
    nothing."""
    counts, steps = tally.counts, tally.steps
    status_counts = {status.value: counts.get(status, 0) for status in EpisodeStatus}
    n = sum(status_counts.values())
    scored = sum(counts.get(status, 0) for status in EpisodeStatus if status.scored)
    successes = counts.get(EpisodeStatus.SUCCESS, 0)
    return Summary(
        n=n,
        status_counts=status_counts,
        scored=scored,
        successes=successes,
        success_rate=successes / scored if scored else None,
        success_ci=wilson_interval(successes, scored) if scored else None,
        conservative_success_rate=successes / n if n else None,
        mean_steps=steps / n if n else None,
        mean_return=tally.returns.mean(),
        return_std=tally.returns.std(),
        success_signal=not (tally.unsignalled and not successes),
    )


def summarize_by_task(records: Iterable[EpisodeRecord]) -> dict[str, Summary]:
    """One `Summary` per task, tasks in first-seen order."""
    by_task: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        by_task.setdefault(record.task, []).append(record)
    return {task: summarize(group) for task, group in by_task.items()}


@dataclass(frozen=True)
class SeedClusters:
    """A run of several seeds, its episodes clustered by (task, index): the same start under each seed.

    - `success_ci`: the 95% Wilson interval at the effective sample size n / `design_effect`, the design effect being
      the cluster-robust variance of the success rate over the binomial one, at least 1 (Korn & Graubard 1998,
      "Confidence intervals for proportions with small expected number of positive counts estimated from survey
      data", Survey Methodology): episodes of one cluster that succeed or fail together count as fewer trials.
    - `pass_at_k`: for each k up to the fewest seeds a cluster has, the chance that at least one of k of its episodes
      succeeds, estimated without bias per cluster as 1 − C(n − c, k) / C(n, k) and averaged over the clusters (Chen
      et al. 2021, "Evaluating large language models trained on code").
    - `per_seed`: the success rate under each seed.
    Scored episodes only, as every success rate here."""

    seeds: int
    clusters: int
    design_effect: float
    success_ci: tuple[float, float]
    pass_at_k: dict[int, float]
    per_seed: dict[int, float | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "seeds": self.seeds,
            "clusters": self.clusters,
            "design_effect": self.design_effect,
            "success_ci": list(self.success_ci),
            "pass_at_k": {str(k): rate for k, rate in self.pass_at_k.items()},
            "per_seed": {str(seed): rate for seed, rate in self.per_seed.items()},
        }


def seed_clusters(records: Iterable[EpisodeRecord]) -> SeedClusters | None:
    """The clustered view of a run of several seeds; None for a run of one seed (or nothing scored)."""
    scored = [r for r in records if r.status.scored]
    seeds = {r.base_seed for r in scored if r.base_seed is not None}
    if len(seeds) < 2:
        return None
    clusters: dict[tuple[str, int], list[bool]] = {}
    for r in scored:
        clusters.setdefault((r.task, r.index), []).append(r.success)
    n, successes = len(scored), sum(r.success for r in scored)
    rate = successes / n
    g = len(clusters)
    robust = sum((sum(c) - rate * len(c)) ** 2 for c in clusters.values()) / n**2 * (g / (g - 1) if g > 1 else 1.0)
    binomial = rate * (1 - rate) / n
    design_effect = max(1.0, robust / binomial) if binomial > 0 else 1.0
    effective = n / design_effect
    fewest = min(len(c) for c in clusters.values())
    pass_at_k = {
        k: sum(1 - math.comb(len(c) - sum(c), k) / math.comb(len(c), k) for c in clusters.values()) / g
        for k in range(1, fewest + 1)
    }
    per_seed: dict[int, float | None] = {}
    for seed in sorted(seeds):
        under = [r.success for r in scored if r.base_seed == seed]
        per_seed[seed] = sum(under) / len(under) if under else None
    return SeedClusters(len(seeds), g, design_effect, wilson_interval(rate * effective, effective), pass_at_k, per_seed)


def summary_json(
    records: Sequence[EpisodeRecord] | None = None, *, tallies: Mapping[str, Tally] | None = None
) -> dict[str, Any]:
    """The whole run's `Summary` as JSON, with `per_task` (one summary per task, in first-seen order): what
    `hylo runs show --json` prints and what the API answers for a run. From `records`, or from `tallies` (task →
    count per status, total steps and returns, as `EvalLog.tallies` counts them without reading every row)."""
    if tallies is None:
        per_task = summarize_by_task(records or ())
        overall = summarize(records or ())
    else:
        per_task = {task: summary_of(tally) for task, tally in tallies.items()}
        overall = summary_of(sum(tallies.values(), Tally({}, 0)))
    return {**overall.to_json(), "per_task": {task: s.to_json() for task, s in per_task.items()}}


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs `b` vs `c` against p = 0.5.

    Exact because evaluation runs are small and the chi-squared approximation is poor with few discordant pairs.
    Computed with integers, so it is exact up to the final division.
    """
    if b < 0 or c < 0:
        raise ValueError(f"counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    term = tail = 1  # C(n, 0)
    for i in range(min(b, c)):
        term = term * (n - i) // (i + 1)  # C(n, i + 1), exact
        tail += term
    return min(1.0, 2 * tail / (1 << n))


def paired_difference_interval(
    both: int, a_only: int, b_only: int, neither: int, confidence: float = 0.95
) -> tuple[float, float]:
    """The interval for B's success rate minus A's over paired episodes: Newcombe's (1998) square-and-add interval
    for paired proportions (his method 10), from each side's Wilson interval and the pairs' phi correlation.

    A fixed-size interval, for the pairs a run has (the counterpart of McNemar's exact test, not of the sequential
    test's anytime interval): it holds 0 roughly where McNemar's p is above 1 - `confidence`.
    """
    counts = {"both": both, "a_only": a_only, "b_only": b_only, "neither": neither}
    negative = {name: count for name, count in counts.items() if count < 0}
    if negative:
        raise ValueError(f"pair counts must be non-negative, got {negative}")
    n = both + a_only + b_only + neither
    if n == 0:
        raise ValueError("no pairs: an interval needs at least one pair")
    rate_a, rate_b = (both + a_only) / n, (both + b_only) / n
    low_a, high_a = wilson_interval(both + a_only, n, confidence)
    low_b, high_b = wilson_interval(both + b_only, n, confidence)
    phi = _corrected_phi(both, a_only, b_only, neither)
    difference = rate_b - rate_a
    below = math.sqrt(
        max(0.0, (rate_b - low_b) ** 2 - 2 * phi * (rate_b - low_b) * (high_a - rate_a) + (high_a - rate_a) ** 2)
    )
    above = math.sqrt(
        max(0.0, (high_b - rate_b) ** 2 - 2 * phi * (high_b - rate_b) * (rate_a - low_a) + (rate_a - low_a) ** 2)
    )
    return max(-1.0, difference - below), min(1.0, difference + above)


def _corrected_phi(both: int, a_only: int, b_only: int, neither: int) -> float:
    """The pairs' phi coefficient with Newcombe's continuity correction (a positive cross-product shrunk by n/2, not
    below 0); 0 where a margin is empty."""
    n = both + a_only + b_only + neither
    margins = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    if margins == 0:
        return 0.0
    cross = both * neither - a_only * b_only
    corrected = max(0.0, cross - n / 2) if cross > 0 else float(cross)
    return corrected / math.sqrt(margins)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of several p-values (Holm 1979, "A simple sequentially rejective multiple test
    procedure", Scand. J. Statist.): rejecting the hypotheses whose adjusted p-value is ≤ alpha controls the chance
    of any false rejection among them at alpha, whatever their dependence. In the input's order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def pairing_correlation(both: int, a_only: int, b_only: int, neither: int) -> tuple[float | None, str | None]:
    """The correlation of A's and B's success over the pairs both scored (the phi coefficient of the 2 × 2 table,
    the Pearson correlation of the two success indicators), which decides how much pairing saves (`hylo plan
    --correlation`); None with the reason when a side's outcome never varies (or nothing is paired), which leaves it
    undefined."""
    a_won, a_lost = both + a_only, b_only + neither
    b_won, b_lost = both + b_only, a_only + neither
    if not a_won + a_lost:
        return None, "undefined: no pair scored in both runs"
    constant = [
        f"{side} {'succeeded' if lost == 0 else 'failed'} on every pair"
        for side, won, lost in (("A", a_won, a_lost), ("B", b_won, b_lost))
        if won == 0 or lost == 0
    ]
    if constant:
        return None, f"undefined: {' and '.join(constant)} (it needs both outcomes on each side)"
    return (both * neither - a_only * b_only) / math.sqrt(a_won * a_lost * b_won * b_lost), None


def correlation_line(c: Comparison) -> str:
    """The pairing correlation as `hylo compare` prints it, with the `hylo plan` flag that takes it."""
    correlation, note = pairing_correlation(c.both_success, c.a_only, c.b_only, c.neither)
    if correlation is None:
        return f"pairing correlation: {note}"
    return (
        f"pairing correlation (phi of A's and B's outcomes over the {c.n_pairs} pairs): {correlation:+.3f}; "
        f"hylo plan --correlation {correlation:.2f} plans a comparison of these two with it"
    )


@dataclass(frozen=True)
class TaskComparison:
    """One task's part of a paired comparison: its scored pairs, their rates, McNemar's exact p-value, and that
    p-value adjusted by Holm's method over every task of the comparison."""

    n_pairs: int
    both_success: int
    a_only: int
    b_only: int
    neither: int
    p_value: float
    p_holm: float

    @property
    def rate_a(self) -> float | None:
        return (self.both_success + self.a_only) / self.n_pairs if self.n_pairs else None

    @property
    def rate_b(self) -> float | None:
        return (self.both_success + self.b_only) / self.n_pairs if self.n_pairs else None

    @property
    def difference(self) -> float | None:
        return (self.b_only - self.a_only) / self.n_pairs if self.n_pairs else None

    def to_json(self) -> dict[str, Any]:
        return {**_pairs_json(self), "p_holm": self.p_holm}


def _pairs_json(c: TaskComparison | Comparison) -> dict[str, Any]:
    """What a comparison and each task's part of it both report: the pairs, their split, rates, McNemar's p and the
    pairing correlation (with why it is undefined, when it is)."""
    correlation, note = pairing_correlation(c.both_success, c.a_only, c.b_only, c.neither)
    return {
        "n_pairs": c.n_pairs,
        "both_success": c.both_success,
        "a_only": c.a_only,
        "b_only": c.b_only,
        "neither": c.neither,
        "rate_a": c.rate_a,
        "rate_b": c.rate_b,
        "difference": c.difference,
        "p_value": c.p_value,
        "correlation": correlation,
        "correlation_note": note,
    }


@dataclass(frozen=True)
class Flip:
    """A paired episode that succeeded in one run and not in the other."""

    episode_id: str
    task: str
    status_a: EpisodeStatus
    status_b: EpisodeStatus

    def to_json(self) -> dict[str, str]:
        return {
            "episode_id": self.episode_id,
            "task": self.task,
            "status_a": self.status_a.value,
            "status_b": self.status_b.value,
        }


class NoPairs(HyloError, ValueError):
    """Two runs without an episode in common (another benchmark, split, seed or task set): there is nothing to pair,
    and a comparison would read as "no difference" (p = 1) where nothing was compared."""

    def __init__(self, n_a: int, n_b: int) -> None:
        super().__init__(
            f"runs a ({n_a} episodes) and b ({n_b} episodes) share no episode; compare runs of the same benchmark, "
            "split, seed and tasks"
        )
        self.n_a = n_a
        self.n_b = n_b


@dataclass(frozen=True)
class Comparison:
    """Paired comparison of run `a` against run `b` (same episode ids, e.g. same tasks and seeds).

    Only episodes present in both runs and scored in both enter the test; unpaired episodes and pairs where either side
    abstained are counted, not hidden. `paired` episodes are in both runs (`n_pairs` of them scored in both, the other
    `abstained`); `difference` is `rate_b - rate_a` (positive: `b` is better).
    """

    n_pairs: int
    only_in_a: int
    only_in_b: int
    abstained: int
    both_success: int
    a_only: int
    b_only: int
    neither: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    p_value: float
    flips: list[Flip] = field(default_factory=list)
    per_task: dict[str, TaskComparison] = field(default_factory=dict)

    @property
    def paired(self) -> int:
        """Episodes in both runs, scored or not."""
        return self.n_pairs + self.abstained

    @property
    def n_a(self) -> int:
        """Episodes in run `a`."""
        return self.paired + self.only_in_a

    @property
    def n_b(self) -> int:
        """Episodes in run `b`."""
        return self.paired + self.only_in_b

    @property
    def correlation(self) -> float | None:
        """The pairing correlation (`pairing_correlation`): None where it is undefined."""
        return pairing_correlation(self.both_success, self.a_only, self.b_only, self.neither)[0]

    @property
    def partial(self) -> bool:
        """Whether either run has episodes the other lacks (the test covers only the paired ones)."""
        return bool(self.only_in_a or self.only_in_b)

    def to_json(self) -> dict[str, Any]:
        return {
            **_pairs_json(self),
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "abstained": self.abstained,
            "flips": [flip.to_json() for flip in self.flips],
            "paired": self.paired,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "per_task": {task: part.to_json() for task, part in self.per_task.items()},
        }


def _by_id(records: Sequence[EpisodeRecord], run: str) -> dict[str, EpisodeRecord]:
    """The records by episode id; a gym episode logged under the long form of its id by its short one, so that a run
    logged before gym ids were short pairs with a run logged since."""
    out: dict[str, EpisodeRecord] = {}
    for record in records:
        episode_id = short_episode_id(record.episode_id, record.task)
        if episode_id in out:
            raise ValueError(f"episode id {record.episode_id!r} appears more than once in run {run}")
        out[episode_id] = record
    return out


def compare_runs(a: Sequence[EpisodeRecord], b: Sequence[EpisodeRecord]) -> Comparison:
    """Pair two runs by `episode_id` and test whether their success rates differ.

    Pairing removes the per-episode difficulty from the comparison: only the discordant pairs (`a_only`, `b_only`)
    carry information, which is what McNemar's test uses. A duplicate id within a run, or an id whose task differs
    between the runs, raises `ValueError` since the pairing would be meaningless; runs without an episode in common
    raise `NoPairs` (a `ValueError`), since there is nothing to test.
    """
    by_a = _by_id(a, "a")
    by_b = _by_id(b, "b")
    if by_a.keys().isdisjoint(by_b):
        raise NoPairs(len(by_a), len(by_b))
    abstained = 0
    cells: dict[str, list[int]] = {}  # task → [both, only A, only B, neither]
    flips: list[Flip] = []
    for episode_id, ra in by_a.items():
        rb = by_b.get(episode_id)
        if rb is None:
            continue
        if ra.task != rb.task:
            raise ValueError(f"episode id {episode_id!r} is task {ra.task!r} in run a but {rb.task!r} in run b")
        if not (ra.status.scored and rb.status.scored):
            abstained += 1
            continue
        sa = ra.status is EpisodeStatus.SUCCESS
        sb = rb.status is EpisodeStatus.SUCCESS
        cells.setdefault(ra.task, [0, 0, 0, 0])[0 if sa and sb else 1 if sa else 2 if sb else 3] += 1
        if sa != sb:
            flips.append(Flip(episode_id, ra.task, ra.status, rb.status))
    flips.sort(key=lambda flip: (flip.task, flip.episode_id))
    both_success, a_only, b_only, neither = (sum(task[i] for task in cells.values()) for i in range(4))
    n_pairs = both_success + a_only + b_only + neither
    tasks = sorted(cells)
    p_values = [mcnemar_exact(cells[task][1], cells[task][2]) for task in tasks]
    per_task = {
        task: TaskComparison(sum(c), both_success=c[0], a_only=c[1], b_only=c[2], neither=c[3], p_value=p, p_holm=h)
        for task, c, p, h in zip(tasks, (cells[task] for task in tasks), p_values, holm(p_values), strict=True)
    }
    common = sum(1 for episode_id in by_a if episode_id in by_b)
    rate_a = (both_success + a_only) / n_pairs if n_pairs else None
    rate_b = (both_success + b_only) / n_pairs if n_pairs else None
    return Comparison(
        n_pairs=n_pairs,
        only_in_a=len(by_a) - common,
        only_in_b=len(by_b) - common,
        abstained=abstained,
        both_success=both_success,
        a_only=a_only,
        b_only=b_only,
        neither=neither,
        rate_a=rate_a,
        rate_b=rate_b,
        difference=rate_b - rate_a if rate_a is not None and rate_b is not None else None,
        p_value=mcnemar_exact(a_only, b_only),
        flips=flips,
        per_task=per_task,
    )
