"""Latency sweeps (`hylo sweep`): one agent under the chunked-execution protocol at every grid point of latency d
(control steps) × execution horizon s, on the same episodes, success against latency.

Each grid point is one resumable run of the sweep's own, `<runs id>-d<d>-s<s>` (its own EvalLog, as `hylo eval` makes
it; the runs id is the sweep's but for its episodes, so that sweeps of 5 and of 10 episodes share their runs), of the
base spec with realtime timing on the virtual clock: schedule "chunked", adaptive refill off, `latency_steps` d and
`execution_steps` s (none given: the agent's own). A point outside max(1, d) <= s <= H - d (H the agent's
`chunk_size`, when it declares one) is refused with the rule and listed; the others run, one after the other. Each
point is paired against the zero-latency point at its horizon by McNemar's exact test (as `hylo compare` pairs two
runs). The sweep id is a function of the base spec's digest, the agent's code, the grid and the episodes alone, so the
same command resumes the same sweep and the same runs, and edited agent code makes another sweep. A sweep never extends
a run that `hylo eval` made; with `reuse_runs` it takes, for each point, the run `hylo eval` would resume for that
point's configuration (and extends it): that is another sweep, another id. The record
(`<log dir>/sweeps/<id>/sweep.json`) and the plot (`plot.png`, `plot.svg`: success against latency, one line per
horizon, Wilson bands) are written beside each other, deterministically.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from hylo.confined import confined_file
from hylo.core.errors import HyloError
from hylo.core.timing import CHUNKED_OPTIONS, check_horizon
from hylo.eval.resolve import declared_chunking, make_timing, plan_run, resolve
from hylo.eval.runner import EvalResult, Evaluation
from hylo.eval.spec import MAX_STEPS, EvalSpec
from hylo.evallog.logdir import FILENAME, SWEEPS_DIR, records_oldest_first
from hylo.evallog.rows import EpisodeRow, records
from hylo.evallog.store import EvalLog
from hylo.stats.success import NoPairs, compare_runs, summarize

SWEEP_ID = re.compile(r"sweep-[0-9a-f]{12}")
"""What a sweep id looks like: `sweep-` and 12 hex digits (`sweep_id`)."""
RECORD = "sweep.json"
"""The sweep's record, in `<log dir>/sweeps/<sweep id>/`."""
PLOT_PNG = "plot.png"
PLOT_SVG = "plot.svg"
MAX_POINTS = 256
"""The most grid points one sweep may plan."""
KEPT_OPTIONS = ("strategy", "ensemble_m", "max_hold_steps")
"""The base spec's timing options every point keeps; the sweep sets the rest itself."""
SWEEP_SETS: dict[str, Any] = CHUNKED_OPTIONS
"""The timing options every point has, whatever the base spec says (besides its latency and horizon): the
chunked-execution protocol's on the virtual clock."""


class SweepError(HyloError, ValueError):
    """A sweep that cannot be run as asked (a bad grid, no valid point), or a record that is not there."""


class SweepNotFound(SweepError, LookupError):
    """A sweep id with no record in the log dir (or no sweep id at all)."""


@dataclass(frozen=True)
class GridPoint:
    """One point of the grid: latency d and execution horizon s (None: the agent's own), in control steps."""

    latency_steps: int
    execution_steps: int | None

    def sort_key(self) -> tuple[int, int]:
        """Latency, then horizon (the agent's own first), ascending."""
        return (self.latency_steps, -1 if self.execution_steps is None else self.execution_steps)

    def to_json(self) -> dict[str, int | None]:
        return {"latency_steps": self.latency_steps, "execution_steps": self.execution_steps}


@dataclass(frozen=True)
class Grid:
    """The grid asked for, split into the points that run and those refused (each with the rule it breaks)."""

    latency_steps: list[int]
    execution_steps: list[int] | None
    chunk_size: int | None
    points: list[GridPoint]
    refused: list[tuple[GridPoint, str]]


def _checked_steps(values: Sequence[int], flag: str, minimum: int) -> list[int]:
    """`values` ascending, each an int in [minimum, MAX_STEPS] and given once; raises `SweepError` naming a bad one."""
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_STEPS:
            raise SweepError(f"{flag} takes integers from {minimum} to {MAX_STEPS:,}, got {value!r}")
    repeated = sorted({value for value in values if list(values).count(value) > 1})
    if repeated:
        raise SweepError(f"{flag} lists each value once; repeated: {repeated}")
    return sorted(values)


