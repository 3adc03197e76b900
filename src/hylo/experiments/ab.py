"""A/B comparisons (`hylo ab`): agents A and B on the same episode keys, pair by pair, stopped by the sequential paired
test as soon as it decides.

The two sides are two resumable runs of the comparison's own, `<ab id>-a` and `<ab id>-b` (each its own EvalLog, as
`hylo eval` makes them), run side by side and held pair by pair: episode key i starts on a side only once every key up
to i − W has finished on both (W the workers per side), so both sides of a pair run before the pairs after them. Keys go
task by task within an index (index 0 of every task, then index 1, ...), so a comparison stopped early covers every
task. The test (`hylo.stats.sequential`) takes the pairs in key order, whatever order they finish in, so its decision
does not depend on the worker count. When it decides, or `max_pairs` pairs are in, no more episodes start; those running
finish and are committed. The A/B record (`<log dir>/ab/<ab id>.json`) keeps the decision, the pairs it used, the
difference with its confidence sequence, the flips and the path of the statistic, the design (`anytime` or `capped`),
δ (`min_effect`, the futility stop's) and why it stopped. Re-running the same command resumes both runs and replays
their pairs through the test: the same record.

The A/B id is a function of the runs A and B would be on their own (configuration and agent code, as `hylo eval` names a
run: `resolve.plan_run`), of alpha, and of the design and δ where not the default; not of the cap, so that re-running
with a larger `--max-episodes` continues the same comparison (the anytime test stays valid when a stopped comparison
is extended). A capped comparison's boundary is calibrated to its cap: re-running it with another is refused.
A comparison never extends a run that
`hylo eval` made: its runs are named after it. With `reuse_runs` it takes the runs `hylo eval` would resume for A's and
B's configurations instead (and extends them); that is another comparison, another id.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from hylo.confined import confined_file
from hylo.core.errors import HyloError
from hylo.eval.resolve import plan_run, resolve
from hylo.eval.runner import EvalResult, Evaluation
from hylo.eval.spec import EvalSpec
from hylo.eval.worker import EpisodeJob
from hylo.evallog.logdir import AB_DIR, FILENAME, records_oldest_first
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog
from hylo.stats.sequential import DESIGNS, Design, PairedSequentialTest

SIDES = ("a", "b")
AB_ID = re.compile(r"ab-[0-9a-f]{12}")
"""What an A/B id looks like: `ab-` and 12 hex digits (`ab_id`)."""


class ABError(HyloError, ValueError):
    """An A/B comparison that cannot be made as asked (its two runs would not pair), or a record that is not there."""


class ABNotFound(ABError, LookupError):
    """An A/B id with no record in the log dir (or no A/B id at all)."""


class PairCoordinator:
    """The two runs' shared state: which keys may start, the results so far, the test fed in key order."""

    def __init__(
        self, keys: list[str], window: int, alpha: float, design: Design = "anytime", min_effect: float | None = None
    ) -> None:
        self.keys = keys
        self.position = {key: i for i, key in enumerate(keys)}
        self.window = window
        self.test = PairedSequentialTest(alpha=alpha, design=design, max_pairs=len(keys), min_effect=min_effect)
        self.results: dict[str, dict[str, EpisodeRow]] = {side: {} for side in SIDES}
        self.consumed = 0  # keys fed to the test
        self.pairs_used: int | None = None  # keys fed when it stopped (decided, futile or curtailed)
        self.failed = False  # a side's run ended with an error: the other stops too
        self._changed = threading.Condition()

    @property
    def stopped(self) -> bool:
        return self.failed or self.test.stopped or self.consumed >= len(self.keys)

    def load(self, side: str, rows: list[EpisodeRow]) -> None:
        """A side's episodes already in its log (a resumed comparison)."""
        with self._changed:
            for row in rows:
                if row.episode_id in self.position:
                    self.results[side][row.episode_id] = row
            self._advance()

    def may_start(self, episode_id: str) -> bool:
        with self._changed:
            position = self.position.get(episode_id)
            return not self.stopped and position is not None and position < self.consumed + self.window

    def finished(self, side: str, row: EpisodeRow) -> None:
        with self._changed:
            self.results[side][row.episode_id] = row
            self._advance()
            self._changed.notify_all()

    def fail(self) -> None:
        with self._changed:
            self.failed = True
            self._changed.notify_all()

    def wait(self, timeout: float) -> None:
        with self._changed:
            if not self.stopped:
                self._changed.wait(timeout)

    def _advance(self) -> None:
        """Feed the test every pair complete on both sides, in key order, until it stops."""
        a, b = self.results["a"], self.results["b"]
        while not self.test.stopped and self.consumed < len(self.keys):
            key = self.keys[self.consumed]
            if key not in a or key not in b:
                return
            self.consumed += 1
            if self._stops_at(_outcome(a[key]), _outcome(b[key])):
                self.pairs_used = self.consumed

    def _stops_at(self, a_outcome: bool | None, b_outcome: bool | None) -> bool:
        """Feed one pair; whether the test stopped on it."""
        self.test.add(a_outcome, b_outcome)
        return self.test.stopped


