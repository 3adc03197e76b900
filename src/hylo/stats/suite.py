"""Suite-level aggregates: a run over several tasks summed up over its tasks, and two such runs compared, each figure
with a stratified bootstrap interval.

The figures and their definitions are those of Agarwal, Schwarzer, Castro, Courville & Bellemare 2021, "Deep
reinforcement learning at the edge of the statistical precipice" (NeurIPS), as their library rliable computes them
(`rliable/metrics.py`: `aggregate_mean`, `aggregate_iqm`, `probability_of_improvement`; `rliable/library.py`:
`StratifiedBootstrap`, percentile intervals):

- the mean over tasks of the per-task success rates;
- the interquartile mean (IQM): the 25 % trimmed mean of the score matrix (seeds × tasks) flattened, a score being
  the success rate of one task under one seed (with one seed, of one task);
- the probability of improvement P(B > A): the mean over tasks of the Mann–Whitney probability
  P(X_B > X_A) + ½ P(X_B = X_A) of a task, over the replication units (see `improvement`).

The bootstrap is stratified by task: each task's replication units are resampled with replacement within the task,
the figure recomputed, `resamples` times from a numpy Generator of a fixed seed (so the interval is deterministic);
the interval is the percentile interval of the resampled figures. A replication unit is an episode in a run of one
seed, and a (task, index) cluster (the episodes of one index under every seed, resampled together) in a run of
several seeds, as `hylo.stats.success.seed_clusters` clusters them.

Abstentions (error, infra_invalid) are not scored: a task without a scored episode is left out and named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hylo.core.status import EpisodeStatus
from hylo.stats.success import EpisodeRecord, Tally

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

CITATION = 'Agarwal et al. 2021, "Deep reinforcement learning at the edge of the statistical precipice", NeurIPS'
MAX_RESAMPLES = 100_000
"""The most bootstrap resamples a figure may ask for."""


@dataclass(frozen=True)
class Bootstrap:
    """How the intervals are drawn: `resamples` stratified resamples from a numpy Generator seeded with `seed`, and
    the percentile interval of coverage `confidence`."""

    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.resamples <= MAX_RESAMPLES:
            raise ValueError(f"resamples must be in [1, {MAX_RESAMPLES}], got {self.resamples}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")

    def interval(self, samples: Floats) -> tuple[float, float]:
        """The percentile interval of the resampled figures (rliable's default method)."""
        tail = (1.0 - self.confidence) / 2.0 * 100.0
        low, high = np.percentile(samples, [tail, 100.0 - tail])
        return float(low), float(high)

    def to_json(self) -> dict[str, Any]:
        return {"resamples": self.resamples, "seed": self.seed, "confidence": self.confidence}


@dataclass(frozen=True)
class TaskUnits:
    """A task's replication units, alike ones grouped: `successes[p, s]` and `scored[p, s]` are the successes and
    scored episodes of a unit of kind p under seed s, and `counts[p]` how many units are of that kind. Resampling the
    n units with replacement draws each kind a multinomial(n, counts / n) number of times, which is how `resample`
    draws them (the same distribution, without drawing each unit)."""

    successes: Ints
    scored: Ints
    counts: Ints

    @property
    def n_units(self) -> int:
        return int(self.counts.sum())

    def totals(self) -> tuple[Ints, Ints]:
        """The task's successes and scored episodes under each seed (one row)."""
        return (self.counts @ self.successes)[None, :], (self.counts @ self.scored)[None, :]

    def resample(self, rng: np.random.Generator, resamples: int) -> tuple[Ints, Ints]:
        """`resamples` rows of the successes and scored episodes under each seed, the units resampled."""
        n = self.n_units
        drawn: Ints = rng.multinomial(n, self.counts / n, size=resamples)
        return drawn @ self.successes, drawn @ self.scored


@dataclass(frozen=True)
class SuiteUnits:
    """A run's scored episodes as the suite figures see them: each task's replication units (tasks sorted), how
    many seeds the run has, the tasks left out for want of a scored episode, and whether the env reports success
    at all."""

    tasks: dict[str, TaskUnits]
    seeds: int
    left_out: tuple[str, ...] = ()
    success_signal: bool = True

    @property
    def clustered(self) -> bool:
        """Whether a unit is a (task, index) cluster of several seeds (else an episode)."""
        return self.seeds > 1

    @property
    def unit(self) -> str:
        return "(task, index) cluster" if self.clustered else "episode"


def _task_units(units: Mapping[tuple[tuple[int, int], ...], int]) -> TaskUnits:
    """The kinds of unit (per seed: successes, scored) with their counts, in sorted order: the same units give the
    same arrays, whichever order they were read in."""
    kinds = sorted(units)
    successes = np.array([[cell[0] for cell in kind] for kind in kinds], dtype=np.int64)
    scored = np.array([[cell[1] for cell in kind] for kind in kinds], dtype=np.int64)
    return TaskUnits(successes, scored, np.array([units[kind] for kind in kinds], dtype=np.int64))


Kinds = dict[str, dict[tuple[tuple[int, int], ...], int]]
"""Task → each kind of unit (per seed: successes, scored episodes) → how many units of the task are of that kind."""


def _episode_kinds(scored: Iterable[EpisodeRecord]) -> Kinds:
    """Each scored episode a unit (a run of one seed)."""
    kinds: Kinds = {}
    for r in scored:
        of_task = kinds.setdefault(r.task, {})
        kind = ((int(r.success), 1),)
        of_task[kind] = of_task.get(kind, 0) + 1
    return kinds


def _cluster_kinds(scored: Iterable[EpisodeRecord], seeds: Sequence[int]) -> Kinds:
    """Each (task, index) a unit, with its scored episodes under each of `seeds` (a run of several seeds)."""
    column = {seed: i for i, seed in enumerate(seeds)}
    clusters: dict[tuple[str, int], list[list[int]]] = {}
    for r in scored:
        cluster = clusters.setdefault((r.task, r.index), [[0, 0] for _ in seeds])
        cells = cluster[0 if r.base_seed is None else column.get(r.base_seed, 0)]
        cells[0] += int(r.success)
        cells[1] += 1
    kinds: Kinds = {}
    for (task, _), cluster in clusters.items():
        of_task = kinds.setdefault(task, {})
        kind = tuple((cell[0], cell[1]) for cell in cluster)
        of_task[kind] = of_task.get(kind, 0) + 1
    return kinds


def suite_units(records: Iterable[EpisodeRecord]) -> SuiteUnits:
    """A run's replication units: with one seed, each scored episode; with several (`--seeds`), each (task, index)
    with its scored episodes under every seed, as `seed_clusters` clusters them."""
    every = list(records)
    scored = [r for r in every if r.status.scored]
    seeds = sorted({r.base_seed for r in scored if r.base_seed is not None})
    kinds = _cluster_kinds(scored, seeds) if len(seeds) > 1 else _episode_kinds(scored)
    tasks = {task: _task_units(kinds[task]) for task in sorted(kinds)}
    left_out = tuple(sorted({r.task for r in every} - set(tasks)))
    unsignalled = any(not r.success_signal for r in every) and not any(r.success for r in every)
    return SuiteUnits(tasks, len(seeds) if len(seeds) > 1 else 1, left_out, not unsignalled)


def units_from_tallies(tallies: Mapping[str, Tally]) -> SuiteUnits:
    """A run of one seed's units from its tallies (task → count per status, as `EvalLog.tallies` counts them): the
    same as `suite_units` of its records, without reading them."""
    kinds: Kinds = {}
    for task, tally in tallies.items():
        successes = tally.counts.get(EpisodeStatus.SUCCESS, 0)
        scored = sum(count for status, count in tally.counts.items() if status.scored)
        cells = {((1, 1),): successes, ((0, 1),): scored - successes}
        if scored:
            kinds[task] = {cell: count for cell, count in cells.items() if count}
    tasks = {task: _task_units(kinds[task]) for task in sorted(kinds)}
    left_out = tuple(sorted(set(tallies) - set(tasks)))
    total = sum(tallies.values(), Tally({}, 0))
    unsignalled = bool(total.unsignalled) and not total.counts.get(EpisodeStatus.SUCCESS, 0)
    return SuiteUnits(tasks, 1, left_out, not unsignalled)


def interquartile_mean(scores: npt.ArrayLike) -> float:
    """The interquartile mean of a score matrix (rliable's `aggregate_iqm`: `scipy.stats.trim_mean(scores, 0.25,
    axis=None)`): the matrix flattened, int(n / 4) of its n scores cut from each end, the mean of the rest. Missing
    scores (NaN: a seed that scored nothing on a task) are left out; below four scores nothing is cut, and the IQM is
    the mean."""
    values = np.asarray(scores, dtype=np.float64).ravel()
    values = np.sort(values[~np.isnan(values)])
    if values.size == 0:
        raise ValueError("an interquartile mean needs at least one score")
    cut = int(0.25 * values.size)
    return float(values[cut : values.size - cut].mean())


def improvement_probability(scores_b: npt.ArrayLike, scores_a: npt.ArrayLike) -> float:
    """One task's probability of improvement of B over A (rliable's `probability_of_improvement` for a task: the
    Mann–Whitney U of B's scores against A's over the number of pairs): P(X_B > X_A) + ½ P(X_B = X_A), X_B and X_A
    drawn from the two runs' scores of the task. Missing scores (NaN) are left out."""
    b = np.asarray(scores_b, dtype=np.float64).ravel()
    a = np.asarray(scores_a, dtype=np.float64).ravel()
    b, a = b[~np.isnan(b)], a[~np.isnan(a)]
    if b.size == 0 or a.size == 0:
        raise ValueError("a probability of improvement needs a score on each side")
    greater = (b[:, None] > a[None, :]).sum()
    equal = (b[:, None] == a[None, :]).sum()
    return float((greater + 0.5 * equal) / (b.size * a.size))


def _rates(successes: Ints, scored: Ints) -> Floats:
    """successes / scored, NaN where nothing was scored."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scored > 0, successes / np.maximum(scored, 1), np.nan)


def _task_rate(successes: Ints, scored: Ints) -> Floats:
    """A task's success rate in each row: its successes over its scored episodes, every seed pooled."""
    result: Floats = successes.sum(axis=1) / scored.sum(axis=1)
    return result


def _iqm_rows(matrix: Floats) -> Floats:
    """The interquartile mean of each row (NaN left out)."""
    if not np.isnan(matrix).any():
        ordered = np.sort(matrix, axis=1)
        cut = int(0.25 * matrix.shape[1])
        result: Floats = ordered[:, cut : matrix.shape[1] - cut].mean(axis=1)
        return result
    return np.array([interquartile_mean(row) for row in matrix])


def _improvement_rows(b: Floats, a: Floats) -> Floats:
    """`improvement_probability` of each row of B's scores against the same row of A's (NaN left out)."""
    valid = ~np.isnan(b)[:, :, None] & ~np.isnan(a)[:, None, :]
    greater = ((b[:, :, None] > a[:, None, :]) & valid).sum(axis=(1, 2))
    equal = ((b[:, :, None] == a[:, None, :]) & valid).sum(axis=(1, 2))
    result: Floats = (greater + 0.5 * equal) / valid.sum(axis=(1, 2))
    return result


@dataclass(frozen=True)
class SuiteFigures:
    """A run's suite figures: the mean over tasks of the per-task success rates and the IQM of the per-(seed, task)
    rates, each with its stratified bootstrap interval, the tasks and seeds they count, the unit the bootstrap
    resamples and the tasks left out. Without figures (`mean` None), `reason` says why."""

    tasks: int
    seeds: int
    unit: str
    mean: float | None
    mean_ci: tuple[float, float] | None
    iqm: float | None
    iqm_ci: tuple[float, float] | None
    left_out: tuple[str, ...]
    bootstrap: Bootstrap
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "seeds": self.seeds,
            "unit": self.unit,
            "mean": self.mean,
            "mean_ci": None if self.mean_ci is None else list(self.mean_ci),
            "iqm": self.iqm,
            "iqm_ci": None if self.iqm_ci is None else list(self.iqm_ci),
            "left_out": list(self.left_out),
            "bootstrap": self.bootstrap.to_json(),
            "reason": self.reason,
        }