def _refusal(point: GridPoint, chunk_size: int | None, own_steps: int | None) -> str | None:
    """Why a point breaks max(1, d) <= s <= H - d (core's `check_horizon` message), or None. s None is the agent's
    own `execution_steps` (`own_steps`: H when it sets none); a bound that is not known is not checked."""
    d = point.latency_steps
    s = point.execution_steps if point.execution_steps is not None else own_steps
    if s is None:
        return None
    try:
        check_horizon(chunk_size, d, s)
    except ValueError as exc:
        return str(exc)
    return None


def plan_grid(spec: EvalSpec, latency_steps: Sequence[int], execution_steps: Sequence[int] | None) -> Grid:
    """The grid `latency_steps` × `execution_steps` (None: the agent's own s), ordered by latency then horizon, each
    point checked against the rule. Raises `SweepError` for a bad value, a grid too large or no valid point."""
    if not latency_steps:
        raise SweepError("--latency-steps needs at least one latency (control steps, e.g. 0 1 2 3 4)")
    latencies = _checked_steps(latency_steps, "--latency-steps", 0)
    horizons = None if not execution_steps else _checked_steps(execution_steps, "--execution-steps", 1)
    size = len(latencies) * (len(horizons) if horizons else 1)
    if size > MAX_POINTS:
        raise SweepError(f"a sweep runs at most {MAX_POINTS} grid points; {size} were asked for")
    chunk_size, own_steps = declared_chunking(spec, resolve(spec).benchmark)
    points: list[GridPoint] = []
    refused: list[tuple[GridPoint, str]] = []
    columns: list[int | None] = list(horizons) if horizons else [None]
    for d in latencies:
        for s in columns:
            point = GridPoint(d, s)
            why = _refusal(point, chunk_size, own_steps)
            if why is None:
                points.append(point)
            else:
                refused.append((point, why))
    if not points:
        rules = "; ".join(f"d={p.latency_steps}, s={p.execution_steps}: {why}" for p, why in refused)
        raise SweepError(f"no grid point can run: {rules}")
    return Grid(latencies, horizons, chunk_size, points, refused)


def _kept_options(spec: EvalSpec) -> dict[str, Any]:
    """The base spec's timing options every point keeps; any other is refused (the sweep sets latency, schedule,
    clock and refill itself), unless it says what the sweep sets anyway."""
    options = {key: value for key, value in spec.timing_options.items() if SWEEP_SETS.get(key, ...) != value}
    others = sorted(set(options) - set(KEPT_OPTIONS))
    if others:
        raise SweepError(
            f"a sweep sets the timing itself (chunked schedule, virtual clock, latency d, horizon s); it keeps only "
            f"{list(KEPT_OPTIONS)} of the base spec's timing options, got {others}"
        )
    return {key: options[key] for key in KEPT_OPTIONS if key in options}


def point_timing(base: EvalSpec, point: GridPoint) -> tuple[str, dict[str, Any]]:
    """The timing and timing options of a grid point's run: the chunked-execution protocol on the virtual clock at
    latency d and horizon s (s omitted: each chunk's own), with the base spec's strategy, ensemble_m and
    max_hold_steps."""
    options: dict[str, Any] = {**SWEEP_SETS, "latency_steps": point.latency_steps}
    if point.execution_steps is not None:
        options["execution_steps"] = point.execution_steps
    return "realtime", {**options, **_kept_options(base)}


def point_spec(base: EvalSpec, point: GridPoint, run_id: str | None = None) -> EvalSpec:
    """The spec of a grid point's run: the base spec at the point's timing, its run named `run_id` (None: by its
    digest, as `hylo eval` names it)."""
    timing, options = point_timing(base, point)
    fields = {"timing": timing, "timing_options": options, "run_id": run_id}
    return EvalSpec.model_validate({**base.model_dump(), **fields, **({"fresh": False} if run_id else {})})


def point_run_id(runs: str, point: GridPoint) -> str:
    """The run at `point` of the sweeps whose runs are named `runs` (`runs_id`): `<runs>-d<d>-s<s>` (`-d<d>` alone
    where s is the agent's own)."""
    horizon = "" if point.execution_steps is None else f"-s{point.execution_steps}"
    return f"{runs}-d{point.latency_steps}{horizon}"


def _identity(base: EvalSpec, grid: Grid, reuse_runs: bool) -> list[Any]:
    """What a sweep is but for its episodes: the base spec's digest (timing reduced to the options every point
    keeps), the grid, the agent's code and whatever else names a run (the name `hylo eval` gives the first point's
    run: every point shares the agent and its code), and whether it takes `hylo eval`'s runs (`reuse_runs`)."""
    kept = EvalSpec.model_validate({**base.model_dump(), "timing": "realtime", "timing_options": _kept_options(base)})
    first = plan_run(point_spec(base, grid.points[0])).run_id
    return [kept.digest(), grid.latency_steps, grid.execution_steps, first] + (["reuse-runs"] if reuse_runs else [])