def _outcome(row: EpisodeRow) -> bool | None:
    """A side's outcome on a pair: its success, or None when its episode abstained (error, infra_invalid)."""
    return row.success if row.status.scored else None


class SideGate:
    """One run's view of the coordinator (a `DispatchGate`)."""

    def __init__(self, coordinator: PairCoordinator, side: str) -> None:
        self.coordinator = coordinator
        self.side = side

    @property
    def stopped(self) -> bool:
        return self.coordinator.stopped

    def order(self, jobs: list[EpisodeJob]) -> list[EpisodeJob]:
        position = self.coordinator.position
        return sorted(jobs, key=lambda job: position.get(job.task.episode_id, len(position)))

    def may_start(self, job: EpisodeJob) -> bool:
        return self.coordinator.may_start(job.task.episode_id)

    def finished(self, row: EpisodeRow) -> None:
        self.coordinator.finished(self.side, row)

    def wait(self, timeout: float) -> None:
        self.coordinator.wait(timeout)


@dataclass(frozen=True)
class ABResult:
    """A finished (or stopped) comparison: both runs' results, the test, and where its record is."""

    ab_id: str
    run_a: EvalResult
    run_b: EvalResult
    test: PairedSequentialTest
    pairs_used: int
    max_pairs: int
    record: Path
    reuse_runs: bool = False
    logged_before: dict[str, int] | None = None  # each side's episodes already in its log when this call began

    def to_json(self) -> dict[str, Any]:
        test = self.test.to_json()
        return {
            "ab_id": self.ab_id,
            "decision": test["decision"],
            "pairs_used": self.pairs_used,
            "difference": test["difference"],
            "confidence_sequence": test["confidence_sequence"],
            "confidence_sequence_kind": test["confidence_sequence_kind"],
            "flips": test["flips"],
            "abstentions": test["abstentions"],
            "run_a": self.run_a.run_id,
            "run_b": self.run_b.run_id,
            "reuse_runs": self.reuse_runs,
            "agent_a": self.run_a.spec["agent"],
            "agent_b": self.run_b.spec["agent"],
            "max_pairs": self.max_pairs,
            "alpha": test["alpha"],
            "log_evalue": test["log_evalue"],
            "threshold": test["threshold"],
            "path": list(self.test.path),
            **self.test.design_json(),
        }


def keys_of(evaluation: Evaluation, max_pairs: int) -> list[str]:
    """The comparison's episode keys in order: index by index, each task in turn (under each seed in turn), the
    first `max_pairs`."""
    resolved, spec = evaluation.resolved, evaluation.spec
    benchmark = resolved.benchmark
    keys = [
        benchmark.task_instance(resolved.split, task, index, seed).episode_id
        for index in range(spec.episodes)
        for task in resolved.tasks
        for seed in spec.seed_list
    ]
    return keys[:max_pairs]