def _refusal(units: SuiteUnits, what: str) -> str | None:
    """Why a run's units give no suite figure (None when they give one)."""
    if not units.success_signal:
        return "the environment reports no success (it only rewards): a success rate measures nothing"
    if not units.tasks:
        return "no scored episode"
    if len(units.tasks) == 1:
        if units.left_out:
            left = ", ".join(units.left_out)
            return f"one task has scored episodes ({left} none): {what} aggregates over two tasks or more"
        return f"one task: {what} aggregates over tasks; the task's own success rate and interval are its figures"
    return None


def suite_figures(units: SuiteUnits | Iterable[EpisodeRecord], bootstrap: Bootstrap | None = None) -> SuiteFigures:
    """The mean over tasks and the IQM of a run, with stratified bootstrap intervals; none for a run of one task."""
    units = units if isinstance(units, SuiteUnits) else suite_units(units)
    bootstrap = bootstrap or Bootstrap()
    reason = _refusal(units, "the suite figures")
    if reason is not None:
        return SuiteFigures(len(units.tasks), units.seeds, units.unit, None, None, None, None, units.left_out,
                            bootstrap, reason)  # fmt: skip
    rng = np.random.default_rng(bootstrap.seed)
    observed = [task.totals() for task in units.tasks.values()]
    drawn = [task.resample(rng, bootstrap.resamples) for task in units.tasks.values()]
    means = np.mean([_task_rate(*task) for task in drawn], axis=0)
    iqms = _iqm_rows(np.concatenate([_scores(units, *task) for task in drawn], axis=1))
    return SuiteFigures(
        tasks=len(units.tasks),
        seeds=units.seeds,
        unit=units.unit,
        mean=float(np.mean([_task_rate(*task)[0] for task in observed])),
        mean_ci=bootstrap.interval(means),
        iqm=float(_iqm_rows(np.concatenate([_scores(units, *task) for task in observed], axis=1))[0]),
        iqm_ci=bootstrap.interval(iqms),
        left_out=units.left_out,
        bootstrap=bootstrap,
    )