def _hashed(identity: list[Any]) -> str:
    return f"sweep-{hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:12]}"


def sweep_id(base: EvalSpec, grid: Grid, *, reuse_runs: bool = False) -> str:
    """The sweep's id: what it is (`_identity`) and its episodes per task (a sweep of fewer episodes is another
    sweep, over the same runs: `runs_id`)."""
    return _hashed([*_identity(base, grid, reuse_runs), base.episodes])


def runs_id(base: EvalSpec, grid: Grid, *, reuse_runs: bool = False) -> str:
    """What the sweep's runs are named after (`point_run_id`): the sweep but for its episodes, so that sweeps of 5
    and of 10 episodes share their runs (the first 5 episodes of each) and keep records of their own."""
    return _hashed(_identity(base, grid, reuse_runs))


def planned_episodes(base: EvalSpec, result: EvalResult) -> list[EpisodeRow]:
    """The episodes of a point's run that the sweep planned: indices below `base.episodes` under the base's seeds. A
    point's run may hold more (a sweep of more episodes extended it, or `hylo eval` did, with `reuse_runs`); its other
    episodes are not this sweep's, so every point is scored and paired on the same episodes."""
    seeds = set(base.seed_list)
    return [row for row in result.episodes if row.index < base.episodes and row.base_seed in seeds]


def _point_json(
    point: GridPoint, result: EvalResult, rows: list[EpisodeRow], baseline: tuple[str, list[EpisodeRow]] | None
) -> dict[str, Any]:
    """A point's figures over its planned `rows`: success rate over the scored episodes with the Wilson interval,
    McNemar's p against the zero-latency run at its horizon (`baseline`: its run id and rows; null for that run
    itself, or when there is none or nothing pairs), the pairs it used, its run."""
    summary = summarize(records(rows))
    p_value: float | None = None
    abstained: int | None = None
    pairs: int | None = None
    if baseline is not None and baseline[0] != result.run_id:
        try:
            comparison = compare_runs(records(baseline[1]), records(rows))
        except NoPairs:
            comparison = None
        if comparison is not None:
            p_value, abstained, pairs = comparison.p_value, comparison.abstained, comparison.n_pairs
    return {
        **point.to_json(),
        "success_rate": summary.success_rate,
        "success_ci": list(summary.success_ci) if summary.success_ci is not None else None,
        "mcnemar_p": p_value,
        "run_id": result.run_id,
        "n": summary.n,
        "scored": summary.scored,
        "successes": summary.successes,
        "conservative_success_rate": summary.conservative_success_rate,
        "status_counts": dict(summary.status_counts),
        "pairs": pairs,
        "abstained_pairs": abstained,
    }


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep: its record and where it is."""

    record: dict[str, Any]
    directory: Path
    logged_before: dict[GridPoint, int] | None = None  # each point's episodes already in its run when this call began

    @property
    def sweep_id(self) -> str:
        return str(self.record["sweep_id"])


def run_sweep(
    base: EvalSpec,
    latency_steps: Sequence[int],
    execution_steps: Sequence[int] | None = None,
    *,
    watch: Callable[[GridPoint, Evaluation], AbstractContextManager[object]] | None = None,
    reuse_runs: bool = False,
) -> SweepResult:
    """Run (or resume) every valid grid point of `base` in order, then write the record and the plot. Each point's
    run is the sweep's own (`reuse_runs`: the run `hylo eval` would resume for the point, extended), and runs inside
    `watch(point, evaluation)` (a progress display). A point's run that fails raises: re-run the sweep to resume it."""
    if base.run_id is not None:
        raise SweepError("a sweep names its runs itself (one per grid point); drop --run-id")
    if reuse_runs and base.fresh:
        raise SweepError("--reuse-runs takes the runs hylo eval made, --fresh starts new ones: give one of them")
    grid = plan_grid(base, latency_steps, execution_steps)
    identity = sweep_id(base, grid, reuse_runs=reuse_runs)
    runs = runs_id(base, grid, reuse_runs=reuse_runs)
    specs = {  # every point's spec checked before any runs
        point: point_spec(base, point, None if reuse_runs else point_run_id(runs, point)) for point in grid.points
    }
    for spec in specs.values():
        make_timing(spec)
    results: dict[GridPoint, EvalResult] = {}
    logged_before: dict[GridPoint, int] = {}
    for point, spec in specs.items():
        evaluation = Evaluation(spec)
        logged_before[point] = _logged_count(evaluation.run_dir)
        with watch(point, evaluation) if watch is not None else nullcontext():
            results[point] = evaluation.run()
    rows = {point: planned_episodes(base, result) for point, result in results.items()}
    baselines = {p.execution_steps: (r.run_id, rows[p]) for p, r in results.items() if p.latency_steps == 0}
    points = [
        _point_json(p, r, rows[p], baselines.get(p.execution_steps)) for p, r in sorted(results.items(), key=_order)
    ]
    first = next(iter(results.values()))
    record = {
        "sweep_id": identity,
        "benchmark": base.benchmark,
        "split": first.spec.get("split"),
        "tasks": first.spec.get("tasks"),
        "agent": base.agent,
        "agent_args": base.agent_args,
        "episodes": base.episodes,
        "seeds": base.seed_list,
        "chunk_size": grid.chunk_size,
        "latency_steps": grid.latency_steps,
        "execution_steps": grid.execution_steps,
        "timing_options": _kept_options(base),
        "reuse_runs": reuse_runs,
        "points": points,
        "refused": [{**p.to_json(), "reason": why} for p, why in grid.refused],
        "plot": {"png": PLOT_PNG, "svg": PLOT_SVG},
    }
    directory = base.log_path.resolve() / SWEEPS_DIR / identity
    directory.mkdir(parents=True, exist_ok=True)
    from hylo.experiments.sweep_plot import write_plots  # start-up time: matplotlib, only for a drawing

    write_plots(record, directory / PLOT_PNG, directory / PLOT_SVG)
    _write_json(directory / RECORD, record)
    return SweepResult(record, directory, logged_before)