def ab_id(
    run_a: str,
    run_b: str,
    alpha: float,
    *,
    reuse_runs: bool = False,
    design: Design = "anytime",
    min_effect: float | None = None,
) -> str:
    """The comparison's id, from the runs A and B would be on their own (`hylo eval`'s names for them: configuration
    and code), alpha, whether it takes those runs themselves, and the design and δ where not the default (an anytime
    comparison without δ keeps the id it always had)."""
    identity: list[Any] = [run_a, run_b, alpha] + (["reuse-runs"] if reuse_runs else [])
    identity += [f"design={design}"] if design != "anytime" else []
    identity += [f"min-effect={min_effect!r}"] if min_effect is not None else []
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()
    return f"ab-{digest[:12]}"


def run_ab(
    spec_a: EvalSpec,
    spec_b: EvalSpec,
    *,
    max_pairs: int,
    alpha: float = 0.05,
    reuse_runs: bool = False,
    design: Design = "anytime",
    min_effect: float | None = None,
) -> ABResult:
    """Compare A (`spec_a`) and B (`spec_b`, the same but for the agent) for at most `max_pairs` pairs, on runs of
    the comparison's own (`reuse_runs`: on the runs `hylo eval` would resume for A and B, extending them), with the
    test's `design` and, given δ (`min_effect`), a futility stop. A capped comparison re-run with another cap is
    refused: its boundary is calibrated to its cap."""
    if max_pairs < 1:
        raise ABError(f"--max-episodes must be at least 1, got {max_pairs}")
    if design not in DESIGNS:
        raise ABError(f"--design must be one of {', '.join(DESIGNS)}, got {design!r}")
    if min_effect is not None and not 0.0 < min_effect < 1.0:
        raise ABError(f"--min-effect must be a difference in (0, 1), got {min_effect!r}")
    if reuse_runs and (spec_a.fresh or spec_b.fresh):
        raise ABError("--reuse-runs takes the runs hylo eval made, --fresh starts new ones: give one of them")
    tasks = spec_a.tasks or resolve(spec_a).tasks  # none named: every task of the split
    per_task = math.ceil(max_pairs / (len(tasks) * len(spec_a.seed_list)))
    sized = {side: _sized(spec, per_task) for side, spec in zip(SIDES, (spec_a, spec_b), strict=True)}
    own = {side: eval_run_id(spec) for side, spec in sized.items()}
    if own["a"] == own["b"]:
        raise ABError(f"A and B are the same run ({own['a']}): give them different agents or agent arguments")
    identity = ab_id(own["a"], own["b"], alpha, reuse_runs=reuse_runs, design=design, min_effect=min_effect)
    record = Path(sized["a"].log_path).resolve() / AB_DIR / f"{identity}.json"
    _refuse_another_cap(record, max_pairs)
    sides = {side: spec if reuse_runs else _named(spec, f"{identity}-{side}") for side, spec in sized.items()}
    evaluations = {side: Evaluation(spec) for side, spec in sides.items()}
    a, b = evaluations["a"], evaluations["b"]
    keys = keys_of(a, max_pairs)
    if keys != keys_of(b, max_pairs):
        raise ABError("A and B do not plan the same episodes: they must share benchmark, split, tasks and seed")
    coordinator = PairCoordinator(keys, window=max(1, sides["a"].workers), alpha=alpha, design=design,
                                  min_effect=min_effect)  # fmt: skip
    logged_before = {}
    for side, evaluation in evaluations.items():
        logged = _logged(evaluation.run_dir)
        logged_before[side] = len(logged)
        coordinator.load(side, logged)
        evaluation.gate = SideGate(coordinator, side)
    results = _run_both(evaluations, coordinator)
    pairs_used = coordinator.pairs_used if coordinator.pairs_used is not None else coordinator.consumed
    result = ABResult(identity, results["a"], results["b"], coordinator.test, pairs_used, len(keys),
                      record, reuse_runs, logged_before)  # fmt: skip
    _write_record(result)
    return result