def _scores(units: SuiteUnits, successes: Ints, scored: Ints) -> Floats:
    """A task's scores in each row: its success rate under each seed, or its one rate with one seed."""
    return _rates(successes, scored) if units.clustered else _task_rate(successes, scored)[:, None]


@dataclass(frozen=True)
class Improvement:
    """The probability of improvement P(B > A) of run B over run A with its stratified bootstrap interval, each
    task's own, what a task's scores are (`seed`: the per-seed success rates; `episode`: the episodes' 0/1
    outcomes), the units each run's bootstrap resamples, and the tasks left out with why. Without a probability,
    `reason` says why."""

    probability: float | None
    ci: tuple[float, float] | None
    tasks: int
    scores: str
    unit_a: str
    unit_b: str
    per_task: dict[str, float]
    left_out: dict[str, str]
    bootstrap: Bootstrap
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "probability": self.probability,
            "ci": None if self.ci is None else list(self.ci),
            "tasks": self.tasks,
            "scores": self.scores,
            "unit_a": self.unit_a,
            "unit_b": self.unit_b,
            "per_task": dict(self.per_task),
            "left_out": dict(self.left_out),
            "bootstrap": self.bootstrap.to_json(),
            "reason": self.reason,
        }


def _left_out(a: SuiteUnits, b: SuiteUnits) -> dict[str, str]:
    """The tasks of either run that are not scored in both, each with why."""
    out: dict[str, str] = {}
    runs = (("A", a), ("B", b))
    for task in sorted({*a.tasks, *a.left_out, *b.tasks, *b.left_out} - (set(a.tasks) & set(b.tasks))):
        absent = [side for side, units in runs if task not in units.tasks and task not in units.left_out]
        unscored = [side for side, units in runs if task in units.left_out]
        out[task] = f"not in {' or '.join(absent)}" if absent else f"nothing scored in {' or '.join(unscored)}"
    return out