def _logged_count(run_dir: Path) -> int:
    """The final episodes already in a run's log (0 for a new run)."""
    if not (run_dir / FILENAME).exists():
        return 0
    with EvalLog.open(run_dir) as log:
        return len(log.final_episodes())


def _order(item: tuple[GridPoint, EvalResult]) -> tuple[int, int]:
    return item[0].sort_key()


def _write_json(path: Path, record: dict[str, Any]) -> None:
    partial = path.with_suffix(f".json.{os.getpid()}.partial")  # two sweeps writing the same record never share it
    partial.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(partial, path)


def sweep_dir(log_dir: Path, identity: str) -> Path:
    """A recorded sweep's directory, by its id; raises `SweepNotFound` for a malformed or unknown id."""
    if not SWEEP_ID.fullmatch(identity):
        raise SweepNotFound(f"{identity!r} is not a sweep id (sweep-<12 hex digits>)")
    record = confined_file(log_dir, PurePath(SWEEPS_DIR, identity, RECORD))
    if record is None:
        known = ", ".join(p.parent.name for p in _record_paths(log_dir)) or "none"
        raise SweepNotFound(f"no sweep {identity!r} in {log_dir}; there are: {known}")
    return record.parent


def read_sweep(log_dir: Path, identity: str) -> dict[str, Any]:
    """A sweep's record by its id."""
    record: dict[str, Any] = json.loads((sweep_dir(log_dir, identity) / RECORD).read_text())
    return record


def sweep_plot(log_dir: Path, identity: str, name: str) -> Path:
    """The path of a recorded sweep's plot (`name` is `PLOT_SVG` or `PLOT_PNG`); `SweepNotFound` when it is missing."""
    if name not in (PLOT_SVG, PLOT_PNG):
        raise SweepNotFound(f"a sweep's plot is {PLOT_SVG} or {PLOT_PNG}, not {name!r}")
    path = confined_file(log_dir, PurePath(SWEEPS_DIR, sweep_dir(log_dir, identity).name, name))
    if path is None:
        raise SweepNotFound(f"sweep {identity!r} has no {name}")
    return path


def list_sweeps(log_dir: Path) -> list[dict[str, Any]]:
    """Every sweep record of the log dir, oldest first (a file that no longer reads as a record is left out)."""
    return records_oldest_first(_record_paths(log_dir))


def _record_paths(log_dir: Path) -> list[Path]:
    """The sweep records' files, by id."""
    directory = log_dir / SWEEPS_DIR
    if not directory.is_dir():
        return []
    found = (confined_file(log_dir, PurePath(SWEEPS_DIR, p.name, RECORD)) for p in directory.glob("sweep-*"))
    return sorted(p for p in found if p is not None and SWEEP_ID.fullmatch(p.parent.name))