def _refuse_another_cap(record: Path, max_pairs: int) -> None:
    """A capped comparison already recorded under another cap cannot go on: its boundary is calibrated to its cap,
    and is not valid past it (nor is a smaller cap the same test)."""
    if not record.is_file():
        return
    try:
        before = json.loads(record.read_text())
    except (OSError, ValueError):
        return  # not a record any more: made anew
    if not isinstance(before, dict):
        return
    cap = before.get("max_pairs")
    if before.get("design") == "capped" and isinstance(cap, int) and cap != max_pairs:
        raise ABError(
            f"A/B {record.stem} is capped at {cap} pairs: its boundary is calibrated to that cap, and a capped record "
            f"cannot be extended or cut to --max-episodes {max_pairs}. Re-run it with --max-episodes {cap}, or "
            "compare with --design anytime, which a larger --max-episodes extends"
        )


def eval_run_id(spec: EvalSpec) -> str:
    """The run `hylo eval` would make or resume for `spec`: its configuration and its agent's code, digested."""
    run_id = plan_run(spec).run_id
    if run_id is None:  # plan_run names every run it plans
        raise ABError(f"no run id for {spec.agent!r}")
    return run_id


def _named(spec: EvalSpec, run_id: str) -> EvalSpec:
    """`spec` with its run named `run_id` (a new comparison's run is new: `fresh` is spent on its id)."""
    return EvalSpec.model_validate({**spec.model_dump(), "run_id": run_id, "fresh": False})


def _sized(spec: EvalSpec, episodes: int) -> EvalSpec:
    """`spec` planning `episodes` per task (a comparison sizes its runs to its pairs)."""
    return EvalSpec.model_validate({**spec.model_dump(), "episodes": episodes})


def _logged(run_dir: Path) -> list[EpisodeRow]:
    """The final episodes already in a run's log (none for a new run)."""
    if not (run_dir / FILENAME).exists():
        return []
    with EvalLog.open(run_dir) as log:
        return log.final_episodes()


def _run_both(evaluations: dict[str, Evaluation], coordinator: PairCoordinator) -> dict[str, EvalResult]:
    """Run A on a thread of its own and B on this one; a failure of either stops the other, and is raised."""
    results: dict[str, EvalResult] = {}
    errors: list[BaseException] = []

    def run(side: str) -> None:
        try:
            results[side] = evaluations[side].run()
        except BaseException as exc:
            errors.append(exc)
            coordinator.fail()

    thread = threading.Thread(target=run, args=("a",), name="hylo-ab-a", daemon=True)
    thread.start()
    try:
        run("b")
    finally:
        if errors:
            coordinator.fail()
        thread.join()
    if errors:
        raise errors[0]
    return results


def _write_record(result: ABResult) -> None:
    result.record.parent.mkdir(parents=True, exist_ok=True)
    partial = result.record.with_suffix(".json.partial")
    partial.write_text(json.dumps(result.to_json(), indent=1) + "\n")
    os.replace(partial, result.record)


def read_ab(log_dir: Path, identity: str) -> dict[str, Any]:
    """An A/B record by its id."""
    if not AB_ID.fullmatch(identity):
        raise ABNotFound(f"{identity!r} is not an A/B id (ab-<12 hex digits>)")
    path = confined_file(log_dir, PurePath(AB_DIR, f"{identity}.json"))
    if path is None:
        known = ", ".join(p.stem for p in _record_paths(log_dir)) or "none"
        raise ABNotFound(f"no A/B comparison {identity!r} in {log_dir}; there are: {known}")
    record: dict[str, Any] = json.loads(path.read_text())
    record.setdefault("confidence_sequence_kind", "betting")  # made before its interval was the test's own
    record.setdefault("reuse_runs", False)
    record.setdefault("design", "anytime")  # made before the designs
    record.setdefault("min_effect", None)
    record.setdefault("extendable", record["design"] == "anytime")
    return record


def list_ab(log_dir: Path) -> list[dict[str, Any]]:
    """Every A/B record of the log dir, oldest first (a file that no longer reads as a record is left out)."""
    return records_oldest_first(_record_paths(log_dir))


def _record_paths(log_dir: Path) -> list[Path]:
    """The A/B records' files, by id."""
    directory = log_dir / AB_DIR
    if not directory.is_dir():
        return []
    found = (confined_file(log_dir, PurePath(AB_DIR, p.name)) for p in directory.glob("ab-*.json"))
    return sorted(p for p in found if p is not None and AB_ID.fullmatch(p.stem))