def improvement(
    a: SuiteUnits | Iterable[EpisodeRecord], b: SuiteUnits | Iterable[EpisodeRecord], bootstrap: Bootstrap | None = None
) -> Improvement:
    """P(B > A) over the tasks both runs scored. A task's scores are its per-seed success rates when both runs have
    several seeds; otherwise its episodes' 0/1 outcomes, which makes the task's probability ½ + ½ (p_B − p_A). Each
    run's units are resampled within each task, independently of the other run's."""
    a = a if isinstance(a, SuiteUnits) else suite_units(a)
    b = b if isinstance(b, SuiteUnits) else suite_units(b)
    bootstrap = bootstrap or Bootstrap()
    by_seed = a.clustered and b.clustered
    common = sorted(set(a.tasks) & set(b.tasks))
    left_out = _left_out(a, b)
    reason = _refusal(a, "the probability of improvement") or _refusal(b, "the probability of improvement")
    if reason is None and len(common) < 2:
        reason = (
            "no task is scored in both runs"
            if not common
            else "one task in common: the probability of improvement aggregates over tasks; the paired difference "
            "and McNemar's test are the task's figures"
        )
    scores = "seed" if by_seed else "episode"
    if reason is not None:
        return Improvement(None, None, len(common), scores, a.unit, b.unit, {}, left_out, bootstrap, reason)
    rng = np.random.default_rng(bootstrap.seed)
    per_task: dict[str, float] = {}
    samples: list[Floats] = []
    for task in common:
        ua, ub = a.tasks[task], b.tasks[task]
        per_task[task] = float(_task_improvement(by_seed, ua.totals(), ub.totals())[0])
        samples.append(_task_improvement(by_seed, ua.resample(rng, bootstrap.resamples),
                                         ub.resample(rng, bootstrap.resamples)))  # fmt: skip
    return Improvement(
        probability=float(np.mean(list(per_task.values()))),
        ci=bootstrap.interval(np.mean(samples, axis=0)),
        tasks=len(common),
        scores=scores,
        unit_a=a.unit,
        unit_b=b.unit,
        per_task=per_task,
        left_out=left_out,
        bootstrap=bootstrap,
    )


def _task_improvement(by_seed: bool, a: tuple[Ints, Ints], b: tuple[Ints, Ints]) -> Floats:
    """A task's P(B > A) in each row: Mann–Whitney over the per-seed rates, or ½ + ½ (p_B − p_A) over episodes."""
    if by_seed:
        return _improvement_rows(_rates(*b), _rates(*a))
    result: Floats = 0.5 + 0.5 * (_task_rate(*b) - _task_rate(*a))
    return result
